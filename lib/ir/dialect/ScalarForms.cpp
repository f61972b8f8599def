// Scalar forms of the fusible mstep ops (see ScalarForms.h).
#include "mstep/ir/dialect/ScalarForms.h"

#include <cmath>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mstep::dialect {

using namespace mlir;
namespace md = ::mstep::dialect;

namespace {

using ScalarFn = llvm::function_ref<Value(ValueRange)>;

Value floatConstant(OpBuilder& b, Location loc, Type type, double value) {
  return b.create<arith::ConstantOp>(loc, b.getFloatAttr(type, value));
}

Value intConstant(OpBuilder& b, Location loc, Type type, int64_t value) {
  return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(type, value));
}

/// Runs `compute` on `operands`, widened to f32 first and the result rounded
/// back when `type` is bf16 or f16: one rounding per op, as PyTorch's CPU
/// kernels do. Other types compute in place.
Value computeWidened(OpBuilder& b, Location loc, Type type, ValueRange operands, ScalarFn compute) {
  if (!isHalfFloat(type)) return compute(operands);
  SmallVector<Value> wide;
  for (Value operand : operands)
    wide.push_back(b.create<arith::ExtFOp>(loc, b.getF32Type(), operand));
  return b.create<arith::TruncFOp>(loc, type, compute(wide));
}

/// A float op with one math/arith op, computed widened for bf16/f16.
template <typename FloatOp> Value floatOp(OpBuilder& b, Location loc, ValueRange operands) {
  return computeWidened(b, loc, operands[0].getType(), operands,
                        [&](ValueRange v) -> Value { return b.create<FloatOp>(loc, v); });
}

/// Picks the float, signed-integer or bool (i1) form of an arithmetic op.
/// Float forms compute widened for bf16/f16.
template <typename FloatOp, typename IntOp, typename BoolOp = IntOp>
Value arithmeticOp(OpBuilder& b, Location loc, ValueRange operands) {
  Type type = operands[0].getType();
  if (isa<FloatType>(type)) return floatOp<FloatOp>(b, loc, operands);
  if (type.isInteger(1)) return b.create<BoolOp>(loc, operands);
  return b.create<IntOp>(loc, operands);
}

/// max/min: NaN-propagating for floats (torch.maximum), signed for ints,
/// unsigned for bools (false < true). Exact, so never widened.
template <typename FloatOp, typename SignedOp, typename UnsignedOp>
Value extremumOp(OpBuilder& b, Location loc, ValueRange operands) {
  Type type = operands[0].getType();
  if (isa<FloatType>(type)) return b.create<FloatOp>(loc, operands);
  if (type.isInteger(1)) return b.create<UnsignedOp>(loc, operands);
  return b.create<SignedOp>(loc, operands);
}

/// Comparisons: ordered float predicates (false on NaN) except `ne`, which
/// is unordered (true on NaN) like PyTorch; signed ints; unsigned bools.
Value compare(OpBuilder& b, Location loc, ValueRange operands, arith::CmpFPredicate floatPred,
              arith::CmpIPredicate signedPred, arith::CmpIPredicate unsignedPred) {
  Type type = operands[0].getType();
  if (isa<FloatType>(type))
    return b.create<arith::CmpFOp>(loc, floatPred, operands[0], operands[1]);
  return b.create<arith::CmpIOp>(loc, type.isInteger(1) ? unsignedPred : signedPred, operands[0],
                                 operands[1]);
}

/// 1 / (1 + e^-x), in the (widened) compute type of `x`.
Value sigmoidOf(OpBuilder& b, Location loc, Value x) {
  Value one = floatConstant(b, loc, x.getType(), 1.0);
  Value expNeg = b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, x));
  return b.create<arith::DivFOp>(loc, one, b.create<arith::AddFOp>(loc, one, expNeg));
}

