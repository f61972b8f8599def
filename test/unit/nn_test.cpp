// Unit tests for softmax, log_softmax, layer_norm, rms_norm and dropout:
// hand-checked values, numerical stability, edge shapes, dtypes, the
// dropout RNG protocol (statistics, scaling, determinism, fresh masks per
// call and per step) and every error path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using testing::error_of;
using testing::f32;
using ::testing::HasSubstr;
using ::testing::Pointwise;

std::vector<double> softmax_ref(std::vector<double> v) {
  double m = v[0], s = 0;
  for (double x : v) m = std::max(m, x);
  for (double& x : v) s += (x = std::exp(x - m));
  for (double& x : v) x /= s;
  return v;
}

TEST(NN, SoftmaxLastDim) {
  Tensor x = f32({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor y = softmax(x, -1);
  EXPECT_TRUE(y.is_pending());
  EXPECT_EQ(y.type(), x.type());
  std::vector<double> want = softmax_ref({1, 2, 3});
  want.insert(want.end(), {1.0 / 3, 1.0 / 3, 1.0 / 3});
  EXPECT_THAT(y.to_vector<double>(), Pointwise(DoubleNear(1e-7), want));
}

TEST(NN, SoftmaxDimZeroAndMiddleDim) {
  Tensor x = f32({0, 1, 2, 3}, {2, 2});
  std::vector<double> p = softmax_ref({0, 2});  // column 0; column 1 is {1, 3}
  EXPECT_THAT(softmax(x, 0).to_vector<double>(),
              Pointwise(DoubleNear(1e-7), {p[0], p[0], p[1], p[1]}));
  // [1, 2, 2] over the middle dim: each pair (x[0, 0, k], x[0, 1, k]).
  Tensor z = f32({0, 5, 1, 5}, {1, 2, 2});
  std::vector<double> q = softmax_ref({0, 1});
  EXPECT_THAT(softmax(z, 1).to_vector<double>(),
              Pointwise(DoubleNear(1e-7), {q[0], 0.5, q[1], 0.5}));
}

TEST(NN, SoftmaxIsStableForLargeInputs) {
  Tensor x = f32({1000, 1001, -1000, -1001}, {2, 2});
  std::vector<double> p = softmax_ref({0, 1});
  EXPECT_THAT(softmax(x, 1).to_vector<double>(),
              Pointwise(DoubleNear(1e-6), {p[0], p[1], p[1], p[0]}));
  std::vector<float> l = log_softmax(x, 1).to_vector<float>();
  EXPECT_NEAR(l[0], std::log(p[0]), 1e-5);
  EXPECT_NEAR(l[1], std::log(p[1]), 1e-5);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(softmax(f32({0, -inf}, {2}), 0).to_vector<float>(), ElementsAre(1, 0));
  EXPECT_THAT(log_softmax(f32({0, -inf}, {2}), 0).to_vector<float>(), ElementsAre(0, -inf));
}

TEST(NN, LogSoftmaxValues) {
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_THAT(log_softmax(x, 0).to_vector<double>(),
              Pointwise(DoubleNear(1e-12), {1 - lse, 2 - lse, 3 - lse}));
}

TEST(NN, SoftmaxEdgeShapes) {
  EXPECT_THAT(softmax(f32({4, -2, 7}, {3, 1}), 1).to_vector<float>(), ElementsAre(1, 1, 1));
  EXPECT_EQ(softmax(f32({3}, {}), 0).item(), 1);
  EXPECT_EQ(log_softmax(f32({3}, {}), -1).item(), 0);
  Tensor e = softmax(zeros({0, 3}), 1);
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_TRUE(e.to_vector<float>().empty());
}

TEST(NN, SoftmaxBf16AndBroadcastInput) {
  Tensor x = from_vector(std::vector<float>{0, 0, 0, 0}, {4}, DType::bf16);
  Tensor y = softmax(x, 0);
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0.25, 0.25, 0.25, 0.25));
  // [2, 1] + [1, 3] broadcast: rows {0, 1, 2} and {10, 11, 12}.
  Tensor b = f32({0, 10}, {2, 1}) + f32({0, 1, 2}, {1, 3});
  std::vector<double> p = softmax_ref({0, 1, 2});
  EXPECT_THAT(softmax(b, 1).to_vector<double>(),
              Pointwise(DoubleNear(1e-7), {p[0], p[1], p[2], p[0], p[1], p[2]}));
}

