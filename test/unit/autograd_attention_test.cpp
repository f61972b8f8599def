// Autograd of scaled_dot_product_attention / fused_sdpa: finite-difference
// checks in f64 (plain, scale, causal, bool and float masks with the
// mask's own gradient, valid_seq_len padding, rank 3 and 4), zero (never
// NaN) gradients for padded and fully masked rows, exact dropout backward
// checked against a hand computation from the returned dropout mask, and
// the limitation on the extra outputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using testing::gradcheck;
using ::testing::HasSubstr;
using V = std::vector<Tensor>;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Deterministic pseudo-random f64 values in [-1, 1).
Tensor filled(Shape s, int seed) {
  std::vector<double> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.731 * i + 1.37 * seed);
  return from_vector(v, s);
}

/// f(q, k, v[, mask]) with `o`'s options; the mask, when given, is the
/// fourth input (so gradcheck differentiates a float mask).
testing::OpFn attention(SdpaOptions o) {
  return [o](const V& in) {
    SdpaOptions opts = o;
    if (in.size() > 3) opts.attn_mask = in[3];
    return scaled_dot_product_attention(in[0], in[1], in[2], opts);
  };
}

TEST(AttentionGradcheck, PlainRank3) {
  EXPECT_TRUE(
      gradcheck(attention({}), {filled({2, 3, 4}, 1), filled({2, 5, 4}, 2), filled({2, 5, 3}, 3)}));
}

TEST(AttentionGradcheck, ExplicitScaleRank4) {
  SdpaOptions o;
  o.scale = 0.7;
  EXPECT_TRUE(gradcheck(
      attention(o), {filled({2, 2, 3, 4}, 4), filled({2, 2, 4, 4}, 5), filled({2, 2, 4, 2}, 6)}));
}

TEST(AttentionGradcheck, Rank2) {
  EXPECT_TRUE(gradcheck(attention({}), {filled({3, 2}, 7), filled({4, 2}, 8), filled({4, 3}, 9)}));
}

TEST(AttentionGradcheck, CausalSquareAndNonSquare) {
  SdpaOptions o;
  o.is_causal = true;
  EXPECT_TRUE(gradcheck(attention(o),
                        {filled({2, 4, 3}, 10), filled({2, 4, 3}, 11), filled({2, 4, 3}, 12)}));
  EXPECT_TRUE(gradcheck(attention(o), {filled({1, 2, 3, 3}, 13), filled({1, 2, 5, 3}, 14),
                                       filled({1, 2, 5, 2}, 15)}));  // L < S
  EXPECT_TRUE(gradcheck(attention(o), {filled({2, 5, 3}, 16), filled({2, 3, 3}, 17),
                                       filled({2, 3, 2}, 18)}));  // L > S
}

TEST(AttentionGradcheck, BoolMaskWithAFullyMaskedRow) {
  // Row 2 attends to nothing: its output is zero, so are its gradients.
  Tensor mask = from_vector(std::vector<bool>{true, false, true, true,   //
                                              false, true, false, true,  //
                                              false, false, false, false},
                            {3, 4});
  SdpaOptions o;
  o.attn_mask = mask;
  V in = {filled({2, 3, 4}, 19), filled({2, 4, 4}, 20), filled({2, 4, 3}, 21)};
  EXPECT_TRUE(gradcheck(attention(o), in));

  for (Tensor& t : in) t.requires_grad_();
  Tensor out = scaled_dot_product_attention(in[0], in[1], in[2], o);
  sum(out * out).backward();
  mark_step();
  auto dq = in[0].grad().to_vector<double>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(dq[(b * 3 + 2) * 4 + e], 0.0);
  for (const Tensor& t : in)
    for (double x : t.grad().to_vector<double>()) ASSERT_TRUE(std::isfinite(x));
}

TEST(AttentionGradcheck, FloatMaskGetsItsGradientSummedOverBroadcastDims) {
  V qkv = {filled({2, 2, 3, 4}, 22), filled({2, 2, 5, 4}, 23), filled({2, 2, 5, 3}, 24)};
  for (Shape mask_shape : {Shape{2, 2, 3, 5}, Shape{3, 5}, Shape{2, 1, 1, 5}, Shape{1, 5}}) {
    V in = qkv;
    in.push_back(filled(mask_shape, 25));
    EXPECT_TRUE(gradcheck(attention({}), in)) << mask_shape.to_string();
  }
}

