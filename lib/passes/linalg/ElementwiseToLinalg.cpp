// Elementwise mstep ops and mstep.fusion regions to linalg.generic on
// tensors (mstep-lower-to-linalg), and the tensor helpers that every op
// family's lowering shares.
#include "lib/passes/linalg/LinalgLowering.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::passes::linalg_lowering {

using namespace mlir;
namespace md = ::mstep::dialect;

namespace {

llvm::ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

SmallVector<utils::IteratorType> parallelIterators(int64_t rank) {
  return SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel);
}

/// An op this family lowers on its own: it has a scalar form and sits
/// outside any fusion region (the region's lowering takes the ops inside).
bool isLoweredElementwise(Operation* op) {
  return md::hasScalarForm(op) && !isa_and_nonnull<md::FusionOp>(op->getParentOp());
}

/// A fusion whose every op has a scalar form; others stay as they are.
bool isLowerableFusion(md::FusionOp fusion) {
  return llvm::all_of(fusion.getBody().front().without_terminator(),
                      [](Operation& op) { return md::hasScalarForm(&op); });
}

/// Lowers one op with a scalar form: a dense splat for `mstep.constant`,
/// otherwise a `linalg.generic` over the result's shape that reads each
/// operand through its broadcasting map and computes the op's scalar form.
Value lowerElementwiseOp(OpBuilder& b, Operation* op, ValueRange operands) {
  Location loc = op->getLoc();
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (auto constant = dyn_cast<md::ConstantOp>(op))
    return b.create<arith::ConstantOp>(
        loc, DenseElementsAttr::get(resultType,
                                    md::constantAttr(b, resultType.getElementType(),
                                                     constant.getValue().convertToDouble())));
  SmallVector<AffineMap> maps;
  for (Value operand : operands)
    maps.push_back(broadcastingMap(shapeOf(operand), resultType.getShape(), b.getContext()));
  maps.push_back(b.getMultiDimIdentityMap(resultType.getRank()));
  Value init = createEmptyTensor(b, loc, resultType.getShape(), resultType.getElementType());
  auto generic =
      b.create<linalg::GenericOp>(loc, TypeRange{resultType}, operands, ValueRange{init}, maps,
                                  parallelIterators(resultType.getRank()),
                                  [&](OpBuilder& body, Location bodyLoc, ValueRange elements) {
                                    Value result = md::emitScalarOp(body, op, elements.drop_back());
                                    body.create<linalg::YieldOp>(bodyLoc, result);
                                  });
  return generic.getResult(0);
}

/// The results' common shape when one loop nest can compute the whole
/// region: every result has it, and every input and every value inside
/// broadcasts to it.
std::optional<SmallVector<int64_t>> sharedLoopShape(md::FusionOp fusion) {
  SmallVector<int64_t> shape(shapeOf(fusion.getResult(0)));
  auto fits = [&](Value value) { return broadcastsTo(shapeOf(value), shape); };
  if (!llvm::all_of(fusion.getResults(), [&](Value r) { return shapeOf(r) == ArrayRef(shape); }))
    return std::nullopt;
  if (!llvm::all_of(fusion.getInputs(), fits)) return std::nullopt;
  for (Operation& op : fusion.getBody().front().without_terminator())
    if (!llvm::all_of(op.getResults(), fits)) return std::nullopt;
  return shape;
}

/// Lowers a whole fusion region to ONE multi-output linalg.generic:
/// 1. The loop nest is the results' shape; each input is read through its
///    broadcasting map, each result written through the identity map.
/// 2. The body replays the region's ops on elements, in order, each op as
///    its scalar form. A value of a smaller (broadcast) shape is computed
///    at the broadcast position of the loop point, which is the element its
///    users read: numpy broadcasting maps compose.
/// 3. So `mstep.expand` costs nothing: its broadcast is already in the
///    input maps, and its scalar form is the identity.
SmallVector<Value> lowerFusionToOneGeneric(OpBuilder& b, md::FusionOp fusion, ValueRange inputs,
                                           ArrayRef<int64_t> loopShape) {
  Location loc = fusion.getLoc();
  MLIRContext* context = b.getContext();
  SmallVector<AffineMap> maps;
  for (Value input : inputs) maps.push_back(broadcastingMap(shapeOf(input), loopShape, context));
  SmallVector<Value> inits;
  for (Type type : fusion.getResultTypes()) {
    inits.push_back(
        createEmptyTensor(b, loc, loopShape, cast<RankedTensorType>(type).getElementType()));
    maps.push_back(b.getMultiDimIdentityMap(loopShape.size()));
  }
  Block& region = fusion.getBody().front();
  auto generic = b.create<linalg::GenericOp>(
      loc, fusion.getResultTypes(), inputs, inits, maps, parallelIterators(loopShape.size()),
      [&](OpBuilder& body, Location bodyLoc, ValueRange elements) {
        IRMapping elementOf;
        elementOf.map(region.getArguments(), elements.take_front(inputs.size()));
        for (Operation& op : region.without_terminator()) {
          SmallVector<Value> operands;
          for (Value operand : op.getOperands()) operands.push_back(elementOf.lookup(operand));
          elementOf.map(op.getResult(0), md::emitScalarOp(body, &op, operands));
        }
        SmallVector<Value> yielded;
        for (Value value : region.getTerminator()->getOperands())
          yielded.push_back(elementOf.lookup(value));
        body.create<linalg::YieldOp>(bodyLoc, yielded);
      });
  return generic.getResults();
}

