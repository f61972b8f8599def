// Unit tests for scaled_dot_product_attention / fused_sdpa: hand-computed
// values, causal and mask handling, valid_seq_len padding, returned
// probabilities, dropout (statistics, determinism, mask consistency) and
// one test per argument error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(std::vector<float> v, Shape s) { return from_vector(v, s); }

/// Deterministic pseudo-random values in [-1, 1).
std::vector<float> values(int64_t n, int seed) {
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return out;
}
Tensor filled(Shape s, int seed) { return f32(values(s.numel(), seed), s); }

/// The message of the mstep::Error that the call throws ("" if none).
std::string sdpa_error(const Tensor& q, const Tensor& k, const Tensor& v,
                       const SdpaOptions& o = {}) {
  try {
    scaled_dot_product_attention(q, k, v, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// q = [[1], [0]], k = [[1], [2]], v = [[10], [20]], E = 1 so scale = 1.
// Row 0: scores [1, 2] -> probs [1, e] / (1 + e). Row 1: scores [0, 0].
struct TwoByTwo {
  Tensor q = f32({1, 0}, {2, 1});
  Tensor k = f32({1, 2}, {2, 1});
  Tensor v = f32({10, 20}, {2, 1});
};

TEST(AttentionTest, HandComputedTwoByTwo) {
  TwoByTwo t;
  Tensor out = scaled_dot_product_attention(t.q, t.k, t.v);
  EXPECT_TRUE(out.is_pending());  // nothing ran at call time
  EXPECT_EQ(out.shape(), (Shape{2, 1}));
  mark_step();
  const double e = std::exp(1.0);
  auto got = out.to_vector<double>();
  EXPECT_NEAR(got[0], (10 + 20 * e) / (1 + e), 1e-5);
  EXPECT_NEAR(got[1], 15.0, 1e-5);
}

TEST(AttentionTest, ExplicitScale) {
  TwoByTwo t;
  SdpaOptions o;
  o.scale = 2.0;  // row 0 scores [2, 4]
  auto got = scaled_dot_product_attention(t.q, t.k, t.v, o).to_vector<double>();
  const double e2 = std::exp(2.0);
  EXPECT_NEAR(got[0], (10 + 20 * e2) / (1 + e2), 1e-5);
  EXPECT_NEAR(got[1], 15.0, 1e-5);
}

TEST(AttentionTest, CausalSquare) {
  TwoByTwo t;
  SdpaOptions o;
  o.is_causal = true;  // row 0 sees key 0 only
  auto got = scaled_dot_product_attention(t.q, t.k, t.v, o).to_vector<double>();
  EXPECT_NEAR(got[0], 10.0, 1e-6);
  EXPECT_NEAR(got[1], 15.0, 1e-5);
}

TEST(AttentionTest, CausalFollowsTrilForLNotEqualS) {
  // PyTorch's convention: query i attends keys j <= i, even when L != S.
  Tensor q = f32({0, 0}, {2, 1});  // zero scores: uniform over allowed keys
  Tensor k = f32({1, 2, 3}, {3, 1});
  Tensor v = f32({10, 20, 30}, {3, 1});
  SdpaOptions o;
  o.is_causal = true;
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(q, k, v, o);
  EXPECT_THAT(r.out.to_vector<float>(), ElementsAre(10.0f, 15.0f));
  EXPECT_THAT(r.attn_probs.to_vector<float>(),
              ElementsAre(1.0f, 0.0f, 0.0f, 0.5f, 0.5f, 0.0f));
}

TEST(AttentionTest, BoolMaskTrueMeansAttend) {
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask =
      from_vector(std::vector<bool>{true, false, false, true}, {2, 2});
  auto got = scaled_dot_product_attention(t.q, t.k, t.v, o).to_vector<float>();
  EXPECT_THAT(got, ElementsAre(10.0f, 20.0f));
}

TEST(AttentionTest, BoolMaskBroadcastsOverRows) {
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask = from_vector(std::vector<bool>{false, true}, {2});  // [S]
  auto got = scaled_dot_product_attention(t.q, t.k, t.v, o).to_vector<float>();
  EXPECT_THAT(got, ElementsAre(20.0f, 20.0f));
}

TEST(AttentionTest, FloatMaskIsAdded) {
  TwoByTwo t;
  SdpaOptions o;
  // Row 0 drops key 1; row 1 scores [ln 3, 0] -> probs [3/4, 1/4].
  o.attn_mask = from_vector(std::vector<double>{0, -kInf, std::log(3.0), 0},
                            {2, 2}, DType::f32);
  auto got = scaled_dot_product_attention(t.q, t.k, t.v, o).to_vector<double>();
  EXPECT_NEAR(got[0], 10.0, 1e-6);
  EXPECT_NEAR(got[1], 12.5, 1e-5);
}

TEST(AttentionTest, FullyMaskedRowGivesZerosNotNaN) {
  // Deliberate difference from PyTorch 1.13, which returns NaN here.
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask =
      from_vector(std::vector<bool>{false, false, true, true}, {2, 2});
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(t.q, t.k, t.v, o);
  EXPECT_THAT(r.out.to_vector<float>(), ElementsAre(0.0f, 15.0f));
  EXPECT_THAT(r.attn_probs.to_vector<float>(),
              ElementsAre(0.0f, 0.0f, 0.5f, 0.5f));
}

TEST(AttentionTest, ProbsRowsSumToOneAndOutIsProbsTimesV) {
  const int64_t B = 2, H = 3, L = 4, S = 5, E = 6, Ev = 3;
  Tensor q = filled({B, H, L, E}, 1), k = filled({B, H, S, E}, 2);
  std::vector<float> vh = values(B * H * S * Ev, 3);
  Tensor v = f32(vh, {B, H, S, Ev});
  SdpaOptions o;
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(q, k, v, o);
  EXPECT_EQ(r.out.shape(), (Shape{B, H, L, Ev}));
  EXPECT_EQ(r.attn_probs.shape(), (Shape{B, H, L, S}));
  EXPECT_FALSE(r.dropout_mask.defined());
  mark_step();
  auto p = r.attn_probs.to_vector<double>();
  auto out = r.out.to_vector<double>();
  for (int64_t row = 0; row < B * H * L; ++row) {
    double sum = 0;
    for (int64_t j = 0; j < S; ++j) sum += p[row * S + j];
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << row;
    const int64_t bh = row / L;
    for (int64_t e = 0; e < Ev; ++e) {
      double want = 0;
      for (int64_t j = 0; j < S; ++j)
        want += p[row * S + j] * vh[(bh * S + j) * Ev + e];
      EXPECT_NEAR(out[row * Ev + e], want, 1e-5);
    }
  }
}

TEST(AttentionTest, ScaledDotProductAttentionMatchesFusedOut) {
  Tensor q = filled({2, 3, 4}, 4), k = filled({2, 5, 4}, 5),
         v = filled({2, 5, 2}, 6);
  SdpaOptions o;
  o.is_causal = true;
  o.return_attn_probs = true;  // ignored by scaled_dot_product_attention
  Tensor a = scaled_dot_product_attention(q, k, v, o);
  Tensor b = fused_sdpa(q, k, v, o).out;
  mark_step();
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

TEST(AttentionTest, Bf16KeepsDtype) {
  Tensor q = filled({1, 2, 4}, 7).to(DType::bf16);
  Tensor k = filled({1, 3, 4}, 8).to(DType::bf16);
  Tensor v = filled({1, 3, 4}, 9).to(DType::bf16);
  SdpaOptions o;
  o.return_attn_probs = true;
  SdpaResult r = fused_sdpa(q, k, v, o);
  EXPECT_EQ(r.out.dtype(), DType::bf16);
  EXPECT_EQ(r.attn_probs.dtype(), DType::bf16);
  Tensor ref = scaled_dot_product_attention(q.to(DType::f32), k.to(DType::f32),
                                            v.to(DType::f32));
  mark_step();
  auto got = r.out.to_vector<float>(), want = ref.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-2);
}

// valid_seq_len: B = 2, L = S = 4, E = 3, lens {2, 4}. Padded positions of
// k and v hold huge values that would dominate if they leaked in.
struct Padded {
  static constexpr int64_t B = 2, L = 4, E = 3;
  std::vector<float> q = values(B * L * E, 11), k = values(B * L * E, 12),
                     v = values(B * L * E, 13);
  /// Poisons the padded positions of batch 0 (len 2) on `left` or right.
  explicit Padded(bool left) {
    for (int64_t pos = 0; pos < L; ++pos) {
      const bool padded = left ? pos < 2 : pos >= 2;
      if (!padded) continue;
      for (int64_t e = 0; e < E; ++e) k[pos * E + e] = v[pos * E + e] = 1e4f;
    }
  }
  /// Rows [from, from + n) of batch b of `data` as a [1, n, E] tensor.
  static Tensor slice(const std::vector<float>& data, int64_t b, int64_t from,
                      int64_t n) {
    auto first = data.begin() + (b * L + from) * E;
    return f32(std::vector<float>(first, first + n * E), {1, n, E});
  }
};

void check_padding(bool left, bool causal) {
  Padded d(left);
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int64_t>{2, 4}, {2});
  o.padding_side = left ? PaddingSide::left : PaddingSide::right;
  o.is_causal = causal;
  o.return_attn_probs = true;
  const Shape s{Padded::B, Padded::L, Padded::E};
  SdpaResult r = fused_sdpa(f32(d.q, s), f32(d.k, s), f32(d.v, s), o);
  // The same attention on the unpadded slices, built by hand.
  const int64_t from = left ? 2 : 0;
  SdpaOptions plain;
  plain.is_causal = causal;
  Tensor b0 = scaled_dot_product_attention(
      Padded::slice(d.q, 0, from, 2), Padded::slice(d.k, 0, from, 2),
      Padded::slice(d.v, 0, from, 2), plain);
  Tensor b1 = scaled_dot_product_attention(Padded::slice(d.q, 1, 0, 4),
                                           Padded::slice(d.k, 1, 0, 4),
                                           Padded::slice(d.v, 1, 0, 4), plain);
  mark_step();
  auto out = r.out.to_vector<float>();
  auto p = r.attn_probs.to_vector<float>();
  auto w0 = b0.to_vector<float>(), w1 = b1.to_vector<float>();
  for (int64_t i = 0; i < Padded::L; ++i) {
    const bool valid = i >= from && i < from + 2;
    for (int64_t e = 0; e < Padded::E; ++e) {
      const float got = out[i * Padded::E + e];
      if (valid)
        EXPECT_NEAR(got, w0[(i - from) * Padded::E + e], 1e-5) << "row " << i;
      else
        EXPECT_EQ(got, 0.0f) << "padded query row " << i << " must be zero";
    }
    for (int64_t j = 0; j < Padded::L; ++j) {
      const bool key_valid = j >= from && j < from + 2;
      if (!valid || !key_valid)
        EXPECT_EQ(p[i * Padded::L + j], 0.0f) << "row " << i << " key " << j;
    }
  }
  for (size_t i = 0; i < w1.size(); ++i)
    EXPECT_NEAR(out[Padded::L * Padded::E + i], w1[i], 1e-5);
}

TEST(AttentionTest, ValidSeqLenRightPadding) { check_padding(false, false); }
TEST(AttentionTest, ValidSeqLenLeftPadding) { check_padding(true, false); }
TEST(AttentionTest, ValidSeqLenRightPaddingCausal) {
  check_padding(false, true);
}

TEST(AttentionTest, ValidSeqLenRank4IndexesBatchDimI32) {
  // [B=2, H=2, L=3, E=2]: every head of batch b uses lens[b].
  Tensor q = filled({2, 2, 3, 2}, 21), k = filled({2, 2, 3, 2}, 22);
  Tensor v = filled({2, 2, 3, 2}, 23);
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int32_t>{1, 3}, {2});
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  Tensor full_out = scaled_dot_product_attention(q, k, v);
  mark_step();
  auto got = out.to_vector<float>(), all = full_out.to_vector<float>();
  auto vh = v.to_vector<float>();
  for (int64_t h = 0; h < 2; ++h) {
    // Batch 0, len 1: row 0 attends key 0 only -> v[0]; rows 1, 2 zero.
    for (int64_t e = 0; e < 2; ++e) {
      EXPECT_NEAR(got[h * 6 + e], vh[h * 6 + e], 1e-6);
      EXPECT_EQ(got[h * 6 + 2 + e], 0.0f);
      EXPECT_EQ(got[h * 6 + 4 + e], 0.0f);
    }
  }
  for (int64_t i = 12; i < 24; ++i) EXPECT_NEAR(got[i], all[i], 1e-6);
}

TEST(AttentionTest, MaskValuesChangeAcrossStepsWithoutRecompiling) {
  TwoByTwo t;
  const std::vector<std::vector<bool>> masks = {{true, false, false, true},
                                                {false, true, true, false}};
  const std::vector<std::vector<float>> want = {{10, 20}, {20, 10}};
  for (int step = 0; step < 4; ++step) {
    if (step == 1) reset_metrics();  // step 0 may compile
    SdpaOptions o;
    o.attn_mask = from_vector(masks[step % 2], {2, 2});
    Tensor out = scaled_dot_product_attention(t.q, t.k, t.v, o);
    mark_step();
    EXPECT_EQ(out.to_vector<float>(), want[step % 2]) << "step " << step;
  }
  // The mask is data, not structure: later steps reuse the graph.
  EXPECT_EQ(metrics().cache_misses, 0);
  EXPECT_EQ(metrics().cache_hits, 3);
}

// Dropout: [B=4, L=32, S=32] probabilities.
struct DropoutCase {
  Tensor q = filled({4, 32, 8}, 31), k = filled({4, 32, 8}, 32),
         v = filled({4, 32, 8}, 33);
  SdpaResult run(double p) {
    SdpaOptions o;
    o.dropout_p = p;
    o.return_attn_probs = true;
    o.return_dropout_mask = true;
    return fused_sdpa(q, k, v, o);
  }
};

TEST(AttentionTest, DropoutMaskConsistentWithProbs) {
  DropoutCase c;
  manual_seed(3);
  SdpaResult plain = c.run(0.0);
  SdpaResult r = c.run(0.25);
  EXPECT_EQ(r.dropout_mask.dtype(), DType::boolean);
  EXPECT_EQ(r.dropout_mask.shape(), (Shape{4, 32, 32}));
  mark_step();
  auto base = plain.attn_probs.to_vector<double>();
  auto p = r.attn_probs.to_vector<double>();
  auto keep = r.dropout_mask.to_vector<bool>();
  int64_t dropped = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!keep[i]) {
      EXPECT_EQ(p[i], 0.0) << i;
      ++dropped;
    } else {
      EXPECT_NEAR(p[i], base[i] / 0.75, 1e-6) << i;
    }
  }
  // 4096 Bernoulli(0.25) draws: mean 1024, sd ~28.
  EXPECT_NEAR(static_cast<double>(dropped) / p.size(), 0.25, 0.03);
  // Without dropout the mask is all true.
  for (bool b : plain.dropout_mask.to_vector<bool>()) ASSERT_TRUE(b);
  // out = (dropped, rescaled probs) @ v.
  auto out = r.out.to_vector<double>(), vh = c.v.to_vector<double>();
  for (int64_t row = 0; row < 4 * 32; ++row)
    for (int64_t e = 0; e < 8; ++e) {
      double want = 0;
      for (int64_t j = 0; j < 32; ++j)
        want += p[row * 32 + j] * vh[((row / 32) * 32 + j) * 8 + e];
      EXPECT_NEAR(out[row * 8 + e], want, 1e-4);
    }
}