TEST(AttentionGradcheck, FloatMaskNotRequiringGradGetsNone) {
  Tensor q = filled({2, 3, 4}, 26).requires_grad_();
  Tensor k = filled({2, 3, 4}, 27), v = filled({2, 3, 4}, 28), mask = filled({3, 3}, 29);
  SdpaOptions o;
  o.attn_mask = mask;
  sum(scaled_dot_product_attention(q, k, v, o)).backward();
  mark_step();
  EXPECT_TRUE(q.grad().defined());
  EXPECT_FALSE(mask.grad().defined());
  EXPECT_FALSE(k.requires_grad());
}

TEST(AttentionGradcheck, FloatMaskWithMinusInfinity) {
  // -inf keys get probability 0 and zero gradients; the fully -inf row 1
  // gives zeros everywhere (PyTorch would give NaN).
  std::vector<double> m = {0.3, -kInf, 0.1, -0.4, -kInf, -kInf, -kInf, -kInf, 0.2, 0.5, -kInf, 0};
  Tensor mask = from_vector(m, {3, 4});
  Tensor q = filled({2, 3, 4}, 30).requires_grad_(), k = filled({2, 4, 4}, 31).requires_grad_();
  Tensor v = filled({2, 4, 2}, 32).requires_grad_();
  mask.requires_grad_();
  SdpaOptions o;
  o.attn_mask = mask;
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  sum(out * filled(out.shape(), 33)).backward();
  mark_step();
  auto dm = mask.grad().to_vector<double>();
  for (size_t i = 0; i < m.size(); ++i) {
    ASSERT_TRUE(std::isfinite(dm[i])) << i;
    if (std::isinf(m[i])) EXPECT_EQ(dm[i], 0.0) << i;
  }
  for (const Tensor& t : {q, k, v})
    for (double x : t.grad().to_vector<double>()) ASSERT_TRUE(std::isfinite(x));
  auto dq = q.grad().to_vector<double>();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(dq[(b * 3 + 1) * 4 + e], 0.0);
}

TEST(AttentionGradcheck, ValidSeqLenRightAndLeft) {
  Tensor lens = from_vector(std::vector<int64_t>{2, 4, 0}, {3});
  for (PaddingSide side : {PaddingSide::right, PaddingSide::left}) {
    SdpaOptions o;
    o.valid_seq_len = lens;
    o.padding_side = side;
    EXPECT_TRUE(gradcheck(attention(o),
                          {filled({3, 4, 3}, 34), filled({3, 4, 3}, 35), filled({3, 4, 2}, 36)}));
    o.is_causal = true;
    EXPECT_TRUE(gradcheck(attention(o),
                          {filled({3, 4, 3}, 37), filled({3, 4, 3}, 38), filled({3, 4, 2}, 39)}));
  }
}

TEST(AttentionGradcheck, ValidSeqLenRank4WithFloatMask) {
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int32_t>{3, 1}, {2});
  o.padding_side = PaddingSide::left;
  EXPECT_TRUE(gradcheck(attention(o), {filled({2, 2, 4, 3}, 40), filled({2, 2, 4, 3}, 41),
                                       filled({2, 2, 4, 2}, 42), filled({4, 4}, 43)}));
}

/// Fills the padded positions of a [B, N, E] tensor with NaN.
Tensor with_nan_padding(Tensor t, const std::vector<int64_t>& lens, bool left) {
  auto v = t.to_vector<double>();
  const int64_t n = t.size(1), e = t.size(2);
  for (int64_t b = 0; b < t.size(0); ++b)
    for (int64_t i = 0; i < n; ++i) {
      const bool valid = left ? i >= n - lens[b] : i < lens[b];
      if (!valid)
        for (int64_t x = 0; x < e; ++x) v[(b * n + i) * e + x] = kNaN;
    }
  return from_vector(v, t.shape());
}