TEST(NN, LayerNormPlain) {
  Tensor x = f32({1, 2, 3, 2, 4, 6}, {2, 3});
  // Row 0: mean 2, biased var 2/3; row 1: mean 4, var 8/3.
  const double r0 = 1 / std::sqrt(2.0 / 3 + 1e-5), r1 = 1 / std::sqrt(8.0 / 3 + 1e-5);
  EXPECT_THAT(layer_norm(x, {3}).to_vector<double>(),
              Pointwise(DoubleNear(1e-6), {-r0, 0.0, r0, -2 * r1, 0.0, 2 * r1}));
}

TEST(NN, LayerNormAffineAndTwoDims) {
  Tensor x = f32({1, 2, 3, 2, 4, 6}, {2, 3});
  Tensor w = f32({1, 2, 3}, {3});
  Tensor b = f32({10, 20, 30}, {3});
  const double r0 = 1 / std::sqrt(2.0 / 3), r1 = 1 / std::sqrt(8.0 / 3);
  EXPECT_THAT(layer_norm(x, {3}, w, b, 0.0).to_vector<double>(),
              Pointwise(DoubleNear(1e-5), {10 - r0, 20.0, 30 + 3 * r0,  //
                                           10 - 2 * r1, 20.0, 30 + 6 * r1}));
  // Bias without weight.
  EXPECT_THAT(layer_norm(x, {3}, Tensor(), b, 0.0).to_vector<double>(),
              Pointwise(DoubleNear(1e-5), {10 - r0, 20.0, 30 + r0,  //
                                           10 - 2 * r1, 20.0, 30 + 2 * r1}));
  // Over both dims: mean 3, biased var (4+1+0+1+1+9)/6 = 8/3.
  const double r = 1 / std::sqrt(8.0 / 3);
  EXPECT_THAT(layer_norm(x, {2, 3}, {}, {}, 0.0).to_vector<double>(),
              Pointwise(DoubleNear(1e-5), {-2 * r, -r, 0.0, -r, r, 3 * r}));
}

TEST(NN, LayerNormConstantRowIsZero) {
  Tensor x = from_vector(std::vector<float>{5, 5, 5, 5}, {1, 4}, DType::bf16);
  Tensor y = layer_norm(x, {4});
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0, 0, 0, 0));
}

TEST(NN, RmsNorm) {
  Tensor x = f32({3, 4, 0, 0}, {2, 2});
  const double rms = std::sqrt(12.5);
  Tensor w = f32({1, 2}, {2});
  // An all-zero row is 0/0 without eps (as the formula), 0 with it.
  std::vector<double> y = rms_norm(x, {2}, w, 0.0).to_vector<double>();
  EXPECT_NEAR(y[0], 3 / rms, 1e-6);
  EXPECT_NEAR(y[1], 8 / rms, 1e-6);
  EXPECT_TRUE(std::isnan(y[2]));
  EXPECT_THAT(rms_norm(x, {2}, w).to_vector<double>(),
              Pointwise(DoubleNear(1e-6), {3 / rms, 8 / rms, 0.0, 0.0}));
  // Over both dims: mean of squares 25/4.
  EXPECT_THAT(rms_norm(x, {2, 2}, {}, 0.0).to_vector<double>(),
              Pointwise(DoubleNear(1e-6), {1.2, 1.6, 0.0, 0.0}));
}

