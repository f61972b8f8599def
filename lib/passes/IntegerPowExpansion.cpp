// populate_integer_pow_expansion: see IntegerPowExpansion.h. (Moved from
// the cpu fusion JIT's lowering, which the cuda kernels now share.)
#include "lib/passes/IntegerPowExpansion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/PatternMatch.h"

namespace mstep::passes {

namespace {

using namespace mlir;

/// An integer or a splat of it, in `type` (an integer or a vector of them).
Value integerConstant(OpBuilder& b, Location loc, Type type, int64_t value) {
  Type element = getElementTypeOrSelf(type);
  auto attr = b.getIntegerAttr(element, value);
  if (auto vector = dyn_cast<VectorType>(type))
    return b.create<arith::ConstantOp>(loc, DenseElementsAttr::get(vector, attr));
  return b.create<arith::ConstantOp>(loc, attr);
}

struct ExpandIntegerPow : OpRewritePattern<math::IPowIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::IPowIOp op, PatternRewriter& b) const override {
    Location loc = op.getLoc();
    Type type = op.getType();
    const unsigned width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
    auto constant = [&](int64_t value) { return integerConstant(b, loc, type, value); };
    Value zero = constant(0), one = constant(1), minusOne = constant(-1);
    Value base = op.getLhs(), exponent = op.getRhs();
    Value power = one;
    for (unsigned bit = 0; bit + 1 < width; ++bit) {
      Value masked = b.create<arith::AndIOp>(loc, exponent, constant(int64_t{1} << bit));
      Value set = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, masked, zero);
      power = b.create<arith::SelectOp>(loc, set, b.create<arith::MulIOp>(loc, power, base), power);
      base = b.create<arith::MulIOp>(loc, base, base);
    }
    base = op.getLhs();
    Value odd = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne,
                                        b.create<arith::AndIOp>(loc, exponent, one), zero);
    Value ofMinusOne = b.create<arith::SelectOp>(loc, odd, minusOne, one);
    Value isOne = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, base, one);
    Value isMinusOne = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, base, minusOne);
    Value negativePower = b.create<arith::SelectOp>(
        loc, isOne, one, b.create<arith::SelectOp>(loc, isMinusOne, ofMinusOne, zero));
    Value negative = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, exponent, zero);
    b.replaceOpWithNewOp<arith::SelectOp>(op, negative, negativePower, power);
    return success();
  }
};

} // namespace

void populate_integer_pow_expansion(RewritePatternSet& patterns) {
  patterns.add<ExpandIntegerPow>(patterns.getContext());
}

} // namespace mstep::passes