TEST(AttentionGrad, PaddedPositionsGetZeroGradientsEvenWithNaNData) {
  const std::vector<int64_t> lens = {2, 4, 0};
  for (bool left : {false, true}) {
    Tensor q = with_nan_padding(filled({3, 4, 3}, 44), lens, left).requires_grad_();
    Tensor k = with_nan_padding(filled({3, 4, 3}, 45), lens, left).requires_grad_();
    Tensor v = with_nan_padding(filled({3, 4, 2}, 46), lens, left).requires_grad_();
    SdpaOptions o;
    o.valid_seq_len = from_vector(lens, {3});
    o.padding_side = left ? PaddingSide::left : PaddingSide::right;
    Tensor out = scaled_dot_product_attention(q, k, v, o);
    sum(out * filled(out.shape(), 47)).backward();
    mark_step();
    for (const Tensor& t : {q, k, v}) {
      auto g = t.grad().to_vector<double>();
      auto x = t.to_vector<double>();
      for (size_t i = 0; i < g.size(); ++i) {
        ASSERT_TRUE(std::isfinite(g[i])) << "left " << left << " element " << i;
        if (std::isnan(x[i])) EXPECT_EQ(g[i], 0.0) << "left " << left << " element " << i;
      }
    }
    // Batch 2 has no valid position at all: every gradient is zero.
    auto dq = q.grad().to_vector<double>();
    for (int64_t i = 2 * 12; i < 3 * 12; ++i) EXPECT_EQ(dq[i], 0.0);
  }
}

TEST(AttentionGrad, OnlyTheInputsThatRequireGradGetOne) {
  Tensor q = filled({2, 3, 4}, 48), k = filled({2, 3, 4}, 49);
  Tensor v = filled({2, 3, 4}, 50).requires_grad_();
  Tensor out = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(out.grad_fn_name(), "sdpa_backward");
  sum(out).backward();
  mark_step();
  EXPECT_FALSE(q.grad().defined());
  // d sum(P v) / dv[j] = sum_i P[i, j]: the column sums of P, over Ev.
  auto dv = v.grad().to_vector<double>();
  for (int64_t b = 0; b < 2; ++b) {
    double total = 0;
    for (int64_t j = 0; j < 3; ++j) total += dv[(b * 3 + j) * 4];
    EXPECT_NEAR(total, 3.0, 1e-12);  // each of the 3 rows of P sums to 1
  }
}

TEST(AttentionGrad, Bf16AndF32FollowF64) {
  V f64_in = {filled({2, 3, 8}, 51), filled({2, 4, 8}, 52), filled({2, 4, 8}, 53)};
  auto grads = [&](DType dtype) {
    V in;
    for (const Tensor& t : f64_in) in.push_back(to(t, dtype).detach().requires_grad_());
    Tensor out = scaled_dot_product_attention(in[0], in[1], in[2]);
    sum(out * to(filled(out.shape(), 54), dtype)).backward();
    mark_step();
    std::vector<std::vector<double>> g;
    for (const Tensor& t : in) {
      EXPECT_EQ(t.grad().dtype(), dtype);
      g.push_back(t.grad().to_vector<double>());
    }
    return g;
  };
  auto want = grads(DType::f64);
  for (auto [dtype, tol] : {std::pair{DType::f32, 1e-5}, std::pair{DType::bf16, 3e-2}}) {
    auto got = grads(dtype);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < want[i].size(); ++j)
        EXPECT_NEAR(got[i][j], want[i][j], tol) << dtype_name(dtype) << " input " << i;
  }
}

// ---- Dropout ----------------------------------------------------------------

/// Attention gradients of L = sum(out * g) computed by hand from a given
/// keep mask, for [B, L, S] attention with E = Ev = `E`.
struct HandGrads {
  std::vector<double> dq, dk, dv;
};
HandGrads grads_by_hand(const std::vector<double>& q, const std::vector<double>& k,
                        const std::vector<double>& v, const std::vector<double>& g,
                        const std::vector<bool>& keep, double p, int64_t B, int64_t L, int64_t S,
                        int64_t E) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(E)), ks = 1.0 / (1.0 - p);
  HandGrads h{std::vector<double>(q.size()), std::vector<double>(k.size()),
              std::vector<double>(v.size())};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      const int64_t row = b * L + i;
      std::vector<double> P(S), dP(S);
      double mx = -kInf, sum = 0, d = 0;
      for (int64_t j = 0; j < S; ++j) {
        for (int64_t e = 0; e < E; ++e) P[j] += scale * q[row * E + e] * k[(b * S + j) * E + e];
        mx = std::max(mx, P[j]);
      }
      for (int64_t j = 0; j < S; ++j) sum += P[j] = std::exp(P[j] - mx);
      for (int64_t j = 0; j < S; ++j) {
        P[j] /= sum;
        const double m = keep[row * S + j] ? ks : 0.0;  // P' = P * m
        for (int64_t e = 0; e < E; ++e) {
          dP[j] += g[row * E + e] * v[(b * S + j) * E + e] * m;
          h.dv[(b * S + j) * E + e] += P[j] * m * g[row * E + e];
        }
        d += P[j] * dP[j];
      }
      for (int64_t j = 0; j < S; ++j) {
        const double ds = P[j] * (dP[j] - d);
        for (int64_t e = 0; e < E; ++e) {
          h.dq[row * E + e] += scale * ds * k[(b * S + j) * E + e];
          h.dk[(b * S + j) * E + e] += scale * ds * q[row * E + e];
        }
      }
    }
  return h;
}