TEST(NN, RmsNormDefaultEpsIsMachineEpsilon) {
  // mean(x^2) is comparable to eps, so the default is visible in the result.
  const double f32_eps = 1.1920928955078125e-07, f64_eps = 2.220446049250313e-16;
  EXPECT_NEAR(rms_norm(f32({1e-4f}, {1}), {1}).item(), 1e-4 / std::sqrt(1e-8 + f32_eps), 1e-5);
  Tensor d = from_vector(std::vector<double>{1e-8}, {1});
  EXPECT_NEAR(rms_norm(d, {1}).item(), 1e-8 / std::sqrt(1e-16 + f64_eps), 1e-12);
}

TEST(NN, DropoutIdentityWhenEvalOrPZero) {
  Tensor x = f32({1, 2, 3}, {3});
  EXPECT_EQ(dropout(x, 0.5, /*train=*/false).impl(), x.impl());  // no node
  EXPECT_EQ(dropout(x, 0.0).impl(), x.impl());
  Tensor i = from_vector(std::vector<int64_t>{1, 2}, {2});
  EXPECT_EQ(dropout(i, 0.5, false).impl(), i.impl());
}

TEST(NN, DropoutPOneGivesZeros) {
  Tensor y = dropout(f32({1, -2, 3}, {3}), 1.0);
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0, 0, 0));
}

std::vector<float> run_dropout(const Tensor& x, double p) {
  Tensor y = dropout(x, p);
  mark_step();
  return y.to_vector<float>();
}

TEST(NN, DropoutKeepsAboutOneMinusPAndScalesExactly) {
  manual_seed(123);
  const int64_t n = 10000;
  for (double p : {0.5, 0.75, 0.1}) {
    Tensor x = full({n}, 3.0);
    std::vector<float> y = run_dropout(x, p);
    const float kept_value = static_cast<float>(3.0 / (1.0 - p));
    int64_t kept = 0;
    for (float v : y) {
      if (v != 0) {
        ++kept;
        EXPECT_EQ(v, kept_value);
      }
    }
    // Binomial(n, 1-p): 5 standard deviations is at most 0.025 here.
    EXPECT_NEAR(static_cast<double>(kept) / n, 1 - p, 0.025) << "p = " << p;
  }
  // 0.5 and 0.75 scale by 2 and 4: the kept values are exactly x * scale.
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.001f * static_cast<float>(i) - 3;
  std::vector<float> y = run_dropout(from_vector(v, {n}), 0.75);
  for (int64_t i = 0; i < n; ++i)
    if (y[i] != 0) ASSERT_EQ(y[i], v[i] * 4) << i;
}

TEST(NN, DropoutIsDeterministicAfterManualSeed) {
  Tensor x = ones({1000});
  manual_seed(42);
  std::vector<float> a = run_dropout(x, 0.3);
  manual_seed(42);
  std::vector<float> b = run_dropout(x, 0.3);
  EXPECT_EQ(a, b);
  manual_seed(43);
  EXPECT_NE(run_dropout(x, 0.3), a);
}

TEST(NN, DropoutDrawsFreshMasksPerCallAndPerStep) {
  manual_seed(7);
  Tensor x = ones({1000});
  Tensor a = dropout(x, 0.5);
  Tensor b = dropout(x, 0.5);  // same step, next offset
  mark_step();
  std::vector<float> va = a.to_vector<float>(), vb = b.to_vector<float>();
  EXPECT_NE(va, vb);
  // The same graph on the next step reads an advanced RNG offset.
  Tensor c = dropout(x, 0.5);
  mark_step();
  std::vector<float> vc = c.to_vector<float>();
  EXPECT_NE(vc, va);
  EXPECT_NE(vc, vb);
}

TEST(NN, DropoutBf16) {
  manual_seed(1);
  Tensor y = dropout(full({64}, 1.5, DType::bf16), 0.5);
  EXPECT_EQ(y.dtype(), DType::bf16);
  for (float v : y.to_vector<float>()) EXPECT_TRUE(v == 0 || v == 3) << v;
}

TEST(NNErrors, SoftmaxOfIntegers) {
  std::string msg = error_of([] { softmax(from_vector(std::vector<int64_t>{1, 2}, {2}), 0); });
  EXPECT_THAT(msg, HasSubstr("mstep::softmax: expects a floating-point input"));
  EXPECT_THAT(msg, HasSubstr("i64[2]"));
}

