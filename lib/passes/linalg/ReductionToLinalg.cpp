// Reductions (mstep.sum, mean, max, min) to linalg.generic with reduction
// iterators on tensors (mstep-lower-to-linalg). logsumexp, var and argmax
// are not lowered: they stay mstep ops.
#include <cmath>

#include "lib/passes/linalg/LinalgLowering.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::passes::linalg_lowering {

using namespace mlir;
namespace md = ::mstep::dialect;

namespace {

/// How a reduction combines elements: its accumulator's start value and
/// the step that folds one element into the accumulator.
struct Combiner {
  TypedAttr identity;
  std::function<Value(OpBuilder&, Location, Value element, Value accumulator)> combine;
};

/// sum and mean add: floats with addf, ints with addi, bools with ori
/// (a bool sum in i1 is "any"; the trace graph casts bools to i64 first).
Combiner sumCombiner(Builder& b, Type type) {
  return {b.getZeroAttr(type), [](OpBuilder& builder, Location loc, Value x, Value acc) -> Value {
            if (isa<FloatType>(x.getType())) return builder.create<arith::AddFOp>(loc, x, acc);
            if (x.getType().isInteger(1)) return builder.create<arith::OrIOp>(loc, x, acc);
            return builder.create<arith::AddIOp>(loc, x, acc);
          }};
}

/// max and min start from the far end of the type (-inf/+inf, the signed
/// int limits, false/true) and propagate NaN like torch.max.
Combiner extremumCombiner(Builder& b, Type type, bool isMax) {
  TypedAttr identity;
  if (isa<FloatType>(type)) {
    identity = b.getFloatAttr(type, isMax ? -INFINITY : INFINITY);
  } else if (type.isInteger(1)) {
    identity = b.getIntegerAttr(type, isMax ? 0 : 1);
  } else {
    const unsigned width = type.getIntOrFloatBitWidth();
    identity = b.getIntegerAttr(type, isMax ? APInt::getSignedMinValue(width)
                                            : APInt::getSignedMaxValue(width));
  }
  return {identity, [isMax](OpBuilder& builder, Location loc, Value x, Value acc) -> Value {
            Type t = x.getType();
            if (isa<FloatType>(t))
              return isMax ? builder.create<arith::MaximumFOp>(loc, x, acc).getResult()
                           : builder.create<arith::MinimumFOp>(loc, x, acc).getResult();
            if (t.isInteger(1))
              return isMax ? builder.create<arith::MaxUIOp>(loc, x, acc).getResult()
                           : builder.create<arith::MinUIOp>(loc, x, acc).getResult();
            return isMax ? builder.create<arith::MaxSIOp>(loc, x, acc).getResult()
                         : builder.create<arith::MinSIOp>(loc, x, acc).getResult();
          }};
}

/// The reassociation that expands the reduced shape back to the keepdim
/// shape: each reduced (now size-1) dim joins the group of the kept dim
/// before it, or of the first kept dim when it leads. A full reduction has
/// no groups (a 0-d source).
SmallVector<ReassociationIndices> keepdimReassociation(int64_t rank, ArrayRef<int64_t> dims) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices leading;
  for (int64_t dim = 0; dim < rank; ++dim) {
    if (llvm::is_contained(dims, dim)) {
      (groups.empty() ? leading : groups.back()).push_back(dim);
      continue;
    }
    groups.push_back(leading);
    groups.back().push_back(dim);
    leading.clear();
  }
  return groups;
}

