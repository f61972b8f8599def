// Autograd for reductions, nn ops and losses: finite-difference checks of
// every formula (f64), the max/min tie rule, the nll_loss ignore rule, the
// dropout mask replay, and half-precision norms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "mstep/mstep.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using ::testing::DoubleNear;
using testing::gradcheck;
using ::testing::Pointwise;
using V = std::vector<Tensor>;
using D = std::vector<double>;

/// Distinct, well-separated f64 values (no ties within a few eps), so
/// max/min are differentiable where they are checked.
Tensor seq(const Shape& shape, double scale = 1.0, double phase = 0.0) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.37 * i + 0.5 + phase) + 0.01 * i;
  return from_vector(v, shape);
}

Tensor i64(std::vector<int64_t> v, Shape s) { return from_vector(v, s); }

std::vector<double> grad_of(const Tensor& x) {
  mark_step();
  return x.grad().to_vector<double>();
}

// ---- Reductions ----------------------------------------------------------

TEST(AutogradReduction, MeanOverDims) {
  Tensor x = seq({2, 3, 4});
  EXPECT_TRUE(gradcheck([](const V& v) { return mean(v[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return mean(v[0], {1}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return mean(v[0], {-1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return mean(v[0], {0, -1}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return mean(v[0], {2, 0}); }, {x}));
}

TEST(AutogradReduction, MaxMinOverDims) {
  Tensor x = seq({2, 3, 4});
  for (bool is_max : {true, false}) {
    auto f = [is_max](std::vector<int64_t> dims, bool keepdim) {
      return
          [=](const V& v) { return is_max ? max(v[0], dims, keepdim) : min(v[0], dims, keepdim); };
    };
    EXPECT_TRUE(gradcheck(f({}, false), {x}));
    EXPECT_TRUE(gradcheck(f({1}, true), {x}));
    EXPECT_TRUE(gradcheck(f({-1}, false), {x}));
    EXPECT_TRUE(gradcheck(f({0, 2}, false), {x}));
    EXPECT_TRUE(gradcheck(f({-3, -2}, true), {x}));
  }
}

TEST(AutogradReduction, MaxSplitsTheGradientAmongTies) {
  // amax semantics: each tied maximum gets an equal share.
  Tensor x = from_vector(std::vector<double>{1, 3, 3, 0, 2, 2, 2, 2, 5, -1, 4, 5}, {3, 4})
                 .requires_grad_();
  sum(max(x, {1}) * from_vector(std::vector<double>{1, 2, 3}, {3})).backward();
  EXPECT_THAT(grad_of(x),
              Pointwise(DoubleNear(1e-15), D{0, 0.5, 0.5, 0, 0.5, 0.5, 0.5, 0.5, 1.5, 0, 0, 1.5}));
}

TEST(AutogradReduction, MinOverAllDimsSplitsAmongTies) {
  Tensor x = from_vector(std::vector<double>{-1, 2, -1, -1, 0, 3}, {2, 3}).requires_grad_();
  min(x).backward();
  const double t = 1.0 / 3;
  EXPECT_THAT(grad_of(x), Pointwise(DoubleNear(1e-15), D{t, 0, t, t, 0, 0}));
}

TEST(AutogradReduction, MaxTiesInF32KeepDim) {
  Tensor x = from_vector(std::vector<float>{7, 7, 1, 2}, {2, 2}).requires_grad_();
  Tensor y = max(x, {0}, /*keepdim=*/true);  // [[7, 7]]
  y.backward(from_vector(std::vector<float>{4, 6}, {1, 2}));
  mark_step();
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 6, 0, 0}));
}

TEST(AutogradReduction, Logsumexp) {
  Tensor x = seq({2, 3, 4}, 2.0);
  EXPECT_TRUE(gradcheck([](const V& v) { return logsumexp(v[0], {1}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return logsumexp(v[0], {-1}, true); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return logsumexp(v[0], {0, 2}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return logsumexp(v[0], {0, 1, 2}); }, {x}));
}

TEST(AutogradReduction, LogsumexpOfLargeValuesIsStable) {
  // softmax weights, not exp of 1000 (exact up to the rounding of the result).
  Tensor x = from_vector(std::vector<double>{1000, 1000}, {2}).requires_grad_();
  logsumexp(x, {0}).backward();
  EXPECT_THAT(grad_of(x), Pointwise(DoubleNear(1e-12), D{0.5, 0.5}));
}

TEST(AutogradReduction, VarWithEachCorrection) {
  Tensor x = seq({3, 4, 2});
  for (int64_t corr : {0, 1, 2}) {
    EXPECT_TRUE(gradcheck([=](const V& v) { return var(v[0], {1}, corr); }, {x})) << corr;
    EXPECT_TRUE(gradcheck([=](const V& v) { return var(v[0], {}, corr); }, {x})) << corr;
    EXPECT_TRUE(gradcheck([=](const V& v) { return var(v[0], {0, -1}, corr, true); }, {x})) << corr;
  }
}

TEST(AutogradReduction, ComposedReductions) {
  Tensor x = seq({3, 5});
  EXPECT_TRUE(gradcheck(
      [](const V& v) { return max(v[0], {1}) - mean(v[0], {1}) + sum(v[0] * v[0], {1}); }, {x}));
}

// ---- Softmax family ------------------------------------------------------

TEST(AutogradNN, SoftmaxAndLogSoftmax) {
  Tensor x = seq({2, 3, 4}, 2.0);
  for (int64_t dim : {0, 1, 2, -1, -2}) {
    EXPECT_TRUE(gradcheck([=](const V& v) { return softmax(v[0], dim); }, {x})) << dim;
    EXPECT_TRUE(gradcheck([=](const V& v) { return log_softmax(v[0], dim); }, {x})) << dim;
  }
  Tensor row = seq({5});
  EXPECT_TRUE(gradcheck([](const V& v) { return softmax(v[0], 0); }, {row}));
  EXPECT_TRUE(gradcheck([](const V& v) { return log_softmax(v[0], -1); }, {row}));
}

TEST(AutogradNN, LogSoftmaxOfLargeLogitsIsFinite) {
  Tensor x = from_vector(std::vector<double>{1000, 0, -1000}, {3}).requires_grad_();
  sum(log_softmax(x, 0)).backward();
  EXPECT_THAT(grad_of(x), Pointwise(DoubleNear(1e-12), D{-2, 1, 1}));
}

// ---- Norms ---------------------------------------------------------------

TEST(AutogradNN, LayerNormWithAndWithoutAffine) {
  Tensor x = seq({3, 5}, 2.0);
  Tensor w = seq({5}, 0.5, 1.0) + 1.0;
  Tensor b = seq({5}, 0.3, 2.0);
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {5}, v[1], v[2]); }, {x, w, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {5}, v[1]); }, {x, w}));
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {5}, {}, v[1]); }, {x, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {5}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {5}, {}, {}, 0.5); }, {x}));
}