/// gelu: x * 0.5 * (1 + erf(x / sqrt 2)), or with the tanh approximation
/// 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
Value geluOf(OpBuilder& b, Location loc, Value x, md::GeluApproximation approximation) {
  Type type = x.getType();
  Value half = floatConstant(b, loc, type, 0.5);
  Value one = floatConstant(b, loc, type, 1.0);
  Value inner;
  if (approximation == md::GeluApproximation::tanh) {
    Value cube = b.create<arith::MulFOp>(loc, b.create<arith::MulFOp>(loc, x, x), x);
    Value poly = b.create<arith::AddFOp>(
        loc, x, b.create<arith::MulFOp>(loc, floatConstant(b, loc, type, 0.044715), cube));
    Value scaled =
        b.create<arith::MulFOp>(loc, floatConstant(b, loc, type, std::sqrt(2.0 / M_PI)), poly);
    inner = b.create<math::TanhOp>(loc, scaled);
  } else {
    inner = b.create<math::ErfOp>(
        loc, b.create<arith::MulFOp>(loc, x, floatConstant(b, loc, type, M_SQRT1_2)));
  }
  Value halfX = b.create<arith::MulFOp>(loc, x, half);
  return b.create<arith::MulFOp>(loc, halfX, b.create<arith::AddFOp>(loc, one, inner));
}

Value negOf(OpBuilder& b, Location loc, Value x) {
  if (isa<FloatType>(x.getType())) return b.create<arith::NegFOp>(loc, x);
  return b.create<arith::SubIOp>(loc, intConstant(b, loc, x.getType(), 0), x);
}

Value absOf(OpBuilder& b, Location loc, Value x) {
  if (isa<FloatType>(x.getType())) return b.create<math::AbsFOp>(loc, x);
  return b.create<math::AbsIOp>(loc, x);
}

/// max(x, 0). arith.maximumf propagates NaN, as torch.relu does.
Value reluOf(OpBuilder& b, Location loc, Value x) {
  Type type = x.getType();
  if (isa<FloatType>(type))
    return b.create<arith::MaximumFOp>(loc, x, floatConstant(b, loc, type, 0.0));
  return b.create<arith::MaxSIOp>(loc, x, intConstant(b, loc, type, 0));
}

Value isNanOf(OpBuilder& b, Location loc, Value x) {
  if (!isa<FloatType>(x.getType())) return intConstant(b, loc, b.getI1Type(), 0);
  return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, x, x);
}

/// |x| != inf, ordered: false for inf and for NaN.
Value isFiniteOf(OpBuilder& b, Location loc, Value x) {
  Type type = x.getType();
  if (!isa<FloatType>(type)) return intConstant(b, loc, b.getI1Type(), 1);
  return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::ONE, b.create<math::AbsFOp>(loc, x),
                                 floatConstant(b, loc, type, INFINITY));
}

} // namespace

TypedAttr constantAttr(Builder& b, Type type, double value) {
  if (isa<FloatType>(type)) return b.getFloatAttr(type, value);
  if (type.isInteger(1)) return b.getIntegerAttr(type, value != 0.0 ? 1 : 0);
  return b.getIntegerAttr(type, static_cast<int64_t>(value));
}

bool isHalfFloat(Type type) { return type.isBF16() || type.isF16(); }

