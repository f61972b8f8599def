// Verifiers and folders of the reduction and shape/data-movement ops.
#include "lib/ir/dialect/Verification.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/Support/CheckedArithmetic.h"

namespace mstep::dialect {

using llvm::ArrayRef;
using llvm::LogicalResult;
using mlir::success;
using rules::shapeString;

namespace {

/// Checks `dim` < rank, naming the input's type.
/// `dim` is a dim of `input`. With `scalarAsVector`, a 0-d input has dim 0,
/// as in PyTorch's gather and scatter_add (a scalar indexes like a 1-element
/// vector).
LogicalResult checkDim(mlir::Operation* op, int64_t dim, mlir::Value input,
                       bool scalarAsVector = false) {
  if (dim < rankOf(input) || (scalarAsVector && rankOf(input) == 0 && dim == 0)) return success();
  return op->emitOpError() << "dim " << dim << " is out of range for input " << input.getType()
                           << " (dims must be in [0, " << rankOf(input) << "))";
}

/// Checks 0 <= start <= end <= size of `dim` (the tracer's normalized form).
LogicalResult checkSliceBounds(mlir::Operation* op, mlir::Value input, int64_t dim, int64_t start,
                               int64_t end) {
  const int64_t size = dimsOf(input)[dim];
  if (start <= end && end <= size) return success();
  return op->emitOpError() << "slice [" << start << ":" << end << "] of dim " << dim << " (size "
                           << size << ") must satisfy 0 <= start <= end <= size";
}

LogicalResult checkResultShape(mlir::Operation* op, ArrayRef<int64_t> expected,
                               llvm::StringRef why) {
  ArrayRef<int64_t> got = dimsOf(op->getResult(0));
  if (got == expected) return success();
  return op->emitOpError() << "result shape " << shapeString(got) << " must be "
                           << shapeString(expected) << " (" << why << ")";
}

}  // namespace

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult verifyReduction(mlir::Operation* op, ArrayRef<int64_t> dims, bool keepdim,
                              ReductionCheck check) {
  mlir::Value input = op->getOperand(0);
  ArrayRef<int64_t> in = dimsOf(input);
  if (std::optional<std::string> why = rules::checkDimList(dims, rankOf(input)))
    return op->emitOpError() << *why << "; the input is " << input.getType();
  if (check == ReductionCheck::singleOrAll && dims.size() != 1 &&
      static_cast<int64_t>(dims.size()) != rankOf(input))
    return op->emitOpError() << "reduces over one dim or over all dims, got dims "
                             << shapeString(dims) << " for input " << input.getType();
  if (check != ReductionCheck::none)
    for (int64_t d : dims)
      if (in[d] == 0)
        return op->emitOpError() << "reduction dim " << d << " of input " << input.getType()
                                 << " has size 0, and this reduction has no identity";
  std::string why = "input " + shapeString(in) + " reduced over dims " + shapeString(dims) +
                    (keepdim ? " with keepdim" : "");
  return checkResultShape(op, rules::reducedShape(in, dims, keepdim), why);
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  const std::optional<int64_t> in = rules::numElements(dimsOf(getInput()));
  const std::optional<int64_t> out = rules::numElements(getType().getShape());
  if (!in || !out)
    return emitOpError() << "the element count of " << (in ? getType() : getInput().getType())
                         << " overflows int64";
  if (*in == *out) return success();
  return emitOpError() << "cannot reshape " << getInput().getType() << " (" << *in
                       << " elements) to " << getType() << " (" << *out
                       << " elements): the element count must stay the same";
}

mlir::OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) return getInput();
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput()); // reshape(reshape(x)) = reshape(x)
    return getResult();
  }
  return {};
}

LogicalResult PermuteOp::verify() {
  ArrayRef<int64_t> perm = getPerm();
  ArrayRef<int64_t> in = dimsOf(getInput());
  if (perm.size() != in.size())
    return emitOpError() << "perm " << shapeString(perm) << " has " << perm.size()
                         << " entries but the input " << getInput().getType() << " has rank "
                         << in.size();
  llvm::SmallVector<bool, 4> seen(in.size(), false);
  rules::Dims expected;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size()) || seen[p])
      return emitOpError() << "perm " << shapeString(perm)
                           << " must list every dim of the input exactly once";
    seen[p] = true;
    expected.push_back(in[p]);
  }
  return checkResultShape(*this, expected, "the input's dims in perm order");
}

