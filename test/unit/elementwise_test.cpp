// Unit tests for the elementwise ops: hand-checked values of every unary
// and binary op, host-scalar and operator forms, comparisons, logic,
// where and casts (float to int truncation, bool, bf16 rounding).
// Broadcasting, type promotion and error messages are in
// elementwise_promotion_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor f32(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}
Tensor i64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}
Tensor boolean(std::vector<bool> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return from_vector(v, {n});
}
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

/// -1, 0, 1, 2: the inputs of the unary value tests.
Tensor x4() { return f32({-1, 0, 1, 2}); }

// ---- unary --------------------------------------------------------------

TEST(ElementwiseUnary, NegAndAbs) {
  Tensor y = neg(x4());
  EXPECT_TRUE(y.is_pending());  // recorded, not computed
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_THAT(floats(y), ElementsAre(1, 0, -1, -2));
  EXPECT_THAT(floats(abs(x4())), ElementsAre(1, 0, 1, 2));
  EXPECT_FALSE(std::signbit(abs(f32({-0.0f})).item()));  // |-0| = +0
  Tensor i = abs(from_vector(std::vector<int32_t>{-7, 3}, {2}));
  EXPECT_EQ(i.dtype(), DType::i32);
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(7, 3));
  EXPECT_THAT(neg(i64({5, -2})).to_vector<int64_t>(), ElementsAre(-5, 2));
}

TEST(ElementwiseUnary, ExpLogLog1p) {
  EXPECT_THAT(floats(exp(x4())),
              Pointwise(FloatNear(1e-6), {0.36787945f, 1.0f, 2.7182817f, 7.3890561f}));
  std::vector<float> l = floats(log(f32({1, 2.7182817f, 0, -1})));
  EXPECT_NEAR(l[0], 0, 1e-7);
  EXPECT_NEAR(l[1], 1, 1e-6);
  EXPECT_EQ(l[2], -kInf);
  EXPECT_TRUE(std::isnan(l[3]));
  std::vector<float> p = floats(log1p(f32({0, 1e-10f, -1, 1.7182817f})));
  EXPECT_EQ(p[0], 0);
  EXPECT_FLOAT_EQ(p[1], 1e-10f);  // accurate near 0, unlike log(1 + x)
  EXPECT_EQ(p[2], -kInf);
  EXPECT_NEAR(p[3], 1, 1e-6);
}

TEST(ElementwiseUnary, SqrtRsqrtReciprocal) {
  std::vector<float> s = floats(sqrt(f32({4, 0, 2.25f, -1})));
  EXPECT_THAT(std::vector<float>(s.begin(), s.end() - 1), ElementsAre(2, 0, 1.5));
  EXPECT_TRUE(std::isnan(s[3]));
  EXPECT_THAT(floats(rsqrt(f32({4, 0.25f, 0}))), ElementsAre(0.5, 2, kInf));
  EXPECT_THAT(floats(reciprocal(f32({2, -4, 0}))), ElementsAre(0.5, -0.25, kInf));
}

TEST(ElementwiseUnary, Trigonometric) {
  EXPECT_THAT(floats(sin(x4())),
              Pointwise(FloatNear(1e-6), {-0.84147096f, 0.0f, 0.84147096f, 0.90929741f}));
  EXPECT_THAT(floats(cos(x4())),
              Pointwise(FloatNear(1e-6), {0.54030234f, 1.0f, 0.54030234f, -0.41614684f}));
  EXPECT_THAT(floats(tanh(x4())),
              Pointwise(FloatNear(1e-6), {-0.76159418f, 0.0f, 0.76159418f, 0.96402758f}));
}

TEST(ElementwiseUnary, SigmoidAndSiluSaturate) {
  EXPECT_THAT(floats(sigmoid(x4())),
              Pointwise(FloatNear(1e-6), {0.26894143f, 0.5f, 0.7310586f, 0.88079703f}));
  EXPECT_THAT(floats(silu(x4())),
              Pointwise(FloatNear(1e-6), {-0.26894143f, 0.0f, 0.7310586f, 1.76159406f}));
  // No overflow to NaN at the extremes.
  EXPECT_THAT(floats(sigmoid(f32({-100, 100}))), ElementsAre(0, 1));
  EXPECT_THAT(floats(silu(f32({-100, 100}))), Pointwise(FloatNear(1e-6), {0.0f, 100.0f}));
}

