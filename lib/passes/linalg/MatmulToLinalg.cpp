// mstep.matmul to linalg.matmul / linalg.batch_matmul on tensors
// (mstep-lower-to-linalg), for every rank and batch broadcast.
#include "lib/passes/linalg/LinalgLowering.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::passes::linalg_lowering {

using namespace mlir;
namespace md = ::mstep::dialect;

namespace {

/// A zero-filled accumulator of `shape`.
Value zeroTensor(OpBuilder& b, Location loc, ArrayRef<int64_t> shape, Type elementType) {
  Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(elementType));
  Value empty = createEmptyTensor(b, loc, shape, elementType);
  return b.create<linalg::FillOp>(loc, zero, empty).getResult(0);
}

/// Merges the dims [0, count) of `value` into one dim, keeping the rest.
Value collapseLeadingDims(OpBuilder& b, Location loc, Value value, int64_t count) {
  const int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  if (count == 1) return value;
  SmallVector<ReassociationIndices> groups(1);
  for (int64_t dim = 0; dim < count; ++dim) groups.front().push_back(dim);
  for (int64_t dim = count; dim < rank; ++dim) groups.push_back({dim});
  return b.create<tensor::CollapseShapeOp>(loc, value, groups);
}

/// Splits the leading dim of `value` back into the leading dims of `type`
/// (`leadingCount` of them), the inverse of collapseLeadingDims.
Value expandLeadingDim(OpBuilder& b, Location loc, Value value, RankedTensorType type,
                       int64_t leadingCount) {
  if (leadingCount == 1) return value;
  SmallVector<ReassociationIndices> groups(1);
  for (int64_t dim = 0; dim < leadingCount; ++dim) groups.front().push_back(dim);
  for (int64_t dim = leadingCount; dim < type.getRank(); ++dim) groups.push_back({dim});
  return b.create<tensor::ExpandShapeOp>(loc, type, value, groups);
}

/// lhs [..., n, k] x rhs [..., k, p] -> [batch..., n, p]:
/// 1. Both 2-D: linalg.matmul.
/// 2. rhs 2-D, lhs batched: lhs's batch dims fold into its rows
///    ([b..., n, k] -> [b*n, k]), one linalg.matmul, and the rows split back.
/// 3. Otherwise: each operand is broadcast to the result's batch dims (a
///    linalg.generic, only when its batch dims differ), the batch dims
///    collapse into one, and one linalg.batch_matmul runs.
/// bf16/f16 accumulate in f32 (the named ops extend their inputs) and round
/// once at the end, like PyTorch's CPU matmul. Ints accumulate in their own
/// type and wrap.
struct MatmulToNamedOp : OpConversionPattern<md::MatmulOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult matchAndRewrite(md::MatmulOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter& rewriter) const override {
    Location loc = op.getLoc();
    Value lhs = adaptor.getLhs();
    Value rhs = adaptor.getRhs();
    auto lhsType = cast<RankedTensorType>(lhs.getType());
    auto rhsType = cast<RankedTensorType>(rhs.getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    Type elementType = resultType.getElementType();
    Type accumulatorType = md::isHalfFloat(elementType) ? rewriter.getF32Type() : elementType;
    ArrayRef<int64_t> resultShape = resultType.getShape();
    ArrayRef<int64_t> batchShape = resultShape.drop_back(2);
    const int64_t n = resultShape[resultShape.size() - 2];
    const int64_t p = resultShape.back();
    int64_t batch = 1;
    for (int64_t size : batchShape) batch *= size;
    auto accumulatorResultType = RankedTensorType::get(resultShape, accumulatorType);

    Value product;
    if (lhsType.getRank() == 2 && rhsType.getRank() == 2) {
      // 1. A plain matrix product.
      product = rewriter
                    .create<linalg::MatmulOp>(loc, ValueRange{lhs, rhs},
                                              zeroTensor(rewriter, loc, {n, p}, accumulatorType))
                    .getResult(0);
    } else if (rhsType.getRank() == 2) {
      // 2. Batch dims fold into lhs's rows.
      const int64_t rowDims = lhsType.getRank() - 1;
      Value rows = collapseLeadingDims(rewriter, loc, lhs, rowDims);
      Value flat =
          rewriter
              .create<linalg::MatmulOp>(loc, ValueRange{rows, rhs},
                                        zeroTensor(rewriter, loc, {batch * n, p}, accumulatorType))
              .getResult(0);
      product = expandLeadingDim(rewriter, loc, flat, accumulatorResultType, rowDims);
    } else {
      // 3. Broadcast to the result's batch dims, collapse them, batch_matmul.
      const int64_t batchDims = static_cast<int64_t>(batchShape.size());
      auto batched = [&](Value operand, RankedTensorType type) {
        SmallVector<int64_t> shape(batchShape);
        llvm::append_range(shape, type.getShape().take_back(2));
        Value full = broadcastTensor(rewriter, loc, operand,
                                     RankedTensorType::get(shape, type.getElementType()));
        return collapseLeadingDims(rewriter, loc, full, batchDims);
      };
      Value lhs3 = batched(lhs, lhsType);
      Value rhs3 = batched(rhs, rhsType);
      Value flat = rewriter
                       .create<linalg::BatchMatmulOp>(
                           loc, ValueRange{lhs3, rhs3},
                           zeroTensor(rewriter, loc, {batch, n, p}, accumulatorType))
                       .getResult(0);
      product = expandLeadingDim(rewriter, loc, flat, accumulatorResultType, batchDims);
    }
    if (accumulatorType != elementType)
      product = mapElements(rewriter, loc, product, elementType,
                            [&](OpBuilder& body, Location bodyLoc, Value value) {
                              return md::convertScalar(body, bodyLoc, value, elementType);
                            });
    rewriter.replaceOp(op, product);
    return success();
  }
};

} // namespace

void populateMatmulToLinalg(RewritePatternSet& patterns, ConversionTarget& target) {
  patterns.add<MatmulToNamedOp>(patterns.getContext());
  target.addIllegalOp<md::MatmulOp>();
}

} // namespace mstep::passes::linalg_lowering