mlir::OpFoldResult PermuteOp::fold(FoldAdaptor) {
  // permute(permute(x, inner), outer) = permute(x, inner[outer[i]]).
  bool changed = false;
  if (auto producer = getInput().getDefiningOp<PermuteOp>()) {
    llvm::SmallVector<int64_t> composed;
    for (int64_t p : getPerm()) composed.push_back(producer.getPerm()[p]);
    setPerm(composed);
    getInputMutable().assign(producer.getInput());
    changed = true;
  }
  for (auto [i, p] : llvm::enumerate(getPerm()))
    if (p != static_cast<int64_t>(i)) return changed ? getResult() : mlir::OpFoldResult{};
  return getInput();
}

LogicalResult ExpandOp::verify() {
  ArrayRef<int64_t> in = dimsOf(getInput());
  ArrayRef<int64_t> out = getType().getShape();
  if (out.size() < in.size())
    return emitOpError() << "cannot expand " << getInput().getType() << " to " << getType()
                         << ": the target has fewer dims";
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] != out[lead + i] && in[i] != 1)
      return emitOpError() << "cannot expand " << getInput().getType() << " to " << getType()
                           << ": input dim " << i << " has size " << in[i]
                           << " (only size-1 dims can grow; new dims go in front)";
  return success();
}

mlir::OpFoldResult ExpandOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) return getInput();
  if (auto producer = getInput().getDefiningOp<ExpandOp>()) {
    getInputMutable().assign(producer.getInput());  // expand(expand(x)) = expand(x)
    return getResult();
  }
  return {};
}

LogicalResult SliceOp::verify() {
  const int64_t dim = getDim();
  if (failed(checkDim(*this, dim, getInput())) ||
      failed(checkSliceBounds(*this, getInput(), dim, getStart(), getEnd())))
    return mlir::failure();
  rules::Dims expected(dimsOf(getInput()));
  expected[dim] = rules::sliceLength(getStart(), getEnd(), getStep());
  return checkResultShape(*this, expected, "the slice's length along dim");
}

LogicalResult CatOp::verify() {
  // SameOperandsAndResultElementType already requires one input.
  mlir::Value first = getInputs().front();
  const int64_t dim = getDim();
  if (rankOf(first) == 0) return emitOpError("cannot concatenate 0-d tensors");
  if (failed(checkDim(*this, dim, first))) return mlir::failure();
  rules::Dims expected(dimsOf(first));
  expected[dim] = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    if (rankOf(input) != rankOf(first))
      return emitOpError() << "input #" << i << " " << input.getType()
                           << " has a different rank than input #0 " << first.getType();
    for (int64_t k = 0; k < rankOf(first); ++k)
      if (k != dim && dimsOf(input)[k] != dimsOf(first)[k])
        return emitOpError() << "input #" << i << " " << input.getType()
                             << " differs from input #0 " << first.getType() << " in dim " << k
                             << "; sizes must match except in dim " << dim;
    std::optional<int64_t> joined = llvm::checkedAdd(expected[dim], dimsOf(input)[dim]);
    if (!joined)
      return emitOpError() << "the inputs' sizes in dim " << dim << " add up to more than int64 "
                           << "holds (at input #" << i << " " << input.getType() << ")";
    expected[dim] = *joined;
  }
  return checkResultShape(*this, expected, "the inputs joined along dim");
}

LogicalResult GatherOp::verify() {
  ArrayRef<int64_t> in = dimsOf(getInput());
  ArrayRef<int64_t> index = dimsOf(getIndex());
  if (index.size() != in.size())
    return emitOpError() << "index " << getIndex().getType() << " must have the rank of input "
                         << getInput().getType();
  if (failed(checkDim(*this, getDim(), getInput(), /*scalarAsVector=*/true)))
    return mlir::failure();
  if (!llvm::is_contained(index, 0))  // an empty index reads nothing
    for (size_t k = 0; k < in.size(); ++k)
      if (static_cast<int64_t>(k) != static_cast<int64_t>(getDim()) && index[k] > in[k])
        return emitOpError() << "index " << getIndex().getType() << " exceeds input "
                             << getInput().getType() << " in dim " << k << " (only dim " << getDim()
                             << " may be larger)";
  return checkResultShape(*this, index, "the index's shape");
}

LogicalResult IndexSelectOp::verify() {
  if (rankOf(getIndex()) != 1)
    return emitOpError() << "index " << getIndex().getType() << " must be 1-D";
  if (rankOf(getInput()) == 0) return emitOpError("input must have at least one dim");
  if (failed(checkDim(*this, getDim(), getInput()))) return mlir::failure();
  rules::Dims expected(dimsOf(getInput()));
  expected[getDim()] = dimsOf(getIndex())[0];
  return checkResultShape(*this, expected, "the input with dim sized by the index");
}