TEST(AutogradNN, LayerNormOverSeveralDims) {
  Tensor x = seq({2, 3, 4}, 1.5);
  Tensor w = seq({3, 4}, 0.5, 1.0) + 1.0;
  Tensor b = seq({3, 4}, 0.3, 2.0);
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        return layer_norm(v[0], {3, 4}, v[1], v[2]);
      },
      {x, w, b}));
  EXPECT_TRUE(gradcheck([](const V& v) { return layer_norm(v[0], {3, 4}); }, {x}));
  // Every dim normalized: no batch dims to sum the affine grads over.
  Tensor w3 = seq({2, 3, 4}, 0.5, 3.0);
  EXPECT_TRUE(gradcheck(
      [](const V& v) {
        return layer_norm(v[0], {2, 3, 4}, v[1], v[1]);
      },
      {x, w3}));
}

TEST(AutogradNN, LayerNormGradientsForParametersOnly) {
  // x needs no gradient: only weight and bias get one.
  Tensor x = seq({4, 3});
  Tensor w = seq({3}, 1.0, 1.0).requires_grad_();
  Tensor b = seq({3}, 1.0, 2.0).requires_grad_();
  sum(layer_norm(x, {3}, w, b)).backward();
  mark_step();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_THAT(b.grad().to_vector<double>(), Pointwise(DoubleNear(1e-12), D{4, 4, 4}));
  // sum over rows of xhat: each row of xhat sums to 0, so their total does.
  std::vector<double> gw = w.grad().to_vector<double>();
  EXPECT_NEAR(gw[0] + gw[1] + gw[2], 0.0, 1e-12);
}

TEST(AutogradNN, RmsNorm) {
  Tensor x = seq({3, 5}, 2.0);
  Tensor w = seq({5}, 0.5, 1.0) + 1.0;
  EXPECT_TRUE(gradcheck([](const V& v) { return rms_norm(v[0], {5}, v[1]); }, {x, w}));
  EXPECT_TRUE(gradcheck([](const V& v) { return rms_norm(v[0], {5}); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return rms_norm(v[0], {5}, {}, 0.25); }, {x}));
  Tensor x3 = seq({2, 3, 4}, 1.5);
  Tensor w2 = seq({3, 4}, 0.5, 1.0) + 1.0;
  EXPECT_TRUE(gradcheck([](const V& v) { return rms_norm(v[0], {3, 4}, v[1], 1e-3); }, {x3, w2}));
  EXPECT_TRUE(gradcheck([](const V& v) { return rms_norm(v[0], {2, 3, 4}); }, {x3}));
}

