// Verifiers and folders of the creation, elementwise and fusion ops, and
// the broadcasting rule of binary and ternary elementwise ops.
#include <cmath>

#include "lib/ir/dialect/Verification.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::dialect {

using llvm::ArrayRef;
using llvm::LogicalResult;
using llvm::StringRef;
using mlir::failure;
using mlir::success;

LogicalResult verifyBroadcastingOperands(mlir::Operation* op, ArrayRef<StringRef> names) {
  rules::Dims shape(dimsOf(op->getOperand(0)));
  for (unsigned i = 1; i < op->getNumOperands(); ++i) {
    ArrayRef<int64_t> next = dimsOf(op->getOperand(i));
    int64_t badDim = 0;
    std::optional<rules::Dims> joined = rules::broadcastShapes(shape, next, &badDim);
    if (!joined) {
      const auto at = [&](ArrayRef<int64_t> s) {
        return -badDim <= static_cast<int64_t>(s.size()) ? s[s.size() + badDim] : 1;
      };
      auto diag = op->emitOpError();
      if (i == 1) diag << names[0] << " of shape " << rules::shapeString(shape) << " and ";
      diag << names[i] << " of shape " << rules::shapeString(next)
           << (i == 1 ? " do not broadcast" : " does not broadcast with ");
      if (i > 1)
        diag << rules::shapeString(shape) << ", the broadcast shape of the operands before it";
      return diag << ": dim " << badDim << " is " << at(shape) << " vs " << at(next)
                  << " (trailing dims must be equal or 1)";
    }
    shape = std::move(*joined);
  }
  ArrayRef<int64_t> result = dimsOf(op->getResult(0));
  if (result != ArrayRef<int64_t>(shape))
    return op->emitOpError() << "result shape " << rules::shapeString(result)
                             << " must be the broadcast shape " << rules::shapeString(shape)
                             << " of the operands";
  return success();
}

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  const double value = getValue().convertToDouble();
  mlir::Type type = getType().getElementType();
  if (!type.isInteger()) return success();
  if (value != std::trunc(value))
    return emitOpError() << "value " << rules::formatDouble(value)
                         << " is not an integer, but the result is " << getType();
  if (type.isInteger(1) && value != 0 && value != 1)
    return emitOpError() << "value " << rules::formatDouble(value)
                         << " is not 0 or 1, but the result is " << getType();
  const unsigned width = type.getIntOrFloatBitWidth();
  // [-2^(w-1), 2^(w-1)) is exact in a double for w <= 64 (inf fails too).
  if (width > 1 && std::abs(value) >= std::ldexp(1.0, width - 1) &&
      value != -std::ldexp(1.0, width - 1))
    return emitOpError() << "value " << rules::formatDouble(value) << " does not fit in " << type;
  return success();
}

mlir::OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

LogicalResult ArangeOp::verify() {
  const double start = getStart().convertToDouble();
  const double step = getStep().convertToDouble();
  if (getType().getRank() != 1) return emitOpError() << "result must be 1-D, got " << getType();
  if (!std::isfinite(start) || !std::isfinite(step) || step == 0)
    return emitOpError() << "start and step must be finite and step nonzero, got start "
                         << rules::formatDouble(start) << ", step " << rules::formatDouble(step);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

namespace {
/// Whether converting `from` to `to` keeps every value exactly.
bool isLosslessWidening(mlir::Type from, mlir::Type to) {
  if (from == to) return true;
  if (auto f = llvm::dyn_cast<mlir::FloatType>(from))
    if (auto t = llvm::dyn_cast<mlir::FloatType>(to))
      // bf16 and f16 both widen exactly to f32 and f64, f32 to f64.
      return f.getWidth() < t.getWidth() && (t.isF32() || t.isF64());
  if (from.isInteger() && to.isInteger())
    return from.getIntOrFloatBitWidth() > 1 &&
           from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth();
  return false;
}

/// Whether `v` is an mstep.constant equal to `value`.
bool isConstant(mlir::Value v, double value) {
  auto c = v.getDefiningOp<ConstantOp>();
  return c && c.getValue().convertToDouble() == value;
}

/// `x op c` folds to x when c is the identity `value` and the result has
/// x's type (the constant does not broadcast x to a larger shape).
mlir::OpFoldResult foldRightIdentity(mlir::Value lhs, mlir::Value rhs, mlir::Value result,
                                     double value) {
  if (isConstant(rhs, value) && lhs.getType() == result.getType()) return lhs;
  return {};
}
}  // namespace

mlir::OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getType()) return getInput();
  // cast(cast(x)) with an exact first cast converts x directly.
  if (auto inner = getInput().getDefiningOp<CastOp>()) {
    if (isLosslessWidening(elementTypeOf(inner.getInput()), elementTypeOf(inner.getResult()))) {
      if (inner.getInput().getType() == getType()) return inner.getInput();
      getInputMutable().assign(inner.getInput());
      return getResult();
    }
  }
  return {};
}

mlir::OpFoldResult NegOp::fold(FoldAdaptor) {
  if (auto inner = getInput().getDefiningOp<NegOp>()) return inner.getInput();
  return {};
}

mlir::OpFoldResult SubOp::fold(FoldAdaptor) {
  return foldRightIdentity(getLhs(), getRhs(), getResult(), 0.0);
}

mlir::OpFoldResult MulOp::fold(FoldAdaptor) {
  if (auto folded = foldRightIdentity(getLhs(), getRhs(), getResult(), 1.0)) return folded;
  return foldRightIdentity(getRhs(), getLhs(), getResult(), 1.0);
}

mlir::OpFoldResult DivOp::fold(FoldAdaptor) {
  return foldRightIdentity(getLhs(), getRhs(), getResult(), 1.0);
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verifyRegions() {
  mlir::Block& body = getBody().front();
  if (getNumResults() == 0) return emitOpError("must have at least one result");
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments()
                         << " block arguments but the fusion has " << getInputs().size()
                         << " inputs; the block arguments are the inputs, in order";
  for (unsigned i = 0; i < body.getNumArguments(); ++i)
    if (body.getArgument(i).getType() != getInputs()[i].getType())
      return emitOpError() << "block argument #" << i << " has type "
                           << body.getArgument(i).getType() << " but input #" << i << " has type "
                           << getInputs()[i].getType();
  auto yield = body.empty() ? nullptr : llvm::dyn_cast<YieldOp>(body.back());
  if (!yield) return emitOpError("body must end with mstep.yield");
  for (mlir::Operation& op : body.without_terminator())
    if (!op.hasTrait<OpTrait::Fusible>())
      return emitOpError() << "body holds '" << op.getName()
                           << "', which is not fusible (only elementwise ops, expand, "
                              "cast, constant and full may be fused)";
  if (yield.getValues().size() != getNumResults())
    return emitOpError() << "mstep.yield returns " << yield.getValues().size()
                         << " values but the fusion has " << getNumResults() << " results";
  for (unsigned i = 0; i < getNumResults(); ++i)
    if (yield.getValues()[i].getType() != getResult(i).getType())
      return emitOpError() << "mstep.yield operand #" << i << " has type "
                           << yield.getValues()[i].getType() << " but result #" << i << " has type "
                           << getResult(i).getType();
  return success();
}

void MstepDialect::registerCreationOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/CreationOps.cpp.inc"
      >();
}

void MstepDialect::registerElementwiseOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/ElementwiseOps.cpp.inc"
      >();
}

void MstepDialect::registerFusionOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/FusionOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect

#define GET_OP_CLASSES
#include "mstep/ir/dialect/CreationOps.cpp.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/ElementwiseOps.cpp.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/FusionOps.cpp.inc"