/// sum, mean, max and min over `dims`:
/// 1. The accumulator is a `linalg.fill` of the combiner's identity over the
///    kept dims (f32 for bf16/f16 sums and means, as PyTorch accumulates).
/// 2. One linalg.generic, parallel over the kept dims and reduction over
///    `dims`, folds every element into it.
/// 3. mean divides by the number of reduced elements; an f32 accumulator
///    rounds back to bf16/f16.
/// 4. keepdim puts the reduced dims back as 1 with `tensor.expand_shape`.
template <typename ReductionOp> struct ReductionToGeneric : OpConversionPattern<ReductionOp> {
  using OpConversionPattern<ReductionOp>::OpConversionPattern;
  using OpAdaptor = typename ReductionOp::Adaptor;

  LogicalResult matchAndRewrite(ReductionOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter& rewriter) const override {
    constexpr bool isMean = std::is_same_v<ReductionOp, md::MeanOp>;
    constexpr bool isSum = std::is_same_v<ReductionOp, md::SumOp> || isMean;
    Location loc = op.getLoc();
    Value input = adaptor.getInput();
    auto inputType = cast<RankedTensorType>(input.getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elementType = inputType.getElementType();
    Type accumulatorType =
        isSum && md::isHalfFloat(elementType) ? rewriter.getF32Type() : elementType;
    ArrayRef<int64_t> dims = op.getDims();
    const int64_t rank = inputType.getRank();

    // 1. The accumulator over the kept dims.
    SmallVector<int64_t> keptShape;
    SmallVector<AffineExpr> keptDims;
    SmallVector<utils::IteratorType> iterators;
    int64_t reducedCount = 1;
    for (int64_t dim = 0; dim < rank; ++dim) {
      if (llvm::is_contained(dims, dim)) {
        iterators.push_back(utils::IteratorType::reduction);
        reducedCount *= inputType.getDimSize(dim);
        continue;
      }
      iterators.push_back(utils::IteratorType::parallel);
      keptShape.push_back(inputType.getDimSize(dim));
      keptDims.push_back(rewriter.getAffineDimExpr(dim));
    }
    Combiner combiner =
        isSum ? sumCombiner(rewriter, accumulatorType)
              : extremumCombiner(rewriter, accumulatorType, std::is_same_v<ReductionOp, md::MaxOp>);
    Value identity = rewriter.create<arith::ConstantOp>(loc, combiner.identity);
    Value empty = createEmptyTensor(rewriter, loc, keptShape, accumulatorType);
    Value init = rewriter.create<linalg::FillOp>(loc, identity, empty).getResult(0);

    // 2. The reduction.
    SmallVector<AffineMap> maps = {
        rewriter.getMultiDimIdentityMap(rank),
        AffineMap::get(rank, /*symbolCount=*/0, keptDims, rewriter.getContext())};
    Value reduced = rewriter
                        .create<linalg::GenericOp>(
                            loc, TypeRange{init.getType()}, input, init, maps, iterators,
                            [&](OpBuilder& body, Location bodyLoc, ValueRange elements) {
                              Value element =
                                  md::convertScalar(body, bodyLoc, elements[0], accumulatorType);
                              body.create<linalg::YieldOp>(
                                  bodyLoc, combiner.combine(body, bodyLoc, element, elements[1]));
                            })
                        .getResult(0);

    // 3. mean's division and the rounding of an f32 accumulator.
    if (isMean || accumulatorType != elementType)
      reduced = mapElements(
          rewriter, loc, reduced, elementType, [&](OpBuilder& body, Location bodyLoc, Value value) {
            if (isMean) {
              Value count = body.create<arith::ConstantOp>(
                  bodyLoc, body.getFloatAttr(accumulatorType, static_cast<double>(reducedCount)));
              value = body.create<arith::DivFOp>(bodyLoc, value, count);
            }
            return md::convertScalar(body, bodyLoc, value, elementType);
          });

    // 4. keepdim.
    if (reduced.getType() != resultType)
      reduced = rewriter.create<tensor::ExpandShapeOp>(loc, resultType, reduced,
                                                       keepdimReassociation(rank, dims));
    rewriter.replaceOp(op, reduced);
    return success();
  }
};

} // namespace

void populateReductionToLinalg(RewritePatternSet& patterns, ConversionTarget& target) {
  patterns.add<ReductionToGeneric<md::SumOp>, ReductionToGeneric<md::MeanOp>,
               ReductionToGeneric<md::MaxOp>, ReductionToGeneric<md::MinOp>>(patterns.getContext());
  target.addIllegalOp<md::SumOp, md::MeanOp, md::MaxOp, md::MinOp>();
}

} // namespace mstep::passes::linalg_lowering
