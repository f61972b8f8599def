// The loops of CudaCreationLoops.h; each follows its ref kernel
// (RefCreation.cpp's constant and random, RefShape.cpp's triangle and pad).
#include "lib/backends/cuda/CudaCreationLoops.h"
#include "lib/backends/cuda/CudaLoopNest.h"

#include <cmath>

#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

/// An f32 constant with exactly the bits of `v`.
Value f32(Nest& nest, float v) {
  return nest.b.create<arith::ConstantFloatOp>(APFloat(v), nest.b.getF32Type());
}

/// The value a 0-d constant of `type` holds as ref stores it:
/// static_cast<T>(static_cast<Compute<T>>(v)), so the 16-bit floats round
/// through f32 (one rounding of a double straight to bf16 could differ),
/// integers truncate toward zero and a bool is v != 0.
TypedAttr constant_as_ref(Type type, double v) {
  if (auto f = dyn_cast<FloatType>(type)) {
    APFloat value(v);
    bool lost = false;
    if (!type.isF64()) {
      value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);
      value.convert(f.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    }
    return FloatAttr::get(type, value);
  }
  const unsigned width = type.getIntOrFloatBitWidth();
  if (width == 1) return IntegerAttr::get(type, APInt(1, v != 0.0 ? 1 : 0));
  return IntegerAttr::get(
      type, APInt(64, static_cast<uint64_t>(static_cast<int64_t>(v)), /*isSigned=*/true).trunc(width));
}

/// RefCreation.cpp's constant: one lane writes the value.
void constant_loops(dialect::ConstantOp op, Nest& nest) {
  Flat out = nest.flat(0);
  const double v = op.getValue().convertToDouble();
  nest.parallel(1, [&](Value i) {
    nest.store(nest.b.create<arith::ConstantOp>(constant_as_ref(out.element(), v)), out, i);
  });
}

/// Philox::uniform's 24 bits of `word` as an f32 in [0, 1): (word >> 8) *
/// 2^-24, exact.
Value uniform_of(Nest& nest, Value word) {
  ImplicitLocOpBuilder& b = nest.b;
  Value bits = b.create<arith::ShRUIOp>(word, nest.integer(b.getI32Type(), 8));
  return b.create<arith::MulFOp>(b.create<arith::UIToFPOp>(b.getF32Type(), bits),
                                 f32(nest, 1.0f / 16777216.0f));
}

/// Significand digits a uniform keeps for `type` (RefCreation.cpp's
/// kDigits: PyTorch's uniform_real_distribution keeps as many bits as the
/// dtype, so rounding to a 16-bit float never reaches 1).
int uniform_digits(Type type) {
  if (type.isBF16()) return 8;
  if (type.isF16()) return 11;
  return 24;
}

/// RefCreation.cpp's random: element i from the Philox block at counter
/// state[1] + offset + i under key state[0]. rand: the uniform of word 0,
/// floored to the dtype's grid in f32; randn: Box-Muller on words 0 and 1
/// in f32 (Philox::normal, whose logf / cosf are libm's on the host and
/// libdevice's __nv_logf / __nv_cosf on a GPU: those may differ in the
/// last bit or two).
void random_loops(Operation* op, int64_t offset, bool normal, Nest& nest) {
  Value state = nest.param(0);
  Flat out = nest.flat(1);
  ImplicitLocOpBuilder& b = nest.b;
  const Type element = out.element();
  nest.parallel(numel(op->getResult(0)), [&](Value i) {
    Value seed = b.create<memref::LoadOp>(state, ValueRange{nest.index(0)});
    Value start = b.create<arith::AddIOp>(b.create<memref::LoadOp>(state, ValueRange{nest.index(1)}),
                                          nest.integer(b.getI64Type(), offset));
    Value counter = b.create<arith::AddIOp>(start, b.create<arith::IndexCastUIOp>(b.getI64Type(), i));
    std::array<Value, 2> words = philox_words(nest, seed, counter);
    Value r;
    if (normal) {
      // u1 = (w0 >> 8 + 1) * (1 / 16777217) in (0, 1] (the constant is
      // Philox.h's f32 expression, which rounds to 2^-24), u2 = w1's uniform.
      Value bits = b.create<arith::ShRUIOp>(words[0], nest.integer(b.getI32Type(), 8));
      Value u1 = b.create<arith::MulFOp>(
          b.create<arith::AddFOp>(b.create<arith::UIToFPOp>(b.getF32Type(), bits), f32(nest, 1.0f)),
          f32(nest, 1.0f / 16777217.0f));
      Value u2 = uniform_of(nest, words[1]);
      Value radius = b.create<math::SqrtOp>(
          b.create<arith::MulFOp>(f32(nest, -2.0f), b.create<math::LogOp>(u1)));
      Value angle = b.create<math::CosOp>(
          b.create<arith::MulFOp>(f32(nest, 6.2831853071795864f), u2));
      r = b.create<arith::MulFOp>(radius, angle);
    } else {
      const float grid = static_cast<float>(1 << uniform_digits(element));
      Value scaled = b.create<arith::MulFOp>(uniform_of(nest, words[0]), f32(nest, grid));
      r = b.create<arith::DivFOp>(b.create<math::FloorOp>(scaled), f32(nest, grid));
    }
    Value stored = element.isF32()   ? r
                   : element.isF64() ? b.create<arith::ExtFOp>(element, r).getResult()
                                     : b.create<arith::TruncFOp>(element, r).getResult();
    nest.store(stored, out, i);
  });
}