LogicalResult PadOp::verify() {
  ArrayRef<int64_t> pads = getPads();
  ArrayRef<int64_t> in = dimsOf(getInput());
  if (pads.size() % 2 != 0)
    return emitOpError() << "pads " << shapeString(pads)
                         << " must hold (before, after) pairs, last dim first";
  if (pads.size() / 2 > in.size())
    return emitOpError() << "pads " << shapeString(pads) << " covers " << pads.size() / 2
                         << " dims but the input " << getInput().getType() << " has " << in.size();
  rules::Dims expected(in);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    const size_t d = in.size() - 1 - k;
    std::optional<int64_t> padded = llvm::checkedAdd(in[d], pads[2 * k]);
    if (padded) padded = llvm::checkedAdd(*padded, pads[2 * k + 1]);
    if (!padded)
      return emitOpError() << "pads " << shapeString(pads) << " overflow int64 in dim " << d
                           << " (size " << in[d] << ")";
    if (*padded < 0)
      return emitOpError() << "pads " << shapeString(pads) << " crop dim " << d << " (size "
                           << in[d] << ") to a negative size";
    expected[d] = *padded;
  }
  return checkResultShape(*this, expected, "the input padded by pads");
}

namespace {
LogicalResult verifyTriangle(mlir::Operation* op, mlir::Value input) {
  if (rankOf(input) >= 2) return success();
  return op->emitOpError() << "input " << input.getType()
                           << " must have at least 2 dims (it works on the last two)";
}
}  // namespace

LogicalResult TriuOp::verify() { return verifyTriangle(*this, getInput()); }
LogicalResult TrilOp::verify() { return verifyTriangle(*this, getInput()); }

LogicalResult ScatterAddOp::verify() {
  ArrayRef<int64_t> in = dimsOf(getInput());
  ArrayRef<int64_t> index = dimsOf(getIndex());
  ArrayRef<int64_t> src = dimsOf(getSrc());
  if (index.size() != in.size() || src.size() != in.size())
    return emitOpError() << "input " << getInput().getType() << ", index " << getIndex().getType()
                         << " and src " << getSrc().getType() << " must have one rank";
  if (failed(checkDim(*this, getDim(), getInput(), /*scalarAsVector=*/true)))
    return mlir::failure();
  if (!llvm::is_contained(index, 0))  // an empty index writes nothing
    for (size_t k = 0; k < in.size(); ++k) {
      if (index[k] > src[k])
        return emitOpError() << "index " << getIndex().getType() << " exceeds src "
                             << getSrc().getType() << " in dim " << k;
      if (static_cast<int64_t>(k) != static_cast<int64_t>(getDim()) && index[k] > in[k])
        return emitOpError() << "index " << getIndex().getType() << " exceeds input "
                             << getInput().getType() << " in dim " << k << " (only dim " << getDim()
                             << " may be larger)";
    }
  return success();
}

LogicalResult IndexAddOp::verify() {
  ArrayRef<int64_t> in = dimsOf(getInput());
  if (rankOf(getIndex()) != 1)
    return emitOpError() << "index " << getIndex().getType() << " must be 1-D";
  if (in.empty()) return emitOpError("input must have at least one dim");
  if (failed(checkDim(*this, getDim(), getInput()))) return mlir::failure();
  rules::Dims expected(in);
  expected[getDim()] = dimsOf(getIndex())[0];
  if (dimsOf(getSource()) != ArrayRef<int64_t>(expected))
    return emitOpError() << "source " << getSource().getType() << " must have shape "
                         << shapeString(expected) << " (the input's, with dim sized by the index)";
  return success();
}

LogicalResult SliceScatterOp::verify() {
  const int64_t dim = getDim();
  if (failed(checkDim(*this, dim, getInput())) ||
      failed(checkSliceBounds(*this, getInput(), dim, getStart(), getEnd())))
    return mlir::failure();
  rules::Dims expected(dimsOf(getInput()));
  expected[dim] = rules::sliceLength(getStart(), getEnd(), getStep());
  if (dimsOf(getSrc()) != ArrayRef<int64_t>(expected))
    return emitOpError() << "src " << getSrc().getType() << " must have the slice's shape "
                         << shapeString(expected);
  return success();
}

void MstepDialect::registerReductionOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/ReductionOps.cpp.inc"
      >();
}

void MstepDialect::registerShapeOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/ShapeOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect

#define GET_OP_CLASSES
#include "mstep/ir/dialect/ReductionOps.cpp.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/ShapeOps.cpp.inc"