TEST(NNErrors, LogSoftmaxDimOutOfRange) {
  std::string msg = error_of([] { log_softmax(zeros({2, 3}), 2); });
  EXPECT_THAT(msg, HasSubstr("mstep::log_softmax: dim 2 is out of range [-2, 1]"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3]"));
}

TEST(NNErrors, LayerNormEmptyNormalizedShape) {
  std::string msg = error_of([] { layer_norm(zeros({2, 3}), {}); });
  EXPECT_THAT(msg, HasSubstr("mstep::layer_norm: normalized_shape must name at least one dim"));
}

TEST(NNErrors, LayerNormShapeMismatch) {
  std::string msg = error_of([] { layer_norm(zeros({2, 3}), {2}); });
  EXPECT_THAT(msg, HasSubstr("normalized_shape must equal the trailing dims of the input"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3] with normalized_shape [2]"));
  EXPECT_THAT(error_of([] { rms_norm(zeros({3}), {1, 3}); }),
              HasSubstr("mstep::rms_norm: normalized_shape must equal the trailing dims"));
}

TEST(NNErrors, LayerNormWeightShape) {
  std::string msg = error_of([] { layer_norm(zeros({2, 3}), {3}, zeros({2})); });
  EXPECT_THAT(msg, HasSubstr("weight must have shape normalized_shape [3]"));
  EXPECT_THAT(msg, HasSubstr("weight f32[2], input f32[2, 3]"));
}

TEST(NNErrors, LayerNormBiasDtype) {
  std::string msg = error_of([] { layer_norm(zeros({2, 3}), {3}, {}, zeros({3}, DType::f64)); });
  EXPECT_THAT(msg, HasSubstr("mstep::layer_norm: bias must have the input's dtype"));
  EXPECT_THAT(msg, HasSubstr("bias f64[3], input f32[2, 3]"));
}

TEST(NNErrors, LayerNormOfIntegersAndNegativeEps) {
  EXPECT_THAT(error_of([] { layer_norm(zeros({3}, DType::i32), {3}); }),
              HasSubstr("mstep::layer_norm: expects a floating-point input"));
  EXPECT_THAT(error_of([] { layer_norm(zeros({3}), {3}, {}, {}, -1.0); }),
              HasSubstr("eps must be finite and >= 0, got -1"));
}

TEST(NNErrors, RmsNormWeightShapeAndEps) {
  EXPECT_THAT(error_of([] { rms_norm(zeros({2, 3}), {3}, zeros({3, 1})); }),
              HasSubstr("mstep::rms_norm: weight must have shape normalized_shape [3]"));
  EXPECT_THAT(error_of([] { rms_norm(zeros({3}), {3}, {}, std::nan("")); }),
              HasSubstr("mstep::rms_norm: eps must be finite and >= 0"));
}

TEST(NNErrors, DropoutProbabilityOutOfRange) {
  std::string msg = error_of([] { dropout(zeros({3}), 1.5); });
  EXPECT_THAT(msg, HasSubstr("mstep::dropout: probability p must be in [0, 1], got 1.5"));
  EXPECT_THAT(msg, HasSubstr("f32[3]"));
  // Checked even when dropout would be the identity (as PyTorch).
  EXPECT_THAT(error_of([] { dropout(zeros({3}), -0.1, false); }),
              HasSubstr("probability p must be in [0, 1]"));
  EXPECT_THAT(error_of([] { dropout(zeros({3}), std::nan("")); }),
              HasSubstr("probability p must be in [0, 1]"));
}

TEST(NNErrors, DropoutOfIntegersInTraining) {
  std::string msg = error_of([] { dropout(zeros({3}, DType::i64), 0.5); });
  EXPECT_THAT(msg, HasSubstr("mstep::dropout: expects a floating-point input"));
}

}  // namespace
}  // namespace mstep