TEST(AttentionTest, DropoutDeterministicWithManualSeedAndFreshEachStep) {
  DropoutCase c;
  auto mask_for_step = [&] {
    SdpaResult r = c.run(0.5);
    mark_step();
    return r.dropout_mask.to_vector<bool>();
  };
  manual_seed(42);
  auto a1 = mask_for_step(), a2 = mask_for_step();
  manual_seed(42);
  auto b1 = mask_for_step(), b2 = mask_for_step();
  manual_seed(43);
  auto c1 = mask_for_step();
  EXPECT_EQ(a1, b1);
  EXPECT_EQ(a2, b2);
  EXPECT_NE(a1, a2);  // the offset advances across steps
  EXPECT_NE(a1, c1);  // another seed, another stream
}

TEST(AttentionTest, DropoutOneGivesZeros) {
  DropoutCase c;
  SdpaResult r = c.run(1.0);
  mark_step();
  for (float x : r.out.to_vector<float>()) ASSERT_EQ(x, 0.0f);
}

TEST(AttentionTest, NoDropoutDrawsNoRandomNumbers) {
  // With dropout_p == 0 the node takes no RNG state, so the stream that
  // later random ops see is unchanged.
  TwoByTwo t;
  manual_seed(9);
  Tensor r1 = rand({8});
  mark_step();
  manual_seed(9);
  Tensor out = scaled_dot_product_attention(t.q, t.k, t.v);
  Tensor r2 = rand({8});
  mark_step();
  EXPECT_EQ(r1.to_vector<float>(), r2.to_vector<float>());
}