/// The fallback for a region whose results differ in shape: each op of the
/// region becomes its own linalg.generic (or constant), in order.
SmallVector<Value> lowerFusionOpByOp(OpBuilder& b, md::FusionOp fusion, ValueRange inputs) {
  Block& region = fusion.getBody().front();
  IRMapping tensorOf;
  tensorOf.map(region.getArguments(), inputs);
  for (Operation& op : region.without_terminator()) {
    SmallVector<Value> operands;
    for (Value operand : op.getOperands()) operands.push_back(tensorOf.lookup(operand));
    tensorOf.map(op.getResult(0), lowerElementwiseOp(b, &op, operands));
  }
  SmallVector<Value> results;
  for (Value value : region.getTerminator()->getOperands())
    results.push_back(tensorOf.lookup(value));
  return results;
}

/// Every op with a scalar form outside a fusion region.
struct ElementwiseToGeneric : ConversionPattern {
  explicit ElementwiseToGeneric(MLIRContext* context)
      : ConversionPattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}

  LogicalResult matchAndRewrite(Operation* op, ArrayRef<Value> operands,
                                ConversionPatternRewriter& rewriter) const override {
    if (!isLoweredElementwise(op)) return failure();
    rewriter.replaceOp(op, lowerElementwiseOp(rewriter, op, operands));
    return success();
  }
};

struct FusionToGeneric : OpConversionPattern<md::FusionOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult matchAndRewrite(md::FusionOp fusion, OpAdaptor adaptor,
                                ConversionPatternRewriter& rewriter) const override {
    if (!isLowerableFusion(fusion)) return failure();
    std::optional<SmallVector<int64_t>> loopShape = sharedLoopShape(fusion);
    rewriter.replaceOp(
        fusion, loopShape
                    ? lowerFusionToOneGeneric(rewriter, fusion, adaptor.getInputs(), *loopShape)
                    : lowerFusionOpByOp(rewriter, fusion, adaptor.getInputs()));
    return success();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Tensor helpers.
//===----------------------------------------------------------------------===//

AffineMap broadcastingMap(ArrayRef<int64_t> operandShape, ArrayRef<int64_t> resultShape,
                          MLIRContext* context) {
  const int64_t offset = static_cast<int64_t>(resultShape.size() - operandShape.size());
  SmallVector<AffineExpr> exprs;
  for (auto [dim, size] : llvm::enumerate(operandShape)) {
    const int64_t resultDim = static_cast<int64_t>(dim) + offset;
    exprs.push_back(size == 1 && resultShape[resultDim] != 1
                        ? getAffineConstantExpr(0, context)
                        : getAffineDimExpr(resultDim, context));
  }
  return AffineMap::get(resultShape.size(), /*symbolCount=*/0, exprs, context);
}

bool broadcastsTo(ArrayRef<int64_t> shape, ArrayRef<int64_t> target) {
  if (shape.size() > target.size()) return false;
  ArrayRef<int64_t> aligned = target.take_back(shape.size());
  return llvm::all_of(llvm::zip_equal(shape, aligned), [](auto pair) {
    return std::get<0>(pair) == 1 || std::get<0>(pair) == std::get<1>(pair);
  });
}

Value createEmptyTensor(OpBuilder& b, Location loc, ArrayRef<int64_t> shape, Type elementType) {
  return b.create<tensor::EmptyOp>(loc, shape, elementType);
}

Value broadcastTensor(OpBuilder& b, Location loc, Value value, RankedTensorType type) {
  if (value.getType() == type) return value;
  SmallVector<AffineMap> maps = {broadcastingMap(shapeOf(value), type.getShape(), b.getContext()),
                                 b.getMultiDimIdentityMap(type.getRank())};
  Value init = createEmptyTensor(b, loc, type.getShape(), type.getElementType());
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{type}, value, init, maps, parallelIterators(type.getRank()),
      [](OpBuilder& body, Location bodyLoc, ValueRange elements) {
        body.create<linalg::YieldOp>(bodyLoc, elements.front());
      });
  return generic.getResult(0);
}

Value mapElements(OpBuilder& b, Location loc, Value value, Type resultElementType,
                  llvm::function_ref<Value(OpBuilder&, Location, Value)> fn) {
  ArrayRef<int64_t> shape = shapeOf(value);
  auto resultType = RankedTensorType::get(shape, resultElementType);
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(shape.size()));
  Value init = createEmptyTensor(b, loc, shape, resultElementType);
  auto generic = b.create<linalg::GenericOp>(
      loc, TypeRange{resultType}, value, init, maps, parallelIterators(shape.size()),
      [&](OpBuilder& body, Location bodyLoc, ValueRange elements) {
        body.create<linalg::YieldOp>(bodyLoc, fn(body, bodyLoc, elements.front()));
      });
  return generic.getResult(0);
}

//===----------------------------------------------------------------------===//
// Patterns and legality.
//===----------------------------------------------------------------------===//

void populateElementwiseToLinalg(RewritePatternSet& patterns, ConversionTarget& target) {
  patterns.add<ElementwiseToGeneric, FusionToGeneric>(patterns.getContext());
  // Ops inside a fusion region stay legal: the region's lowering replaces
  // them together with the region.
  target.addDynamicallyLegalDialect<md::MstepDialect>([](Operation* op) -> std::optional<bool> {
    if (auto fusion = dyn_cast<md::FusionOp>(op)) return !isLowerableFusion(fusion);
    return !isLoweredElementwise(op);
  });
}

} // namespace mstep::passes::linalg_lowering