TEST(ElementwiseUnary, ReluKeepsDtypeAndNaN) {
  EXPECT_THAT(floats(relu(x4())), ElementsAre(0, 0, 1, 2));
  Tensor i = relu(i64({-3, 4}));
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(0, 4));
  EXPECT_TRUE(std::isnan(relu(f32({kNaN})).item()));  // as PyTorch
}

TEST(ElementwiseUnary, GeluBothForms) {
  EXPECT_THAT(floats(gelu(x4())),
              Pointwise(FloatNear(1e-6), {-0.15865529f, 0.0f, 0.84134471f, 1.95449996f}));
  EXPECT_THAT(floats(gelu(x4(), "none")), Pointwise(FloatNear(1e-6), floats(gelu(x4()))));
  EXPECT_THAT(floats(gelu(x4(), "tanh")),
              Pointwise(FloatNear(1e-6), {-0.15880799f, 0.0f, 0.84119201f, 1.95459771f}));
  // The two forms differ in the tails.
  EXPECT_NEAR(gelu(f32({-3}), "none").item(), -0.00404987, 1e-6);
  EXPECT_NEAR(gelu(f32({-3}), "tanh").item(), -0.00363743, 1e-6);
}

TEST(ElementwiseUnary, Erf) {
  EXPECT_THAT(floats(erf(x4())),
              Pointwise(FloatNear(1e-6), {-0.84270078f, 0.0f, 0.84270078f, 0.99532229f}));
  EXPECT_THAT(floats(erf(f32({-kInf, kInf}))), ElementsAre(-1, 1));
}

TEST(ElementwiseUnary, IntegerAndBoolInputsToFloatMathGiveF32) {
  Tensor e = exp(i64({1, 2}));
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_THAT(floats(e), Pointwise(FloatNear(1e-6), {2.7182817f, 7.3890561f}));
  Tensor r = reciprocal(from_vector(std::vector<int32_t>{2, -4, 0}, {3}));
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_THAT(floats(r), ElementsAre(0.5, -0.25, kInf));
  Tensor s = sqrt(boolean({true, false}));
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_THAT(floats(s), ElementsAre(1, 0));
  EXPECT_EQ(sigmoid(from_vector(std::vector<double>{0}, {1})).dtype(), DType::f64);
  EXPECT_EQ(tanh(zeros({2}, DType::bf16)).dtype(), DType::bf16);
}

TEST(ElementwiseUnary, IsnanIsfiniteLogicalNot) {
  Tensor x = f32({kNaN, kInf, -kInf, 0, 1.5f});
  Tensor n = isnan(x);
  EXPECT_EQ(n.dtype(), DType::boolean);
  EXPECT_THAT(n.to_vector<bool>(), ElementsAre(true, false, false, false, false));
  EXPECT_THAT(isfinite(x).to_vector<bool>(), ElementsAre(false, false, false, true, true));
  EXPECT_THAT(isnan(i64({1, 2})).to_vector<bool>(), ElementsAre(false, false));
  EXPECT_THAT(isfinite(boolean({true})).to_vector<bool>(), ElementsAre(true));
  Tensor l = logical_not(f32({0, -2, kNaN}));
  EXPECT_EQ(l.dtype(), DType::boolean);
  EXPECT_THAT(l.to_vector<bool>(), ElementsAre(true, false, false));  // NaN is true
  EXPECT_THAT(logical_not(boolean({true, false})).to_vector<bool>(), ElementsAre(false, true));
}

// ---- to(dtype) ------------------------------------------------------------

TEST(ElementwiseCast, FloatToIntTruncatesTowardZero) {
  Tensor x = f32({1.7f, -1.7f, 2.9f, -0.5f});
  Tensor i = to(x, DType::i32);
  EXPECT_EQ(i.dtype(), DType::i32);
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(1, -1, 2, 0));
  EXPECT_THAT(x.to(DType::i64).to_vector<int64_t>(), ElementsAre(1, -1, 2, 0));
}