// ---- Errors: one test per check. -----------------------------------------

TEST(AttentionErrorTest, UndefinedInput) {
  TwoByTwo t;
  auto msg = sdpa_error(t.q, Tensor(), t.v);
  EXPECT_THAT(msg, HasSubstr("scaled_dot_product_attention"));
  EXPECT_THAT(msg, HasSubstr("must all be defined"));
}

TEST(AttentionErrorTest, IntegerInputs) {
  Tensor i = from_vector(std::vector<int64_t>{1, 2}, {2, 1});
  auto msg = sdpa_error(i, i, i);
  EXPECT_THAT(msg, HasSubstr("floating-point q, k and v"));
  EXPECT_THAT(msg, HasSubstr("i64[2, 1]"));
}

TEST(AttentionErrorTest, MixedDtypes) {
  TwoByTwo t;
  auto msg = sdpa_error(t.q, t.k.to(DType::f64), t.v);
  EXPECT_THAT(msg, HasSubstr("of one dtype"));
  EXPECT_THAT(msg, HasSubstr("k f64[2, 1]"));
}

TEST(AttentionErrorTest, RankBelowTwo) {
  Tensor x = f32({1, 2}, {2});
  EXPECT_THAT(sdpa_error(x, x, x), HasSubstr("rank >= 2"));
}