/// f64 reference gradients of a norm, for the half-precision checks.
std::vector<std::vector<double>> norm_grads(bool layer, DType dtype) {
  Tensor x = to(seq({4, 6}, 2.0), dtype).requires_grad_();
  Tensor w = to(seq({6}, 0.5, 1.0) + 1.0, dtype).requires_grad_();
  Tensor b = to(seq({6}, 0.3, 2.0), dtype).requires_grad_();
  Tensor y = layer ? layer_norm(x, {6}, w, b) : rms_norm(x, {6}, w);
  sum(y * to(seq({4, 6}, 1.0, 3.0), dtype)).backward();
  mark_step();
  EXPECT_EQ(x.grad().dtype(), dtype);
  EXPECT_EQ(w.grad().dtype(), dtype);
  std::vector<std::vector<double>> out = {x.grad().to_vector<double>(),
                                          w.grad().to_vector<double>()};
  if (layer) out.push_back(b.grad().to_vector<double>());
  return out;
}

TEST(AutogradNN, NormsInHalfPrecisionKeepTheDtype) {
  for (bool layer : {true, false}) {
    auto want = norm_grads(layer, DType::f64);
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      auto got = norm_grads(layer, dt);
      const double tol = dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 2e-2 : 1e-1;
      for (size_t k = 0; k < want.size(); ++k)
        EXPECT_THAT(got[k], Pointwise(DoubleNear(tol), want[k]))
            << (layer ? "layer_norm" : "rms_norm") << " " << dtype_name(dt) << " grad " << k;
    }
  }
}

// ---- Dropout ---------------------------------------------------------------

TEST(AutogradNN, DropoutGradientIsTheForwardMask) {
  manual_seed(7);
  const double p = 0.3;
  Tensor x = ones({64}, DType::f32).requires_grad_();
  Tensor y = dropout(x, p);
  sum(y).backward();
  mark_step();
  // With x = 1, y = mask / (1 - p): exactly the gradient of sum(y).
  std::vector<float> forward = y.to_vector<float>();
  std::vector<float> grad = x.grad().to_vector<float>();
  EXPECT_EQ(grad, forward);
  int kept = 0;
  for (float g : grad) {
    if (g != 0) {
      ++kept;
      EXPECT_EQ(g, static_cast<float>(1.0 / (1.0 - p)));
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 64);
}

TEST(AutogradNN, DropoutBackwardAfterTheForwardRanIsTheSameMask) {
  // The forward is materialized (and the RNG advanced) before backward:
  // the gradient still replays the forward's state.
  manual_seed(11);
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {8}).requires_grad_();
  Tensor y = dropout(x, 0.5);
  mark_step();
  std::vector<double> forward = y.to_vector<double>();
  (void)rand({16});  // another draw in between changes nothing
  y.backward(from_vector(std::vector<double>(8, 2.0), {8}));
  std::vector<double> grad = grad_of(x);
  for (size_t i = 0; i < grad.size(); ++i)
    EXPECT_EQ(grad[i], forward[i] == 0 ? 0.0 : 4.0) << i;  // 2 * 1 / (1 - 0.5)
}

TEST(AutogradNN, DropoutGradientIsReproducible) {
  auto run = [] {
    manual_seed(42);
    Tensor x = ones({4, 8}, DType::f64).requires_grad_();
    sum(dropout(x * 3.0, 0.6) * 2.0).backward();
    return grad_of(x);
  };
  std::vector<double> first = run();
  EXPECT_EQ(first, run());
  for (double g : first) EXPECT_TRUE(g == 0 || g == 6.0 / 0.4) << g;
}

TEST(AutogradNN, DropoutInEvalOrPZeroPassesTheGradient) {
  Tensor x = seq({2, 3});
  EXPECT_TRUE(gradcheck([](const V& v) { return dropout(v[0], 0.5, false); }, {x}));
  EXPECT_TRUE(gradcheck([](const V& v) { return dropout(v[0], 0.0); }, {x}));
}

// ---- Losses ----------------------------------------------------------------

TEST(AutogradLoss, NllLossEveryReductionAndIgnoreIndex) {
  Tensor lp = seq({5, 4});
  Tensor target = i64({0, 3, 1, 3, 2}, {5});
  Tensor ignored = i64({0, -100, 1, 3, -100}, {5});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    for (const Tensor& t : {target, ignored})
      EXPECT_TRUE(gradcheck([&](const V& v) { return nll_loss(v[0], v[1], r); }, {lp, t}));
    EXPECT_TRUE(gradcheck([&](const V& v) { return nll_loss(v[0], v[1], r, 3); }, {lp, target}));
  }
}

