// Attention inside the xla step function (lib/backends/xla/
// XlaAttentionLoops.cpp): a training step with sdpa and its backward
// (sdpa_grad) compiles with NO callout across the option matrix (causal,
// bool and floating masks, dropout, valid_seq_len left and right, f32 and
// bf16, several Q and K/V tiles), and its output and the gradients of q, k
// and v equal the ref backend's within the cpu flash kernel's tolerance
// (test/unit/cpu_flash_attention_test.cpp: 1e-4 f32, 2e-2 bf16, relative
// to the largest reference magnitude). Dropout draws the same Philox keep
// mask as ref (the same seed), so the values agree with it too. Nodes with
// [L, S] results or operands: xla_attention_probs_test.
#include <algorithm>
#include <cmath>
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
  enum class Mask { none, bool_ls, float_b1ls } mask = Mask::none;
  double dropout = 0;
  enum class Lens { none, right, left, left_i32 } lens = Lens::none;
};

/// The last step's graph compiled for xla: the names of its callouts, and
/// how many sdpa and sdpa_grad nodes it has.
struct Compiled {
  std::vector<std::string> callouts;
  int attention_nodes = 0;
};
Compiled compile_last_step();

/// out, dq, dk, dv of sum(out * w) on `d`, as f32 vectors; `compiled`, when
/// given, gets the step's graph compiled for xla.
std::vector<std::vector<float>> run(const Case& c, Device d, Compiled* compiled = nullptr) {
  Tensor q = filled(d, {c.B, c.H, c.L, c.E}, 1, c.dtype).requires_grad_();
  Tensor k = filled(d, {c.B, c.H, c.S, c.E}, 2, c.dtype).requires_grad_();
  Tensor v = filled(d, {c.B, c.H, c.S, c.Ev}, 3, c.dtype).requires_grad_();
  SdpaOptions o;
  o.is_causal = c.causal;
  o.dropout_p = c.dropout;
  if (c.mask == Case::Mask::bool_ls) {
    // Every third key hidden, and row 5 attends to nothing (its output and
    // gradients are zero).
    std::vector<bool> m(c.L * c.S);
    for (int64_t i = 0; i < c.L; ++i)
      for (int64_t j = 0; j < c.S; ++j) m[i * c.S + j] = i != 5 && (i + j) % 3 != 0;
    o.attn_mask = from_vector(m, {c.L, c.S}, d);
  } else if (c.mask == Case::Mask::float_b1ls) {
    o.attn_mask = filled(d, {c.B, 1, c.L, c.S}, 4, c.dtype);
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
  Tensor out = scaled_dot_product_attention(q, k, v, o);
  sum(to(out, DType::f32) * filled(d, out.shape(), 5)).backward();
  mark_step();
  if (compiled) *compiled = compile_last_step();
  std::vector<std::vector<float>> r;
  for (const Tensor& t : {out, q.grad(), k.grad(), v.grad()})
    r.push_back(to(t, DType::f32).to_vector<float>());
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
  const double rtol = c.dtype == DType::bf16 ? 2e-2 : 1e-4;
  const char* names[] = {"out", "dq", "dk", "dv"};
  ASSERT_EQ(xla.size(), ref.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    ASSERT_EQ(xla[r].size(), ref[r].size()) << names[r];
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
// not the thread).
TEST(XlaAttentionThreads, BatchHeadsSplitOverThreadsGiveOneThreadsValuesBitForBit) {
  Case c;
  c.B = 2;
  c.H = 3;
  c.causal = true;
  c.dropout = 0.2;
  c.lens = Case::Lens::right;
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<std::vector<float>> one = run(c, kXla);
  omp_set_num_threads(4);
  const std::vector<std::vector<float>> four = run(c, kXla);
  omp_set_num_threads(threads);
  ASSERT_EQ(one.size(), four.size());
  for (size_t r = 0; r < one.size(); ++r) EXPECT_EQ(four[r], one[r]) << "result " << r;
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
             [](Case& c) { c.dtype = DType::bf16, c.mask = Case::Mask::float_b1ls; })),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

} // namespace
} // namespace mstep
