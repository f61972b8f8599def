// Attention nodes with [L, S] results or operands inside the xla step
// function (lib/backends/xla/XlaAttentionProbs.cpp): fused_sdpa returning
// its probabilities (and dropout mask), a backward from the forward's saved
// probabilities (recompute = false) and the gradient of a floating mask
// compile with NO callout, and out, the probabilities and the gradients of
// q, k, v and the mask equal the ref backend's within the cpu flash
// kernel's tolerance (1e-4 f32, 2e-2 bf16, relative to the largest
// reference magnitude, as xla_attention_test); the dropout mask is ref's
// exactly (the same Philox draw). Batch-heads split over threads give one
// thread's bits, also when a mask broadcast over heads makes them add into
// the same mask-gradient elements. A bf16 mask gradient stays a callout (the
// cpu backend hands it to the ref kernel too).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <omp.h>

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::callouts_of_last_step;
using testing::RecordSteps;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// Deterministic values in [-1, 1] of `dtype` on `d`.
Tensor filled(Device d, Shape s, int seed, DType dtype = DType::f32) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, dtype, d);
}

/// q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev] and the options.
struct Case {
  std::string name;
  int64_t B = 2, H = 2, L = 70, S = 131, E = 24, Ev = 20;
  DType dtype = DType::f32;
  bool causal = false;
  double dropout = 0;
  bool probs = false; // fused_sdpa returning probabilities (and the mask with dropout)
  bool saved = false; // recompute = false
  // A bool [L, S] mask, or a floating one that requires grad: [B, H, L, S]
  // (its own elements per batch-head), [B, 1, L, S] (shared by the heads)
  // or [L, S] (shared by all).
  enum class Mask { none, bool_ls, grad_bhls, grad_b1ls, grad_ls } mask = Mask::none;
  enum class Lens { none, right, left } lens = Lens::none;
};

/// out, dq, dk, dv, then the probabilities, the mask gradient and the
/// dropout mask (as 0/1) when the case has them, as f32 vectors; `callouts`,
/// when given, gets what the step's graph calls out for on xla (the graph
/// is recorded under RecordSteps).
std::vector<std::vector<float>> run(const Case& c, Device d,
                                    std::vector<std::string>* callouts = nullptr) {
  Tensor q = filled(d, {c.B, c.H, c.L, c.E}, 1, c.dtype).requires_grad_();
  Tensor k = filled(d, {c.B, c.H, c.S, c.E}, 2, c.dtype).requires_grad_();
  Tensor v = filled(d, {c.B, c.H, c.S, c.Ev}, 3, c.dtype).requires_grad_();
  SdpaOptions o;
  o.is_causal = c.causal;
  o.dropout_p = c.dropout;
  o.recompute = !c.saved;
  Tensor mask;
  switch (c.mask) {
  case Case::Mask::none:
    break;
  case Case::Mask::bool_ls: {
    // Every third key hidden; row 5 attends to nothing (zero probabilities).
    std::vector<bool> m(c.L * c.S);
    for (int64_t i = 0; i < c.L; ++i)
      for (int64_t j = 0; j < c.S; ++j) m[i * c.S + j] = i != 5 && (i + j) % 3 != 0;
    o.attn_mask = from_vector(m, {c.L, c.S}, d);
    break;
  }
  case Case::Mask::grad_bhls:
    mask = filled(d, {c.B, c.H, c.L, c.S}, 4, c.dtype);
    break;
  case Case::Mask::grad_b1ls:
    mask = filled(d, {c.B, 1, c.L, c.S}, 4, c.dtype);
    break;
  case Case::Mask::grad_ls:
    mask = filled(d, {c.L, c.S}, 4, c.dtype);
    break;
  }
  if (mask.defined()) o.attn_mask = mask.requires_grad_();
  if (c.lens != Case::Lens::none) {
    o.valid_seq_len = from_vector(std::vector<int64_t>{37, 200}, {2}, std::nullopt, d);
    o.padding_side = c.lens == Case::Lens::right ? PaddingSide::right : PaddingSide::left;
  }
  manual_seed(7);
  Tensor out, probs, keep;
  if (c.probs) {
    o.return_attn_probs = true;
    o.return_dropout_mask = c.dropout > 0;
    SdpaResult r = fused_sdpa(q, k, v, o);
    out = r.out, probs = r.attn_probs, keep = r.dropout_mask;
  } else {
    out = scaled_dot_product_attention(q, k, v, o);
  }
  sum(to(out, DType::f32) * filled(d, out.shape(), 5)).backward();
  mark_step();
  if (callouts) *callouts = callouts_of_last_step();
  std::vector<Tensor> results = {out, q.grad(), k.grad(), v.grad()};
  if (probs.defined()) results.push_back(probs);
  if (mask.defined()) results.push_back(mask.grad());
  if (keep.defined()) results.push_back(keep);
  std::vector<std::vector<float>> values;
  for (const Tensor& t : results) values.push_back(to(t, DType::f32).to_vector<float>());
  return values;
}

class XlaAttentionProbs : public ::testing::TestWithParam<Case> {};