struct DropoutRun {
  std::vector<double> dq, dk, dv;
  std::vector<bool> keep;
};

/// fused_sdpa with dropout and the mask returned; backward of sum(out * w).
/// With `step_between`, the forward runs in its own step before backward.
DropoutRun run_dropout(double p, bool step_between = false) {
  Tensor q = filled({2, 6, 4}, 55).requires_grad_(), k = filled({2, 7, 4}, 56).requires_grad_();
  Tensor v = filled({2, 7, 4}, 57).requires_grad_();
  SdpaOptions o;
  o.dropout_p = p;
  o.return_dropout_mask = true;
  SdpaResult r = fused_sdpa(q, k, v, o);
  if (step_between) mark_step();
  sum(r.out * filled({2, 6, 4}, 58)).backward();
  mark_step();
  return {q.grad().to_vector<double>(), k.grad().to_vector<double>(), v.grad().to_vector<double>(),
          r.dropout_mask.to_vector<bool>()};
}

TEST(AttentionGradDropout, MatchesTheHandComputationFromTheReturnedMask) {
  manual_seed(11);
  const double p = 0.3;
  DropoutRun r = run_dropout(p);
  int64_t dropped = 0;
  for (bool b : r.keep) dropped += !b;
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, static_cast<int64_t>(r.keep.size()));
  HandGrads h = grads_by_hand(filled({2, 6, 4}, 55).to_vector<double>(),
                              filled({2, 7, 4}, 56).to_vector<double>(),
                              filled({2, 7, 4}, 57).to_vector<double>(),
                              filled({2, 6, 4}, 58).to_vector<double>(), r.keep, p, 2, 6, 7, 4);
  for (size_t i = 0; i < h.dq.size(); ++i) EXPECT_NEAR(r.dq[i], h.dq[i], 1e-12) << i;
  for (size_t i = 0; i < h.dk.size(); ++i) EXPECT_NEAR(r.dk[i], h.dk[i], 1e-12) << i;
  for (size_t i = 0; i < h.dv.size(); ++i) EXPECT_NEAR(r.dv[i], h.dv[i], 1e-12) << i;
}

TEST(AttentionGradDropout, ReproducibleWithManualSeedAndAcrossSteps) {
  manual_seed(5);
  DropoutRun a = run_dropout(0.5);
  manual_seed(5);
  DropoutRun b = run_dropout(0.5, /*step_between=*/true);  // saved RNG state
  manual_seed(6);
  DropoutRun c = run_dropout(0.5);
  EXPECT_EQ(a.keep, b.keep);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
  EXPECT_NE(a.keep, c.keep);
  EXPECT_NE(a.dq, c.dq);
}

TEST(AttentionGradDropout, DropoutOneGivesZeroGradients) {
  DropoutRun r = run_dropout(1.0);
  for (const auto* g : {&r.dq, &r.dk, &r.dv})
    for (double x : *g) ASSERT_EQ(x, 0.0);
}

// ---- Extra outputs ------------------------------------------------------------

TEST(AttentionGrad, ProbabilitiesAreNotDifferentiable) {
  Tensor q = filled({2, 3, 4}, 59).requires_grad_();
  SdpaOptions o;
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(q, filled({2, 3, 4}, 60), filled({2, 3, 4}, 61), o);
  try {
    sum(r.attn_probs).backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("attention probabilities"));
    EXPECT_THAT(e.what(), HasSubstr("not differentiable"));
    EXPECT_THAT(e.what(), HasSubstr("detach()"));
  }
  mark_step();  // the process stays usable
  // Detached probabilities in the loss are fine.
  SdpaResult r2 = fused_sdpa(q, filled({2, 3, 4}, 60), filled({2, 3, 4}, 61), o);
  (sum(r2.out) + sum(r2.attn_probs.detach())).backward();
  mark_step();
  EXPECT_TRUE(q.grad().defined());
}

}  // namespace
}  // namespace mstep
