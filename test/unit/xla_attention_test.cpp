// Attention inside the xla step function (lib/backends/xla/
// XlaAttentionLoops.cpp, XlaAttentionProbs.cpp): a training step with sdpa
// and its backward (sdpa_grad) compiles with NO callout across the option
// matrix (causal, bool and floating masks, dropout, valid_seq_len left and
// right, f32 and bf16, several Q and K/V tiles; fused_sdpa returning its
// probabilities and dropout mask, recompute = false saving probabilities
// for the backward, the gradient of a floating mask of its own per
// batch-head, shared by heads or by all, or broadcast over the keys), and
// its output, probabilities and the gradients of q, k, v and the mask equal
// the ref backend's within the cpu flash kernel's tolerance
// (test/unit/cpu_flash_attention_test.cpp: 1e-4 f32, 2e-2 bf16, relative to
// the largest reference magnitude).
// Dropout draws the same Philox keep mask as ref (the same seed): the
// returned mask is ref's exactly. A bf16 mask gradient sums in f32 in the
// step's scratch and rounds once, with no callout (the cpu backend hands it
// to the ref kernel), within the bf16 tolerance of ref; so do a bf16
// backward's dq sums (a long sequence no longer needs them on the stack).
#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include <omp.h>

#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::RecordSteps;

using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// Deterministic values in [-1, 1] of `dtype` on `d`.
Tensor filled(Device d, Shape s, int seed, DType dtype = DType::f32) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, dtype, d);
}

/// One attention configuration: q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev].
struct Case {
  std::string name;
  int64_t B = 2, H = 2, L = 70, S = 131, E = 24, Ev = 20;
  DType dtype = DType::f32;
  bool causal = false;
  // A bool [L, S] mask or an [L, 1] one (broadcast over the keys: not
  // contiguous in them); a floating [B, 1, L, S] one; or a floating one that
  // requires grad: [B, H, L, S] (its own elements per batch-head),
  // [B, 1, L, S] (shared by the heads), [L, S] (shared by all) or [L, 1].
  enum class Mask {
    none, bool_ls, bool_l1, float_b1ls, grad_bhls, grad_b1ls, grad_ls, grad_l1
  } mask = Mask::none;
  double dropout = 0;
  enum class Lens { none, right, left, left_i32 } lens = Lens::none;
  bool probs = false; // fused_sdpa returning probabilities (and the mask with dropout)
  bool saved = false; // recompute = false
};

/// gtest prints a parameter by its name (not its bytes) in test listings.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

/// The last step's graph compiled for xla: the names of its callouts, and
/// how many sdpa and sdpa_grad nodes it has.
struct Compiled {
  std::vector<std::string> callouts;
  int attention_nodes = 0;
};
Compiled compile_last_step();