TEST(AttentionErrorTest, RankMismatch) {
  TwoByTwo t;
  Tensor q3 = f32({1, 0}, {1, 2, 1});
  EXPECT_THAT(sdpa_error(q3, t.k, t.v), HasSubstr("same rank"));
}

TEST(AttentionErrorTest, BatchDimMismatch) {
  Tensor q = filled({2, 3, 4}, 1), k = filled({3, 3, 4}, 2),
         v = filled({3, 3, 4}, 3);
  auto msg = sdpa_error(q, k, v);
  EXPECT_THAT(msg, HasSubstr("batch/head dim 0 differs"));
  EXPECT_THAT(msg, HasSubstr("q f32[2, 3, 4], k f32[3, 3, 4]"));
}

TEST(AttentionErrorTest, HeadDimMismatch) {
  Tensor q = filled({2, 4}, 1), k = filled({3, 5}, 2), v = filled({3, 5}, 3);
  EXPECT_THAT(sdpa_error(q, k, v),
              HasSubstr("head dim E=4 differs from k's E=5"));
}

TEST(AttentionErrorTest, KeyLengthMismatch) {
  Tensor q = filled({2, 4}, 1), k = filled({3, 4}, 2), v = filled({5, 4}, 3);
  EXPECT_THAT(sdpa_error(q, k, v), HasSubstr("k has S=3 keys but v has 5"));
}