TEST(ElementwiseCast, ToBoolAndBack) {
  Tensor b = to(f32({kNaN, 0, -0.0f, 0.1f}), DType::boolean);
  EXPECT_THAT(b.to_vector<bool>(), ElementsAre(true, false, false, true));
  EXPECT_THAT(to(i64({0, -3}), DType::boolean).to_vector<bool>(), ElementsAre(false, true));
  EXPECT_THAT(floats(to(boolean({true, false}), DType::f32)), ElementsAre(1, 0));
}

TEST(ElementwiseCast, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to
  // the even one (1). 1 + 3 * 2^-8 is halfway to 1 + 2^-6 (even).
  Tensor x = f32({1.00390625f, 1.01171875f, 1.005f, 3.0e38f});
  Tensor b = to(x, DType::bf16);
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_THAT(floats(b), ElementsAre(1.0f, 1.015625f, 1.0078125f, 3.0040553e38f));
  EXPECT_THAT(floats(to(f32({65520, 1.0009765625f}), DType::f16)),
              ElementsAre(kInf, 1.0009765625f));
}

TEST(ElementwiseCast, SameDtypeIsANoOpAndIntWidening) {
  Tensor x = f32({1, 2});
  EXPECT_EQ(to(x, DType::f32).impl(), x.impl());  // no node
  Tensor w = to(from_vector(std::vector<int32_t>{-2, 2147483647}, {2}), DType::i64);
  EXPECT_THAT(w.to_vector<int64_t>(), ElementsAre(-2, 2147483647));
}

// ---- binary ---------------------------------------------------------------

TEST(ElementwiseBinary, AddSubMulDiv) {
  Tensor a = f32({1, 2, 3, 4});
  Tensor b = f32({0.5f, -2, 4, 8});
  EXPECT_THAT(floats(add(a, b)), ElementsAre(1.5, 0, 7, 12));
  EXPECT_THAT(floats(sub(a, b)), ElementsAre(0.5, 4, -1, -4));
  EXPECT_THAT(floats(mul(a, b)), ElementsAre(0.5, -4, 12, 32));
  EXPECT_THAT(floats(div(a, b)), ElementsAre(2, -1, 0.75, 0.5));
  std::vector<float> z = floats(div(f32({1, -1, 0}), f32({0, 0, 0})));
  EXPECT_EQ(z[0], kInf);
  EXPECT_EQ(z[1], -kInf);
  EXPECT_TRUE(std::isnan(z[2]));
}

TEST(ElementwiseBinary, IntegerArithmeticStaysInteger) {
  Tensor a = i64({7, -7, 3});
  Tensor b = i64({2, 2, -5});
  EXPECT_EQ(add(a, b).dtype(), DType::i64);
  EXPECT_THAT(add(a, b).to_vector<int64_t>(), ElementsAre(9, -5, -2));
  EXPECT_THAT(sub(a, b).to_vector<int64_t>(), ElementsAre(5, -9, 8));
  EXPECT_THAT(mul(a, b).to_vector<int64_t>(), ElementsAre(14, -14, -15));
  // True division: int / int is f32.
  Tensor d = div(a, b);
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_THAT(floats(d), ElementsAre(3.5, -3.5, -0.6f));
}

TEST(ElementwiseBinary, BoolAddAndMulAreLogical) {
  Tensor a = boolean({true, true, false, false});
  Tensor b = boolean({true, false, true, false});
  Tensor s = add(a, b);
  EXPECT_EQ(s.dtype(), DType::boolean);
  EXPECT_THAT(s.to_vector<bool>(), ElementsAre(true, true, true, false));
  EXPECT_THAT(mul(a, b).to_vector<bool>(), ElementsAre(true, false, false, false));
}

TEST(ElementwiseBinary, PowFloat) {
  Tensor p = pow(f32({2, -2, 0, 4}), f32({-1, 3, -1, 0.5f}));
  EXPECT_THAT(floats(p), ElementsAre(0.5, -8, kInf, 2));
  EXPECT_TRUE(std::isnan(pow(f32({-2}), f32({0.5f})).item()));
}