TEST_P(XlaAttentionProbs, NoCalloutAndRefsValues) {
  const Case& c = GetParam();
  std::vector<std::vector<float>> xla;
  {
    RecordSteps record;
    std::vector<std::string> callouts;
    xla = run(c, kXla, &callouts);
    EXPECT_THAT(callouts, ::testing::IsEmpty());
  }
  const std::vector<std::vector<float>> ref = run(c, kRef);
  const double rtol = c.dtype == DType::bf16 ? 2e-2 : 1e-4;
  ASSERT_EQ(xla.size(), ref.size());
  const bool has_keep = c.probs && c.dropout > 0;
  for (size_t r = 0; r < ref.size(); ++r) {
    SCOPED_TRACE(r);
    ASSERT_EQ(xla[r].size(), ref[r].size());
    if (has_keep && r + 1 == ref.size()) {
      EXPECT_EQ(xla[r], ref[r]) << "the dropout mask";
      continue;
    }
    double largest = 0;
    for (float x : ref[r]) largest = std::max(largest, std::fabs(double{x}));
    const double tol = rtol * std::max(largest, 1e-2);
    int64_t bad = 0;
    for (size_t i = 0; i < ref[r].size(); ++i)
      if (!(std::fabs(double{xla[r][i]} - ref[r][i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << "result " << r << " [" << i << "] = " << xla[r][i] << ", ref "
                      << ref[r][i] << " (tolerance " << tol << ")";
    EXPECT_EQ(bad, 0);
  }
}

Case with(std::string name, void (*set)(Case&)) {
  Case c;
  c.name = std::move(name);
  set(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Options, XlaAttentionProbs,
    ::testing::Values(
        with("probs", [](Case& c) { c.probs = true; }),
        with("probs_causal_dropout_left",
             [](Case& c) {
               c.probs = true, c.causal = true, c.dropout = 0.2;
               c.lens = Case::Lens::left, c.L = c.S = 100;
             }),
        with("probs_bool_mask_dropout",
             [](Case& c) { c.probs = true, c.mask = Case::Mask::bool_ls, c.dropout = 0.3; }),
        with("probs_dropout_all", [](Case& c) { c.probs = true, c.dropout = 1.0, c.L = 9, c.S = 11; }),
        with("probs_bf16_causal", [](Case& c) { c.probs = true, c.dtype = DType::bf16, c.causal = true; }),
        with("saved", [](Case& c) { c.saved = true; }),
        with("saved_causal_dropout_right",
             [](Case& c) {
               c.saved = true, c.causal = true, c.dropout = 0.25;
               c.lens = Case::Lens::right, c.L = c.S = 100;
             }),
        with("saved_bool_mask_bf16",
             [](Case& c) { c.saved = true, c.mask = Case::Mask::bool_ls, c.dtype = DType::bf16; }),
        with("mask_grad_per_batch_head", [](Case& c) { c.mask = Case::Mask::grad_bhls; }),
        with("mask_grad_shared_by_heads_dropout",
             [](Case& c) { c.mask = Case::Mask::grad_b1ls, c.dropout = 0.1; }),
        with("mask_grad_ls_left_dropout",
             [](Case& c) {
               c.mask = Case::Mask::grad_ls, c.dropout = 0.2;
               c.lens = Case::Lens::left, c.L = c.S = 100;
             }),
        with("everything",
             [](Case& c) {
               c.probs = true, c.saved = true, c.dropout = 0.2;
               c.mask = Case::Mask::grad_bhls, c.lens = Case::Lens::right;
             })),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Batch-heads split over 4 threads (6 of them: uneven) give one thread's
// bits: probabilities, dropout mask, saved probabilities and a per-head mask
// gradient (each batch-head its own elements), and a mask gradient shared
// by the heads (those batch-heads stay on one thread, in order).
TEST(XlaAttentionProbsThreads, BatchHeadsSplitOverThreadsGiveOneThreadsValuesBitForBit) {
  Case own;
  own.H = 3, own.probs = true, own.saved = true, own.dropout = 0.2;
  own.lens = Case::Lens::right;
  own.mask = Case::Mask::grad_bhls;
  Case shared = own;
  shared.mask = Case::Mask::grad_b1ls;
  const int threads = omp_get_max_threads();
  for (const Case& c : {own, shared}) {
    omp_set_num_threads(1);
    const std::vector<std::vector<float>> one = run(c, kXla);
    omp_set_num_threads(4);
    const std::vector<std::vector<float>> four = run(c, kXla);
    ASSERT_EQ(one.size(), four.size());
    for (size_t r = 0; r < one.size(); ++r) EXPECT_EQ(four[r], one[r]) << "result " << r;
  }
  omp_set_num_threads(threads);
}

// A bf16 floating mask's gradient: the backward stays a named callout to the
// cpu backend (which runs the ref kernel), with ref's values.
TEST(XlaAttentionProbsCallouts, ABf16MaskGradientStaysACallout) {
  Case c;
  c.dtype = DType::bf16, c.mask = Case::Mask::grad_bhls, c.L = 9, c.S = 11;
  std::vector<std::vector<float>> xla;
  {
    RecordSteps record;
    std::vector<std::string> callouts;
    xla = run(c, kXla, &callouts);
    EXPECT_THAT(callouts, ::testing::ElementsAre("sdpa_grad"));
  }
  const std::vector<std::vector<float>> ref = run(c, kRef);
  ASSERT_EQ(xla.size(), ref.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    ASSERT_EQ(xla[r].size(), ref[r].size()) << r;
    for (size_t i = 0; i < ref[r].size(); ++i)
      EXPECT_NEAR(xla[r][i], ref[r][i], 2e-2) << "result " << r << " element " << i;
  }
}

} // namespace
} // namespace mstep