TEST(AutogradLoss, NllLossSingleSample) {
  Tensor lp = seq({4});
  Tensor t = from_vector(std::vector<int64_t>{2}, {});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    EXPECT_TRUE(gradcheck([&](const V& v) { return nll_loss(v[0], v[1], r); }, {lp, t}));
}

TEST(AutogradLoss, NllLossAllIgnoredGivesZeroGradient) {
  // The mean is 0/0 = NaN (PyTorch), yet the gradient is zeros, not NaN.
  Tensor lp = seq({2, 3}).requires_grad_();
  Tensor loss = nll_loss(lp, i64({-100, -100}, {2}));
  loss.backward();
  mark_step();
  EXPECT_TRUE(std::isnan(loss.item()));
  EXPECT_EQ(lp.grad().to_vector<double>(), std::vector<double>(6, 0.0));
}

TEST(AutogradLoss, CrossEntropyEveryReductionIgnoreAndSmoothing) {
  Tensor logits = seq({5, 4}, 2.0);
  Tensor target = i64({0, 3, 1, 3, 2}, {5});
  Tensor ignored = i64({0, -100, 1, 3, -100}, {5});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    for (double ls : {0.0, 0.1, 1.0}) {
      for (const Tensor& t : {target, ignored})
        EXPECT_TRUE(gradcheck([&](const V& v) { return cross_entropy(v[0], v[1], r, -100, ls); },
                              {logits, t}))
            << static_cast<int>(r) << " " << ls;
      EXPECT_TRUE(gradcheck([&](const V& v) { return cross_entropy(v[0], v[1], r, 1, ls); },
                            {logits, target}));
    }
  }
  Tensor one = seq({4});
  Tensor t0 = from_vector(std::vector<int64_t>{3}, {});
  EXPECT_TRUE(gradcheck([](const V& v) { return cross_entropy(v[0], v[1]); }, {one, t0}));
  EXPECT_TRUE(gradcheck(
      [](const V& v) { return cross_entropy(v[0], v[1], Reduction::sum, -100, 0.2); }, {one, t0}));
}

TEST(AutogradLoss, CrossEntropyGradientIsSoftmaxMinusOneHot) {
  Tensor logits = from_vector(std::vector<double>{0, 0, 0, 0}, {2, 2}).requires_grad_();
  cross_entropy(logits, i64({1, 0}, {2})).backward();
  EXPECT_THAT(grad_of(logits), Pointwise(DoubleNear(1e-15), D{0.25, -0.25, -0.25, 0.25}));
}

TEST(AutogradLoss, MseLoss) {
  Tensor x = seq({3, 4});
  Tensor y = seq({3, 4}, 1.0, 2.0);
  Tensor row = seq({4}, 1.0, 3.0);
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum}) {
    EXPECT_TRUE(gradcheck([=](const V& v) { return mse_loss(v[0], v[1], r); }, {x, y}));
    EXPECT_TRUE(gradcheck([=](const V& v) { return mse_loss(v[0], v[1], r); }, {x, row}));
  }
}

TEST(AutogradLoss, BinaryCrossEntropyWithLogits) {
  Tensor z = seq({3, 4}, 4.0);
  std::vector<double> p(12);
  for (size_t i = 0; i < p.size(); ++i) p[i] = (i % 5) / 4.0;
  Tensor target = from_vector(p, {3, 4});
  for (Reduction r : {Reduction::none, Reduction::mean, Reduction::sum})
    EXPECT_TRUE(gradcheck(
        [=](const V& v) { return binary_cross_entropy_with_logits(v[0], v[1], r); }, {z, target}));
}

TEST(AutogradLoss, TrainingStepThroughLayerNormAndCrossEntropy) {
  // A tiny classifier: every formula of this file in one backward.
  Tensor x = seq({4, 6}, 1.5);
  Tensor w = seq({6}, 0.5, 1.0) + 1.0;
  Tensor b = seq({6}, 0.3, 2.0);
  Tensor t = i64({0, 5, 2, -100}, {4});
  EXPECT_TRUE(gradcheck(
      [&](const V& v) {
        Tensor h = layer_norm(v[0], {6}, v[1], v[2]);
        Tensor l = cross_entropy(h, t, Reduction::mean, -100, 0.1);
        return l + mean(logsumexp(h, {1})) + var(max(h, {1}), {0});
      },
      {x, w, b}));
}

}  // namespace
}  // namespace mstep