TEST(ElementwiseBinary, PowIntegerIsExact) {
  Tensor p = pow(i64({3, -2, 5, 7, 10}), i64({4, 3, 0, 1, 15}));
  EXPECT_EQ(p.dtype(), DType::i64);
  EXPECT_THAT(p.to_vector<int64_t>(), ElementsAre(81, -8, 1, 7, 1000000000000000));
  // Negative tensor exponents: 0 unless the base is +-1 (as PyTorch).
  Tensor n = pow(i64({2, 1, -1, -1, 0}), i64({-1, -3, -1, -2, -1}));
  EXPECT_THAT(n.to_vector<int64_t>(), ElementsAre(0, 1, -1, 1, 0));
  // Overflow wraps like PyTorch's int32 arithmetic.
  Tensor w = pow(from_vector(std::vector<int32_t>{100000, 3}, {2}),
                 from_vector(std::vector<int32_t>{2, 2}, {2}));
  EXPECT_EQ(w.dtype(), DType::i32);
  EXPECT_THAT(w.to_vector<int32_t>(), ElementsAre(1410065408, 9));
}

TEST(ElementwiseBinary, MaximumMinimumPropagateNaN) {
  Tensor a = f32({1, kNaN, 5, kNaN});
  Tensor b = f32({3, 2, kNaN, kNaN});
  std::vector<float> mx = floats(maximum(a, b));
  std::vector<float> mn = floats(minimum(a, b));
  EXPECT_EQ(mx[0], 3);
  EXPECT_EQ(mn[0], 1);
  for (int i = 1; i < 4; ++i) {
    EXPECT_TRUE(std::isnan(mx[i])) << i;
    EXPECT_TRUE(std::isnan(mn[i])) << i;
  }
  Tensor mi = maximum(i64({-4, 9}), i64({2, 3}));
  EXPECT_EQ(mi.dtype(), DType::i64);
  EXPECT_THAT(mi.to_vector<int64_t>(), ElementsAre(2, 9));
  EXPECT_THAT(minimum(boolean({true, false}), boolean({true, true})).to_vector<bool>(),
              ElementsAre(true, false));
}

TEST(ElementwiseBinary, Comparisons) {
  Tensor a = f32({1, 2, 3, kNaN});
  Tensor b = f32({2, 2, 2, kNaN});
  Tensor e = eq(a, b);
  EXPECT_EQ(e.dtype(), DType::boolean);
  EXPECT_THAT(e.to_vector<bool>(), ElementsAre(false, true, false, false));
  EXPECT_THAT(ne(a, b).to_vector<bool>(), ElementsAre(true, false, true, true));
  EXPECT_THAT(lt(a, b).to_vector<bool>(), ElementsAre(true, false, false, false));
  EXPECT_THAT(le(a, b).to_vector<bool>(), ElementsAre(true, true, false, false));
  EXPECT_THAT(gt(a, b).to_vector<bool>(), ElementsAre(false, false, true, false));
  EXPECT_THAT(ge(a, b).to_vector<bool>(), ElementsAre(false, true, true, false));
}

TEST(ElementwiseBinary, ComparisonsWithScalars) {
  Tensor i = i64({2, -3, 3});
  EXPECT_THAT(eq(i, 2).to_vector<bool>(), ElementsAre(true, false, false));
  EXPECT_THAT(eq(i, 2.0).to_vector<bool>(), ElementsAre(true, false, false));
  // The int tensor is compared as f32: 3 < 2.5 is false.
  EXPECT_THAT(lt(i, 2.5).to_vector<bool>(), ElementsAre(true, true, false));
  EXPECT_THAT(ne(i, -3).to_vector<bool>(), ElementsAre(true, false, true));
  EXPECT_THAT(le(f32({1, 2}), 1).to_vector<bool>(), ElementsAre(true, false));
  EXPECT_THAT(gt(f32({1, 2}), 1.5f).to_vector<bool>(), ElementsAre(false, true));
  EXPECT_THAT(ge(f32({1, 2}), 2).to_vector<bool>(), ElementsAre(false, true));
  EXPECT_THAT(eq(boolean({true, false}), true).to_vector<bool>(), ElementsAre(true, false));
}