/// out, dq, dk, dv of sum(out * w) on `d`, then the probabilities, the mask
/// gradient and the dropout mask (as 0/1) when the case has them, as f32
/// vectors; `compiled`, when given, gets the step's graph compiled for xla.
std::vector<std::vector<float>> run(const Case& c, Device d, Compiled* compiled = nullptr) {
  Tensor q = filled(d, {c.B, c.H, c.L, c.E}, 1, c.dtype).requires_grad_();
  Tensor k = filled(d, {c.B, c.H, c.S, c.E}, 2, c.dtype).requires_grad_();
  Tensor v = filled(d, {c.B, c.H, c.S, c.Ev}, 3, c.dtype).requires_grad_();
  SdpaOptions o;
  o.is_causal = c.causal;
  o.dropout_p = c.dropout;
  o.recompute = !c.saved;
  Tensor mask; // one that requires grad
  if (c.mask == Case::Mask::bool_ls) {
    // Every third key hidden, and row 5 attends to nothing (its output and
    // gradients are zero).
    std::vector<bool> m(c.L * c.S);
    for (int64_t i = 0; i < c.L; ++i)
      for (int64_t j = 0; j < c.S; ++j) m[i * c.S + j] = i != 5 && (i + j) % 3 != 0;
    o.attn_mask = from_vector(m, {c.L, c.S}, d);
  } else if (c.mask == Case::Mask::bool_l1) {
    // Every third row attends to nothing.
    std::vector<bool> m(c.L);
    for (int64_t i = 0; i < c.L; ++i) m[i] = i % 3 != 0;
    o.attn_mask = from_vector(m, {c.L, 1}, d);
  } else if (c.mask == Case::Mask::float_b1ls) {
    o.attn_mask = filled(d, {c.B, 1, c.L, c.S}, 4, c.dtype);
  } else if (c.mask != Case::Mask::none) {
    const Shape shape = c.mask == Case::Mask::grad_bhls   ? Shape{c.B, c.H, c.L, c.S}
                        : c.mask == Case::Mask::grad_b1ls ? Shape{c.B, 1, c.L, c.S}
                        : c.mask == Case::Mask::grad_l1   ? Shape{c.L, 1}
                                                          : Shape{c.L, c.S};
    mask = filled(d, shape, 4, c.dtype).requires_grad_();
    o.attn_mask = mask;
  }
  if (c.lens != Case::Lens::none) {
    // Shorter than one tile, longer than one, and past the end (clamped).
    std::vector<int64_t> lens = {37, 200};
    o.valid_seq_len = c.lens == Case::Lens::left_i32
                          ? from_vector(std::vector<int32_t>{37, 200}, {2}, std::nullopt, d)
                          : from_vector(lens, {2}, std::nullopt, d);
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
  if (compiled) *compiled = compile_last_step();
  std::vector<Tensor> results = {out, q.grad(), k.grad(), v.grad()};
  for (const Tensor& t : {probs, mask.defined() ? mask.grad() : Tensor{}, keep})
    if (t.defined()) results.push_back(t);
  std::vector<std::vector<float>> r;
  for (const Tensor& t : results) r.push_back(to(t, DType::f32).to_vector<float>());
  return r;
}

Compiled compile_last_step() {
  Compiled c;
  const StepRecord& step = Tracer::get().last_step();
  if (!step.graph) return {{"<no step recorded>"}, 0};
  for (const GraphNode& n : step.graph->nodes)
    c.attention_nodes += n.op == OpKind::sdpa || n.op == OpKind::sdpa_grad;
  auto compiled =
      compile_graph(*step.graph, **BackendRegistry::get(DeviceType::xla), {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {{"<compile failed>"}, 0};
  auto* xla = dynamic_cast<xla::XlaExecutable*>(compiled->executable.get());
  if (!xla) return {{"<not an xla executable>"}, 0};
  c.callouts = xla->callout_names();
  return c;
}

class XlaAttention : public ::testing::TestWithParam<Case> {};

/// xla's results within the tolerance of ref's; a dropout mask exactly.
void expect_refs_values(const Case& c, const std::vector<std::vector<float>>& xla,
                        const std::vector<std::vector<float>>& ref);

TEST_P(XlaAttention, NoCalloutAndRefsValues) {
  const Case& c = GetParam();
  std::vector<std::vector<float>> xla, ref;
  {
    RecordSteps record;
    Compiled compiled;
    xla = run(c, kXla, &compiled);
    EXPECT_EQ(compiled.attention_nodes, 2) << "the step should hold sdpa and sdpa_grad";
    EXPECT_THAT(compiled.callouts, IsEmpty());
  }
  ref = run(c, kRef);
  expect_refs_values(c, xla, ref);
}

void expect_refs_values(const Case& c, const std::vector<std::vector<float>>& xla,
                        const std::vector<std::vector<float>>& ref) {
  const double rtol = c.dtype == DType::bf16 ? 2e-2 : 1e-4;
  std::vector<std::string> names = {"out", "dq", "dk", "dv"};
  if (c.probs) names.push_back("probs");
  if (c.mask >= Case::Mask::grad_bhls) names.push_back("dmask");
  const bool has_keep = c.probs && c.dropout > 0;
  if (has_keep) names.push_back("dropout mask");
  ASSERT_EQ(xla.size(), names.size());
  ASSERT_EQ(ref.size(), names.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    ASSERT_EQ(xla[r].size(), ref[r].size()) << names[r];
    if (has_keep && r + 1 == ref.size()) {
      EXPECT_EQ(xla[r], ref[r]) << names[r];
      continue;
    }
    double largest = 0;
    for (float x : ref[r]) largest = std::max(largest, std::fabs(double{x}));
    const double tol = rtol * std::max(largest, 1e-2);
    int64_t bad = 0;
    for (size_t i = 0; i < ref[r].size(); ++i)
      if (!(std::fabs(double{xla[r][i]} - ref[r][i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << names[r] << "[" << i << "] = " << xla[r][i] << ", ref " << ref[r][i]
                      << " (tolerance " << tol << ")";
    EXPECT_EQ(bad, 0) << names[r];
  }
}

// Attention is a row function over the batch-heads, which the step
// function splits over the OpenMP threads: each batch-head is computed as
// one thread computes it, so an uneven split (6 batch-heads over 4
// threads) gives 1 thread's values bit for bit, with causal masking,
// valid_seq_len and dropout (whose Philox counters follow the batch-head,
// not the thread); and with returned and saved probabilities, the dropout
// mask and a mask gradient of its own per batch-head, or one shared by the
// heads (whose batch-heads add into the same elements, so they stay on one
// thread, in order).
TEST(XlaAttentionThreads, BatchHeadsSplitOverThreadsGiveOneThreadsValuesBitForBit) {
  Case plain;
  plain.B = 2;
  plain.H = 3;
  plain.causal = true;
  plain.dropout = 0.2;
  plain.lens = Case::Lens::right;
  Case own = plain;
  own.causal = false; // a mask and is_causal do not go together
  own.probs = own.saved = true;
  own.mask = Case::Mask::grad_bhls;
  Case shared = own;
  shared.mask = Case::Mask::grad_b1ls;
  Case own_bf16 = own; // its mask gradient sums in the step's scratch
  own_bf16.dtype = DType::bf16;
  const int threads = omp_get_max_threads();
  for (const Case& c : {plain, own, shared, own_bf16}) {
    omp_set_num_threads(1);
    const std::vector<std::vector<float>> one = run(c, kXla);
    omp_set_num_threads(4);
    const std::vector<std::vector<float>> four = run(c, kXla);
    ASSERT_EQ(one.size(), four.size());
    for (size_t r = 0; r < one.size(); ++r) EXPECT_EQ(four[r], one[r]) << "result " << r;
  }
  omp_set_num_threads(threads);
}


Case with(std::string name, void (*set)(Case&)) {
  Case c;
  c.name = std::move(name);
  set(c);
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    Options, XlaAttention,
    ::testing::Values(
        with("plain", [](Case&) {}), with("causal", [](Case& c) { c.causal = true; }),
        with("causal_square", [](Case& c) { c.causal = true, c.S = c.L = 130; }),
        with("bool_mask", [](Case& c) { c.mask = Case::Mask::bool_ls; }),
        with("float_mask_dropout",
             [](Case& c) { c.mask = Case::Mask::float_b1ls, c.dropout = 0.1; }),
        with("dropout", [](Case& c) { c.dropout = 0.3; }),
        with("dropout_all", [](Case& c) { c.dropout = 1.0, c.L = 9, c.S = 11; }),
        with("valid_len_right_causal",
             [](Case& c) { c.lens = Case::Lens::right, c.causal = true, c.S = c.L = 100; }),
        with("valid_len_left", [](Case& c) { c.lens = Case::Lens::left, c.S = c.L = 100; }),
        with("valid_len_left_i32_mask",
             [](Case& c) { c.lens = Case::Lens::left_i32, c.mask = Case::Mask::bool_ls; }),
        with("everything",
             [](Case& c) {
               c.causal = true, c.dropout = 0.2;
               c.lens = Case::Lens::right, c.E = 64, c.Ev = 64;
             }),
        with("head_dim_1", [](Case& c) { c.E = c.Ev = 1, c.L = 3, c.S = 5; }),
        with("bf16", [](Case& c) { c.dtype = DType::bf16; }),
        with("bf16_causal_dropout_left",
             [](Case& c) {
               c.dtype = DType::bf16, c.causal = true, c.dropout = 0.25;
               c.lens = Case::Lens::left, c.S = c.L = 100;
             }),
        with("bf16_float_mask",
             [](Case& c) { c.dtype = DType::bf16, c.mask = Case::Mask::float_b1ls; }),
        // Nodes with [L, S] results or operands (XlaAttentionProbs.cpp).
        with("probs", [](Case& c) { c.probs = true; }),
        with("probs_causal_dropout_left",
             [](Case& c) {
               c.probs = true, c.causal = true, c.dropout = 0.2;
               c.lens = Case::Lens::left, c.L = c.S = 100;
             }),
        with("probs_bool_mask_dropout",
             [](Case& c) { c.probs = true, c.mask = Case::Mask::bool_ls, c.dropout = 0.3; }),
        with("probs_dropout_all",
             [](Case& c) { c.probs = true, c.dropout = 1.0, c.L = 9, c.S = 11; }),
        with("probs_bf16_causal",
             [](Case& c) { c.probs = true, c.dtype = DType::bf16, c.causal = true; }),
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
        with("probs_saved_mask_grad_dropout_right",
             [](Case& c) {
               c.probs = true, c.saved = true, c.dropout = 0.2;
               c.mask = Case::Mask::grad_bhls, c.lens = Case::Lens::right;
             }),
        // Row groups of 4 whose rows see different causal key ends, then a
        // tail of 3 rows, in the probabilities and saved-probabilities passes.
        with("probs_saved_causal_dropout_tail",
             [](Case& c) {
               c.probs = true, c.saved = true, c.causal = true, c.dropout = 0.2;
               c.L = c.S = 71;
             }),
        // Masks not contiguous in the keys: the per-key mask and mask
        // gradient loops rather than whole lanes.
        with("probs_saved_bool_mask_key_broadcast",
             [](Case& c) {
               c.probs = true, c.saved = true, c.dropout = 0.1;
               c.mask = Case::Mask::bool_l1;
             }),
        with("probs_saved_mask_grad_key_broadcast",
             [](Case& c) {
               c.probs = true, c.saved = true, c.dropout = 0.1;
               c.mask = Case::Mask::grad_l1;
             }),
        // bf16 mask gradients: f32 sums in the step's scratch, one rounding.
        with("bf16_mask_grad_per_batch_head",
             [](Case& c) { c.dtype = DType::bf16, c.mask = Case::Mask::grad_bhls; }),
        with("bf16_mask_grad_shared_by_heads_dropout",
             [](Case& c) {
               c.dtype = DType::bf16, c.mask = Case::Mask::grad_b1ls, c.dropout = 0.1;
             }),
        with("bf16_mask_grad_ls_left_saved",
             [](Case& c) {
               c.dtype = DType::bf16, c.mask = Case::Mask::grad_ls, c.saved = true;
               c.lens = Case::Lens::left, c.L = c.S = 100;
             }),
        // dq's f32 sums (L x E = 1.2 MB) live in the step's scratch: on the
        // stack (its 1 MiB) this backward was a callout.
        with("bf16_long_rows_dq_sums_in_scratch",
             [](Case& c) {
               c.dtype = DType::bf16, c.B = 1, c.H = 1, c.L = c.S = 600, c.E = c.Ev = 512;
               c.causal = true;
             })),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

} // namespace
} // namespace mstep