Value convertScalar(OpBuilder& b, Location loc, Value value, Type to) {
  Type from = value.getType();
  if (from == to) return value;
  auto fromFloat = dyn_cast<FloatType>(from);
  auto toFloat = dyn_cast<FloatType>(to);
  const bool fromBool = from.isInteger(1);
  // 1. To bool: nonzero is true (NaN included: une is unordered).
  if (to.isInteger(1)) {
    if (fromFloat)
      return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, value,
                                     floatConstant(b, loc, from, 0.0));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, value,
                                   intConstant(b, loc, from, 0));
  }
  // 2. To float.
  if (toFloat) {
    if (!fromFloat)
      return fromBool ? b.create<arith::UIToFPOp>(loc, to, value).getResult()
                      : b.create<arith::SIToFPOp>(loc, to, value).getResult();
    if (fromFloat.getWidth() < toFloat.getWidth()) return b.create<arith::ExtFOp>(loc, to, value);
    if (fromFloat.getWidth() > toFloat.getWidth()) {
      // f64 -> bf16/f16 through f32, as ref's and PyTorch's casts (the
      // 16-bit types convert from float): two roundings, not one. (A direct
      // truncf also lowers to `__truncdfbf2`, which the JIT cannot resolve.)
      if (from.isF64() && isHalfFloat(to))
        value = b.create<arith::TruncFOp>(loc, b.getF32Type(), value);
      return b.create<arith::TruncFOp>(loc, to, value);
    }
    // bf16 <-> f16: widening to f32 is exact, so this rounds once.
    Value wide = b.create<arith::ExtFOp>(loc, b.getF32Type(), value);
    return b.create<arith::TruncFOp>(loc, to, wide);
  }
  // 3. To a wider or narrower int: floats truncate toward zero, bools are 0/1.
  if (fromFloat) return b.create<arith::FPToSIOp>(loc, to, value);
  if (fromBool) return b.create<arith::ExtUIOp>(loc, to, value);
  if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
    return b.create<arith::ExtSIOp>(loc, to, value);
  return b.create<arith::TruncIOp>(loc, to, value);
}

bool hasScalarForm(Operation* op) {
  // Keep in sync with the cases of emitScalarOp.
  return isa<md::NegOp, md::AbsOp, md::ExpOp, md::LogOp, md::Log1pOp, md::SqrtOp, md::RsqrtOp,
             md::SinOp, md::CosOp, md::TanhOp, md::ErfOp, md::SigmoidOp, md::SiluOp, md::ReluOp,
             md::ReciprocalOp, md::GeluOp, md::LogicalNotOp, md::IsNanOp, md::IsFiniteOp,
             md::CastOp, md::AddOp, md::SubOp, md::MulOp, md::DivOp, md::PowOp, md::MaximumOp,
             md::MinimumOp, md::EqOp, md::NeOp, md::LtOp, md::LeOp, md::GtOp, md::GeOp,
             md::LogicalAndOp, md::LogicalOrOp, md::WhereOp, md::ConstantOp, md::FullOp,
             md::ExpandOp>(op);
}