TEST(ElementwiseBinary, LogicalAndOrTreatNonzeroAsTrue) {
  Tensor a = i64({0, 3, 0, -1});
  Tensor b = f32({0, 0, 0.5f, 2});
  Tensor l = logical_and(a, b);
  EXPECT_EQ(l.dtype(), DType::boolean);
  EXPECT_THAT(l.to_vector<bool>(), ElementsAre(false, false, false, true));
  EXPECT_THAT(logical_or(a, b).to_vector<bool>(), ElementsAre(false, true, true, true));
  EXPECT_THAT(logical_or(boolean({false, false}), boolean({false, true})).to_vector<bool>(),
              ElementsAre(false, true));
}

TEST(ElementwiseBinary, Where) {
  Tensor c = boolean({true, false, true});
  Tensor w = where(c, f32({1, 2, 3}), f32({-1, -2, -3}));
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_THAT(floats(w), ElementsAre(1, -2, 3));
  // Values promote: i64 and f32 give f32.
  Tensor p = where(c, i64({1, 2, 3}), f32({0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(p.dtype(), DType::f32);
  EXPECT_THAT(floats(p), ElementsAre(1, 0.5, 3));
}

TEST(ElementwiseBinary, WhereScalarForms) {
  Tensor c = boolean({true, false});
  Tensor i = i64({2, -3});
  Tensor a = where(c, i, 2.5);  // float scalar raises i64 to f32
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_THAT(floats(a), ElementsAre(2, 2.5));
  Tensor b = where(c, 2.5, i);
  EXPECT_EQ(b.dtype(), DType::f32);
  EXPECT_THAT(floats(b), ElementsAre(2.5, -3));
  Tensor k = where(c, i, 7);  // an int scalar keeps i64
  EXPECT_EQ(k.dtype(), DType::i64);
  EXPECT_THAT(k.to_vector<int64_t>(), ElementsAre(2, 7));
  Tensor h = where(c, to(f32({1.5f, 0}), DType::f16), 2.5);  // weighs less: f16
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_THAT(floats(h), ElementsAre(1.5, 2.5));
  Tensor bi = where(c, boolean({true, true}), 7);  // bool and int: i64
  EXPECT_EQ(bi.dtype(), DType::i64);
  EXPECT_THAT(bi.to_vector<int64_t>(), ElementsAre(1, 7));
}

// ---- host scalars and operators ------------------------------------------

TEST(ElementwiseScalar, TensorFirst) {
  Tensor x = f32({1, 2, 4});
  EXPECT_THAT(floats(add(x, 0.5)), ElementsAre(1.5, 2.5, 4.5));
  EXPECT_THAT(floats(sub(x, 1)), ElementsAre(0, 1, 3));
  EXPECT_THAT(floats(mul(x, -2)), ElementsAre(-2, -4, -8));
  EXPECT_THAT(floats(div(x, 4)), ElementsAre(0.25, 0.5, 1));
  EXPECT_THAT(floats(pow(x, 2)), ElementsAre(1, 4, 16));
  EXPECT_THAT(floats(pow(x, -1)), ElementsAre(1, 0.5, 0.25));  // float tensor: fine
  EXPECT_THAT(floats(pow(x, 0.5)), Pointwise(FloatNear(1e-6), {1.0f, 1.4142135f, 2.0f}));
  Tensor i = pow(i64({2, -3}), 3);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(8, -27));
  EXPECT_THAT(pow(i64({2, 3}), 0).to_vector<int64_t>(), ElementsAre(1, 1));
  Tensor f = pow(i64({2, 3}), 2.5);  // float exponent: f32
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_THAT(floats(f), Pointwise(FloatNear(1e-5), {5.656854f, 15.588457f}));
}

TEST(ElementwiseScalar, ScalarFirstSubDivPow) {
  Tensor x = f32({1, 2, 4});
  EXPECT_THAT(floats(sub(1.0, x)), ElementsAre(0, -1, -3));
  EXPECT_THAT(floats(div(2.0, x)), ElementsAre(2, 1, 0.5));
  EXPECT_THAT(floats(pow(2.0, x)), ElementsAre(2, 4, 16));
  Tensor i = i64({2, -3});
  Tensor s = sub(10, i);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_THAT(s.to_vector<int64_t>(), ElementsAre(8, 13));
  Tensor d = div(2, i);  // true division: f32
  EXPECT_EQ(d.dtype(), DType::f32);
  EXPECT_THAT(floats(d), Pointwise(FloatNear(1e-6), {1.0f, -0.6666667f}));
  Tensor p = pow(2, i);  // int ** negative int tensor is 0
  EXPECT_EQ(p.dtype(), DType::i64);
  EXPECT_THAT(p.to_vector<int64_t>(), ElementsAre(4, 0));
  EXPECT_THAT(pow(-1, i64({-1, -2})).to_vector<int64_t>(), ElementsAre(-1, 1));
  Tensor pf = pow(2.0, i);
  EXPECT_EQ(pf.dtype(), DType::f32);
  EXPECT_THAT(floats(pf), ElementsAre(4, 0.125));
}

TEST(ElementwiseScalar, BoolScalars) {
  Tensor b = boolean({true, false});
  Tensor s = add(b, true);
  EXPECT_EQ(s.dtype(), DType::boolean);
  EXPECT_THAT(s.to_vector<bool>(), ElementsAre(true, true));
  Tensor i = mul(b, 3);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(3, 0));
  EXPECT_THAT(floats(mul(f32({1.5f, 2}), true)), ElementsAre(1.5, 2));
  Tensor p = pow(b, 2);  // bool ** int computes in i64
  EXPECT_EQ(p.dtype(), DType::i64);
  EXPECT_THAT(p.to_vector<int64_t>(), ElementsAre(1, 0));
}

TEST(ElementwiseScalar, Operators) {
  Tensor a = f32({1, 2, 3});
  Tensor b = f32({4, 5, 6});
  EXPECT_THAT(floats(a + b), ElementsAre(5, 7, 9));
  EXPECT_THAT(floats(a - b), ElementsAre(-3, -3, -3));
  EXPECT_THAT(floats(a * b), ElementsAre(4, 10, 18));
  EXPECT_THAT(floats(b / a), ElementsAre(4, 2.5, 2));
  EXPECT_THAT(floats(-a), ElementsAre(-1, -2, -3));
  EXPECT_THAT(floats(a + 1), ElementsAre(2, 3, 4));
  EXPECT_THAT(floats(a - 1), ElementsAre(0, 1, 2));
  EXPECT_THAT(floats(a * 0.5), ElementsAre(0.5, 1, 1.5));
  EXPECT_THAT(floats(a / 2), ElementsAre(0.5, 1, 1.5));
  EXPECT_THAT(floats(1 + a), ElementsAre(2, 3, 4));
  EXPECT_THAT(floats(1 - a), ElementsAre(0, -1, -2));  // scalar first
  EXPECT_THAT(floats(2 * a), ElementsAre(2, 4, 6));
  EXPECT_THAT(floats(6 / a), ElementsAre(6, 3, 2));  // scalar first
  Tensor i = i64({4, 6});
  EXPECT_EQ((i / 4).dtype(), DType::f32);
  EXPECT_THAT(floats(i / 4), ElementsAre(1, 1.5));
  EXPECT_THAT((-i).to_vector<int64_t>(), ElementsAre(-4, -6));
}

TEST(ElementwiseScalar, Bf16AndF16KeepTheirDtype) {
  Tensor h = to(f32({1, 2}), DType::f16);
  Tensor r = h + 2.0f / 2048;  // 1 + 2^-10 is an f16 value
  EXPECT_EQ(r.dtype(), DType::f16);
  EXPECT_THAT(floats(r), ElementsAre(1.0009765625f, 2));  // 2 + 2^-10 rounds to 2
  Tensor b = to(f32({1, 2, 3}), DType::bf16) / 3;
  EXPECT_EQ(b.dtype(), DType::bf16);
  EXPECT_THAT(floats(b), ElementsAre(0.333984375f, 0.66796875f, 1.0f));
}

}  // namespace
}  // namespace mstep