TEST(AttentionErrorTest, DevicesDifferAndRngIsUntouched) {
  TwoByTwo t;
  Tensor q1 = from_vector(std::vector<float>{1, 0}, {2, 1}, std::nullopt,
                          Device{DeviceType::ref, 1});
  SdpaOptions o;
  o.dropout_p = 0.5;
  manual_seed(5);
  auto msg = sdpa_error(q1, t.k, t.v, o);
  EXPECT_THAT(msg, HasSubstr("operands live on different devices"));
  Tensor after_error = rand({8});
  manual_seed(5);
  Tensor baseline = rand({8});
  mark_step();
  EXPECT_EQ(after_error.to_vector<float>(), baseline.to_vector<float>());
}

TEST(AttentionErrorTest, MaskDtype) {
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask = from_vector(std::vector<int64_t>{1, 0, 0, 1}, {2, 2});
  auto msg = sdpa_error(t.q, t.k, t.v, o);
  EXPECT_THAT(msg, HasSubstr("attn_mask must be bool or q's dtype f32"));
  EXPECT_THAT(msg, HasSubstr("attn_mask i64[2, 2]"));
}

TEST(AttentionErrorTest, FloatMaskOfOtherDtype) {
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask = from_vector(std::vector<double>{0, 0, 0, 0}, {2, 2});  // f64
  EXPECT_THAT(sdpa_error(t.q, t.k, t.v, o),
              HasSubstr("attn_mask must be bool or q's dtype"));
}