Value emitScalarOp(OpBuilder& b, Operation* op, ValueRange operands) {
  Location loc = op->getLoc();
  using P = arith::CmpFPredicate;
  using I = arith::CmpIPredicate;
  // A widened float computation of the op's first operand.
  auto widened = [&](auto compute) {
    Value x = operands[0];
    return computeWidened(b, loc, x.getType(), x,
                          [&](ValueRange v) -> Value { return compute(v[0]); });
  };
  return llvm::TypeSwitch<Operation*, Value>(op)
      // Unary.
      .Case([&](md::NegOp) { return negOf(b, loc, operands[0]); })
      .Case([&](md::AbsOp) { return absOf(b, loc, operands[0]); })
      .Case([&](md::ReluOp) { return reluOf(b, loc, operands[0]); })
      .Case([&](md::ExpOp) { return floatOp<math::ExpOp>(b, loc, operands); })
      .Case([&](md::LogOp) { return floatOp<math::LogOp>(b, loc, operands); })
      .Case([&](md::Log1pOp) { return floatOp<math::Log1pOp>(b, loc, operands); })
      .Case([&](md::SqrtOp) { return floatOp<math::SqrtOp>(b, loc, operands); })
      .Case([&](md::RsqrtOp) { return floatOp<math::RsqrtOp>(b, loc, operands); })
      .Case([&](md::SinOp) { return floatOp<math::SinOp>(b, loc, operands); })
      .Case([&](md::CosOp) { return floatOp<math::CosOp>(b, loc, operands); })
      .Case([&](md::TanhOp) { return floatOp<math::TanhOp>(b, loc, operands); })
      .Case([&](md::ErfOp) { return floatOp<math::ErfOp>(b, loc, operands); })
      .Case([&](md::SigmoidOp) { return widened([&](Value x) { return sigmoidOf(b, loc, x); }); })
      .Case([&](md::SiluOp) {
        return widened([&](Value x) -> Value {
          return b.create<arith::MulFOp>(loc, x, sigmoidOf(b, loc, x));
        });
      })
      .Case([&](md::ReciprocalOp) {
        return widened([&](Value x) -> Value {
          return b.create<arith::DivFOp>(loc, floatConstant(b, loc, x.getType(), 1.0), x);
        });
      })
      .Case([&](md::GeluOp gelu) {
        return widened([&](Value x) { return geluOf(b, loc, x, gelu.getApproximate()); });
      })
      .Case([&](md::LogicalNotOp) -> Value {
        return b.create<arith::XOrIOp>(loc, operands[0], intConstant(b, loc, b.getI1Type(), 1));
      })
      .Case([&](md::IsNanOp) { return isNanOf(b, loc, operands[0]); })
      .Case([&](md::IsFiniteOp) { return isFiniteOf(b, loc, operands[0]); })
      .Case([&](md::CastOp cast) {
        return convertScalar(b, loc, operands[0], cast.getType().getElementType());
      })
      // Binary arithmetic. Bools: add is or, mul is and (PyTorch's bool ops).
      .Case([&](md::AddOp) {
        return arithmeticOp<arith::AddFOp, arith::AddIOp, arith::OrIOp>(b, loc, operands);
      })
      .Case([&](md::SubOp) { return arithmeticOp<arith::SubFOp, arith::SubIOp>(b, loc, operands); })
      .Case([&](md::MulOp) {
        return arithmeticOp<arith::MulFOp, arith::MulIOp, arith::AndIOp>(b, loc, operands);
      })
      .Case([&](md::DivOp) { return floatOp<arith::DivFOp>(b, loc, operands); })
      .Case([&](md::PowOp) { return arithmeticOp<math::PowFOp, math::IPowIOp>(b, loc, operands); })
      .Case([&](md::MaximumOp) {
        return extremumOp<arith::MaximumFOp, arith::MaxSIOp, arith::MaxUIOp>(b, loc, operands);
      })
      .Case([&](md::MinimumOp) {
        return extremumOp<arith::MinimumFOp, arith::MinSIOp, arith::MinUIOp>(b, loc, operands);
      })
      // Comparisons and logic.
      .Case([&](md::EqOp) { return compare(b, loc, operands, P::OEQ, I::eq, I::eq); })
      .Case([&](md::NeOp) { return compare(b, loc, operands, P::UNE, I::ne, I::ne); })
      .Case([&](md::LtOp) { return compare(b, loc, operands, P::OLT, I::slt, I::ult); })
      .Case([&](md::LeOp) { return compare(b, loc, operands, P::OLE, I::sle, I::ule); })
      .Case([&](md::GtOp) { return compare(b, loc, operands, P::OGT, I::sgt, I::ugt); })
      .Case([&](md::GeOp) { return compare(b, loc, operands, P::OGE, I::sge, I::uge); })
      .Case([&](md::LogicalAndOp) -> Value { return b.create<arith::AndIOp>(loc, operands); })
      .Case([&](md::LogicalOrOp) -> Value { return b.create<arith::OrIOp>(loc, operands); })
      .Case([&](md::WhereOp) -> Value {
        return b.create<arith::SelectOp>(loc, operands[0], operands[1], operands[2]);
      })
      // Creation and broadcasting: the indexing maps do the broadcasting, so
      // one element of the result is the operand's element.
      .Case([&](md::ConstantOp constant) -> Value {
        return b.create<arith::ConstantOp>(loc,
                                           constantAttr(b, constant.getType().getElementType(),
                                                        constant.getValue().convertToDouble()));
      })
      .Case<md::FullOp, md::ExpandOp>([&](Operation*) { return operands[0]; })
      .Default([](Operation*) -> Value {
        llvm_unreachable("emitScalarOp on an op without a scalar form (see hasScalarForm)");
      });
}

} // namespace mstep::dialect
