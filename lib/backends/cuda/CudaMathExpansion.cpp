// expand_math_for_nvvm: see CudaMathExpansion.h.
#include "lib/backends/cuda/CudaMathExpansion.h"

#include "lib/passes/IntegerPowExpansion.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mstep::cuda {

namespace {

using namespace mlir;

/// |x| of a float: its bits with the sign bit cleared (NaN stays NaN).
struct AbsFAsSignMask : OpRewritePattern<math::AbsFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::AbsFOp op, PatternRewriter& b) const override {
    auto type = dyn_cast<FloatType>(op.getType());
    if (!type) return failure();  // vectors do not reach the kernels
    const unsigned width = type.getWidth();
    Location loc = op.getLoc();
    Type bits = b.getIntegerType(width);
    Value mask = b.create<arith::ConstantOp>(
        loc, b.getIntegerAttr(bits, APInt::getSignedMaxValue(width)));
    Value cleared =
        b.create<arith::AndIOp>(loc, b.create<arith::BitcastOp>(loc, bits, op.getOperand()), mask);
    b.replaceOpWithNewOp<arith::BitcastOp>(op, type, cleared);
    return success();
  }
};

/// |x| of an integer: x < 0 ? 0 - x : x.
struct AbsIAsSelect : OpRewritePattern<math::AbsIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::AbsIOp op, PatternRewriter& b) const override {
    Type type = op.getType();
    if (!type.isSignlessInteger()) return failure();
    Location loc = op.getLoc();
    Value x = op.getOperand();
    Value zero = b.create<arith::ConstantOp>(loc, b.getIntegerAttr(type, 0));
    Value negative = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, x, zero);
    b.replaceOpWithNewOp<arith::SelectOp>(op, negative, b.create<arith::SubIOp>(loc, zero, x), x);
    return success();
  }
};

} // namespace

void expand_math_for_nvvm(func::FuncOp func) {
  RewritePatternSet patterns(func.getContext());
  patterns.add<AbsFAsSignMask, AbsIAsSelect>(func.getContext());
  passes::populate_integer_pow_expansion(patterns);
  // Only the rewrites: no folding or dead-code erasure of the loops.
  GreedyRewriteConfig config;
  config.strictMode = GreedyRewriteStrictness::ExistingAndNewOps;
  (void)applyPatternsAndFoldGreedily(func, std::move(patterns), config);
}

} // namespace mstep::cuda