TEST(AttentionErrorTest, MaskDoesNotBroadcast) {
  TwoByTwo t;
  SdpaOptions o;
  o.attn_mask = from_vector(std::vector<bool>{true, true, true}, {3});
  auto msg = sdpa_error(t.q, t.k, t.v, o);
  EXPECT_THAT(msg, HasSubstr("does not broadcast to the score shape"));
  EXPECT_THAT(msg, HasSubstr("[2, 2]"));
}

TEST(AttentionErrorTest, CausalWithMask) {
  TwoByTwo t;
  SdpaOptions o;
  o.is_causal = true;
  o.attn_mask = from_vector(std::vector<bool>{true, true, true, true}, {2, 2});
  auto msg = sdpa_error(t.q, t.k, t.v, o);
  EXPECT_THAT(msg,
              HasSubstr("is_causal and attn_mask cannot be used together"));
}

TEST(AttentionErrorTest, DropoutOutOfRange) {
  TwoByTwo t;
  SdpaOptions o;
  o.dropout_p = 1.5;
  auto msg = sdpa_error(t.q, t.k, t.v, o);
  EXPECT_THAT(msg, HasSubstr("dropout_p must be in [0, 1]"));
  EXPECT_THAT(msg, HasSubstr("1.5"));
}

TEST(AttentionErrorTest, NonFiniteScale) {
  TwoByTwo t;
  SdpaOptions o;
  o.scale = std::nan("");
  EXPECT_THAT(sdpa_error(t.q, t.k, t.v, o), HasSubstr("scale must be finite"));
}

TEST(AttentionErrorTest, ValidSeqLenNeedsRank3) {
  TwoByTwo t;
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int64_t>{1, 2}, {2});
  EXPECT_THAT(sdpa_error(t.q, t.k, t.v, o),
              HasSubstr("valid_seq_len needs q of rank >= 3"));
}

TEST(AttentionErrorTest, ValidSeqLenDtype) {
  Tensor x = filled({2, 3, 4}, 1);
  SdpaOptions o;
  o.valid_seq_len = f32({1, 2}, {2});
  auto msg = sdpa_error(x, x, x, o);
  EXPECT_THAT(msg, HasSubstr("valid_seq_len must be i32 or i64"));
  EXPECT_THAT(msg, HasSubstr("valid_seq_len f32[2]"));
}

TEST(AttentionErrorTest, ValidSeqLenShape) {
  Tensor x = filled({2, 3, 4}, 1);
  SdpaOptions o;
  o.valid_seq_len = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  auto msg = sdpa_error(x, x, x, o);
  EXPECT_THAT(msg, HasSubstr("valid_seq_len must have shape [B] = [2]"));
  EXPECT_THAT(msg, HasSubstr("i64[3]"));
}

}  // namespace
}  // namespace mstep