/// RefShape.cpp's triangle: element (.., row, col) is kept where col - row
/// >= diagonal (triu) or <= diagonal (tril), else zero.
void triangle_loops(Operation* op, int64_t diagonal, bool upper, Nest& nest) {
  auto shape = cast<ShapedType>(op->getResult(0).getType()).getShape();
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  Flat x = nest.flat(0), y = nest.flat(1);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op->getResult(0)), [&](Value i) {
    Value col = nest.rem(i, cols), row = nest.rem(nest.div(i, cols), rows);
    Value offset = b.create<arith::SubIOp>(col, row);
    Value keep = b.create<arith::CmpIOp>(upper ? arith::CmpIPredicate::sge : arith::CmpIPredicate::sle,
                                         offset, nest.index(diagonal));
    Value zero = isa<FloatType>(y.element()) ? nest.constant(y.element(), 0.0)
                                             : nest.integer(y.element(), 0);
    nest.store(b.create<arith::SelectOp>(keep, nest.load(x, i), zero), y, i);
  });
}

/// RefShape.cpp's pad: one lane per output element, the input element
/// `before` positions back along each dim where that is inside the input
/// (a negative `before` crops), else the value (operand 1, 0-d).
void pad_loops(dialect::PadOp op, Nest& nest) {
  auto in_shape = cast<ShapedType>(op.getInput().getType()).getShape();
  auto out_shape = cast<ShapedType>(op.getResult().getType()).getShape();
  ArrayRef<int64_t> pads = op.getPads();
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  Flat x = nest.flat(0), value = nest.flat(1), y = nest.flat(2);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value rest = i, at = nest.index(0), inside = nest.integer(b.getI1Type(), 1);
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t k = rank - 1 - d;  // pads[2k], pads[2k + 1] are dim d's
      const int64_t before = 2 * k < static_cast<int64_t>(pads.size()) ? pads[2 * k] : 0;
      Value c = b.create<arith::SubIOp>(nest.rem(rest, out_shape[d]), nest.index(before));
      rest = nest.div(rest, out_shape[d]);
      inside = b.create<arith::AndIOp>(
          inside, b.create<arith::AndIOp>(
                      b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, c, nest.index(0)),
                      b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, c, nest.index(in_shape[d]))));
      at = nest.affine(c, stride, at);
      stride *= in_shape[d];
    }
    Value v = nest.load(x, b.create<arith::SelectOp>(inside, at, nest.index(0)));
    nest.store(b.create<arith::SelectOp>(inside, v, nest.load(value, nest.index(0))), y, i);
  });
}

}  // namespace

bool builds_creation_loops(Operation* op) {
  return isa<dialect::ConstantOp, dialect::RandOp, dialect::RandnOp, dialect::TriuOp,
             dialect::TrilOp, dialect::PadOp>(op);
}

void build_creation_loops(Operation* op, Nest& nest) {
  if (auto constant = dyn_cast<dialect::ConstantOp>(op))
    constant_loops(constant, nest);
  else if (auto rand = dyn_cast<dialect::RandOp>(op))
    random_loops(op, static_cast<int64_t>(rand.getOffset()), /*normal=*/false, nest);
  else if (auto randn = dyn_cast<dialect::RandnOp>(op))
    random_loops(op, static_cast<int64_t>(randn.getOffset()), /*normal=*/true, nest);
  else if (auto triu = dyn_cast<dialect::TriuOp>(op))
    triangle_loops(op, triu.getDiagonal(), /*upper=*/true, nest);
  else if (auto tril = dyn_cast<dialect::TrilOp>(op))
    triangle_loops(op, tril.getDiagonal(), /*upper=*/false, nest);
  else if (auto pad = dyn_cast<dialect::PadOp>(op))
    pad_loops(pad, nest);
}

namespace loops {

std::array<Value, 2> philox_words(Nest& nest, Value seed, Value counter) {
  ImplicitLocOpBuilder& b = nest.b;
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto u32 = [&](uint32_t v) {
    return b.create<arith::ConstantOp>(b.getIntegerAttr(i32, APInt(32, v))).getResult();
  };
  auto lo = [&](Value v) { return b.create<arith::TruncIOp>(i32, v).getResult(); };
  auto hi = [&](Value v) { return lo(b.create<arith::ShRUIOp>(v, nest.integer(i64, 32))); };
  auto wide_mul = [&](uint32_t m, Value v) { // the 64-bit product of two u32
    return b.create<arith::MulIOp>(b.create<arith::ExtUIOp>(i64, v), nest.integer(i64, m))
        .getResult();
  };
  Value c0 = lo(counter), c1 = hi(counter), c2 = u32(0), c3 = u32(0);
  Value k0 = lo(seed), k1 = hi(seed);
  for (int round = 0; round < 10; ++round) {
    Value p0 = wide_mul(0xD2511F53u, c0), p1 = wide_mul(0xCD9E8D57u, c2);
    Value n0 = b.create<arith::XOrIOp>(b.create<arith::XOrIOp>(hi(p1), c1), k0);
    Value n1 = lo(p1);
    Value n2 = b.create<arith::XOrIOp>(b.create<arith::XOrIOp>(hi(p0), c3), k1);
    Value n3 = lo(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 = b.create<arith::AddIOp>(k0, u32(0x9E3779B9u));
    k1 = b.create<arith::AddIOp>(k1, u32(0xBB67AE85u));
  }
  return {c0, c1};
}

Value philox_uniform(Nest& nest, Value seed, Value counter) {
  return uniform_of(nest, philox_words(nest, seed, counter)[0]);
}

}  // namespace loops

}  // namespace mstep::cuda
