// The cpu backend's flash attention kernels (sdpa, sdpa_grad) against the
// ref kernels, on hand-built one-node TraceGraphs and the same random
// inputs: causal or not, bool and floating masks (and their gradient),
// valid_seq_len with left and right padding, dropout (the same Philox
// mask), returned probabilities and dropout mask, recompute off (saved
// probabilities), odd sizes, bf16, and an S = 1024 case whose scratch must
// grow linearly in S.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "lib/backends/cpu/FlashAttention.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::cpu {
namespace {

using host::HostBuffer;
using BufferList = std::vector<std::shared_ptr<HostBuffer>>;

/// One sdpa configuration; the backward uses the same one.
struct SdpaCase {
  Shape q;  // [..., L, E]
  int64_t S = 0, Ev = 0;
  DType dtype = DType::f32;
  bool causal = false;
  std::optional<TensorType> mask{};  // bool or floating, broadcastable to [..., L, S]
  bool mask_grad = false;          // the backward also returns dmask
  double dropout = 0;
  std::vector<int64_t> lens{};  // valid_seq_len, one per dim-0 index
  bool left_pad = false;
  bool return_probs = false, return_mask = false;
  bool recompute = true;
  uint32_t seed = 1;
};

/// A TraceGraph of parameters feeding one node, and the operands' data.
struct NodeUnderTest {
  TraceGraph graph;
  uint32_t index = 0;
  BufferList operands;
  const GraphNode& node() const { return graph.nodes[index]; }
};

NodeUnderTest make_node(OpKind op, AttrList attrs, BufferList operands, ResultTypes results) {
  NodeUnderTest t;
  GraphNode node{op, std::move(attrs), {}, std::move(results), nullptr};
  for (uint32_t i = 0; i < operands.size(); ++i) {
    const TensorType& type = operands[i]->type();
    t.graph.nodes.push_back(
        GraphNode{OpKind::parameter, {{AttrName::index, int64_t{i}}}, {}, {type}, nullptr});
    t.graph.input_types.push_back(type);
    node.operands.push_back(ValueRef{i, 0});
  }
  t.index = static_cast<uint32_t>(t.graph.nodes.size());
  t.graph.nodes.push_back(std::move(node));
  t.graph.outputs.push_back(ValueRef{t.index, 0});
  t.operands = std::move(operands);
  return t;
}

/// Result buffers of the node, filled with NaN (0xFF bytes) so an element
/// a kernel forgets to write fails the comparison.
BufferList allocate_results(const NodeUnderTest& t) {
  BufferList results;
  for (const TensorType& type : t.node().results) {
    auto buf = std::make_shared<HostBuffer>(type);
    std::memset(buf->bytes(), 0xFF, type.bytes());
    results.push_back(std::move(buf));
  }
  return results;
}

BufferList run_ref(const NodeUnderTest& t) {
  static const ref::KernelTable table = [] {
    ref::KernelTable k{};
    ref::register_attention_kernels(k);
    ref::register_attention_grad_kernels(k);
    return k;
  }();
  BufferList results = allocate_results(t);
  std::vector<const HostBuffer*> in;
  std::vector<HostBuffer*> out;
  for (const auto& b : t.operands) in.push_back(b.get());
  for (const auto& b : results) out.push_back(b.get());
  const absl::Status status =
      table[static_cast<int>(t.node().op)](ref::KernelArgs{t.node(), in, out});
  EXPECT_TRUE(status.ok()) << status;
  return results;
}

std::unique_ptr<FlashAttentionKernel> make_kernel(const NodeUnderTest& t) {
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel =
      make_flash_attention_kernel(KernelRequest{t.graph, t.index});
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok() || !*kernel) return nullptr;
  auto* flash = dynamic_cast<FlashAttentionKernel*>(kernel->get());
  EXPECT_NE(flash, nullptr);
  kernel->release();
  return std::unique_ptr<FlashAttentionKernel>(flash);
}

BufferList run_flash(const NodeUnderTest& t) {
  std::unique_ptr<FlashAttentionKernel> kernel = make_kernel(t);
  if (!kernel) {
    ADD_FAILURE() << "no flash kernel for " << op_name(t.node().op);
    return {};
  }
  BufferList results = allocate_results(t);
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const auto& b : t.operands) in.push_back(b->bytes());
  for (const auto& b : results) out.push_back(b->bytes());
  kernel->run(in.data(), out.data());
  return results;
}

float element(const HostBuffer& b, int64_t i) {
  if (b.type().dtype == DType::bf16) return static_cast<float>(b.data<BFloat16>()[i]);
  return b.data<float>()[i];
}

/// Every result equal: bool results exactly, floating ones within
/// rtol * max(max|ref|, 0.01) elementwise (the floor covers results that
/// are 0 up to round-off, such as the gradient of a mask broadcast over
/// keys: softmax ignores a per-row shift).
void expect_close(const BufferList& flash, const BufferList& ref, double rtol,
                  const std::string& what) {
  ASSERT_EQ(flash.size(), ref.size()) << what;
  for (size_t r = 0; r < ref.size(); ++r) {
    const HostBuffer& a = *flash[r];
    const HostBuffer& b = *ref[r];
    ASSERT_EQ(a.type(), b.type()) << what << " result " << r;
    if (b.type().dtype == DType::boolean) {
      int64_t mismatches = 0;
      for (int64_t i = 0; i < b.numel(); ++i) mismatches += a.data<bool>()[i] != b.data<bool>()[i];
      EXPECT_EQ(mismatches, 0) << what << " result " << r << " (bool)";
      continue;
    }
    double max_ref = 0;
    for (int64_t i = 0; i < b.numel(); ++i)
      max_ref = std::max(max_ref, std::fabs(double{element(b, i)}));
    const double tol = rtol * std::max(max_ref, 1e-2);
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < b.numel(); ++i) {
      const double x = element(a, i), y = element(b, i);
      if (!(std::fabs(x - y) <= tol)) {
        if (bad++ == 0) first_bad = i;
      }
    }
    EXPECT_EQ(bad, 0) << what << " result " << r << " " << b.type().to_string() << ": " << bad
                      << " elements off by more than " << tol << ", first at " << first_bad
                      << ": flash " << (first_bad >= 0 ? element(a, first_bad) : 0.f) << " ref "
                      << (first_bad >= 0 ? element(b, first_bad) : 0.f);
  }
}

std::shared_ptr<HostBuffer> random_buffer(TensorType type, std::mt19937& rng, float lo, float hi) {
  auto buf = std::make_shared<HostBuffer>(type);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < type.numel(); ++i) {
    if (type.dtype == DType::boolean)
      buf->data<bool>()[i] = dist(rng) < 0.8f * (hi - lo) + lo;  // 80 % attend
    else if (type.dtype == DType::bf16)
      buf->data<BFloat16>()[i] = BFloat16(dist(rng));
    else
      buf->data<float>()[i] = dist(rng);
  }
  return buf;
}

/// The forward's operands (q, k, v[, mask][, lens][, rng]) and attrs.
struct ForwardInputs {
  BufferList operands;
  AttrList attrs;
};

ForwardInputs forward_inputs(const SdpaCase& c) {
  std::mt19937 rng(c.seed);
  const int64_t r = c.q.rank();
  Shape k_shape(c.q.dims()), v_shape(c.q.dims());
  k_shape[r - 2] = c.S;
  v_shape[r - 2] = c.S;
  v_shape[r - 1] = c.Ev;
  ForwardInputs f;
  f.operands.push_back(random_buffer({c.q, c.dtype}, rng, -1.5f, 1.5f));
  f.operands.push_back(random_buffer({k_shape, c.dtype}, rng, -1.5f, 1.5f));
  f.operands.push_back(random_buffer({v_shape, c.dtype}, rng, -1.0f, 1.0f));
  if (c.mask) {
    auto mask = random_buffer(*c.mask, rng, -2.0f, 2.0f);
    if (c.mask->dtype == DType::f32)  // a few excluded positions in a float mask
      for (int64_t i = 0; i < mask->numel(); i += 7) mask->data<float>()[i] = -INFINITY;
    f.operands.push_back(mask);
  }
  if (!c.lens.empty()) {
    auto lens = std::make_shared<HostBuffer>(
        TensorType{Shape{static_cast<int64_t>(c.lens.size())}, DType::i64});
    for (size_t i = 0; i < c.lens.size(); ++i) lens->data<int64_t>()[i] = c.lens[i];
    f.operands.push_back(lens);
  }
  const int64_t offset = c.dropout > 0 ? 1000 : -1;
  if (c.dropout > 0) {
    auto state = std::make_shared<HostBuffer>(TensorType{Shape{2}, DType::i64});
    state->data<int64_t>()[0] = 0x1234567890abcdefLL + c.seed;
    state->data<int64_t>()[1] = 77;
    f.operands.push_back(state);
  }
  f.attrs = {{AttrName::is_causal, int64_t{c.causal}},
             {AttrName::scale, 1.0 / std::sqrt(static_cast<double>(c.q[r - 1]))},
             {AttrName::dropout_p, c.dropout},
             {AttrName::offset, offset},
             {AttrName::has_mask, int64_t{c.mask.has_value()}},
             {AttrName::has_valid_len, int64_t{!c.lens.empty()}},
             {AttrName::padding_side, int64_t{c.left_pad}},
             {AttrName::return_probs, int64_t{c.return_probs}},
             {AttrName::return_mask, int64_t{c.return_mask}},
             {AttrName::recompute, int64_t{c.recompute}}};
  return f;
}

NodeUnderTest forward_node(const SdpaCase& c) {
  ForwardInputs f = forward_inputs(c);
  Shape scores(c.q.dims()), out(c.q.dims());
  scores[scores.rank() - 1] = c.S;
  out[out.rank() - 1] = c.Ev;
  ResultTypes results = {{out, c.dtype}};
  if (c.return_probs) results.push_back({scores, c.dtype});
  if (c.return_mask) results.push_back({scores, DType::boolean});
  if (!c.recompute) results.push_back({scores, c.dtype});
  return make_node(OpKind::sdpa, std::move(f.attrs), std::move(f.operands), std::move(results));
}

/// sdpa_grad for the case; with recompute off its saved probabilities are
/// the ref forward's.
NodeUnderTest backward_node(const SdpaCase& c) {
  ForwardInputs f = forward_inputs(c);
  std::mt19937 rng(c.seed + 100);
  const TensorType out{Shape(c.q.dims()), c.dtype};
  TensorType grad_out = out;
  grad_out.shape[grad_out.shape.rank() - 1] = c.Ev;
  BufferList operands = {random_buffer(grad_out, rng, -1.0f, 1.0f)};
  operands.insert(operands.end(), f.operands.begin(), f.operands.end());
  if (!c.recompute) {
    SdpaCase forward = c;
    forward.return_probs = forward.return_mask = false;
    operands.push_back(run_ref(forward_node(forward)).back());
  }
  AttrList attrs;
  for (const Attr& a : f.attrs) {
    if (a.name == AttrName::return_probs)
      attrs.push_back({a.name, int64_t{0}});
    else if (a.name == AttrName::return_mask)
      attrs.push_back({a.name, int64_t{c.mask_grad}});
    else
      attrs.push_back(a);
  }
  ResultTypes results = {f.operands[0]->type(), f.operands[1]->type(), f.operands[2]->type()};
  if (c.mask_grad) results.push_back(*c.mask);
  return make_node(OpKind::sdpa_grad, std::move(attrs), std::move(operands), std::move(results));
}

double tolerance(const SdpaCase& c) { return c.dtype == DType::bf16 ? 2e-2 : 1e-4; }

void check_forward(const SdpaCase& c, const std::string& what) {
  NodeUnderTest t = forward_node(c);
  expect_close(run_flash(t), run_ref(t), tolerance(c), what + " (sdpa)");
}

void check_backward(const SdpaCase& c, const std::string& what) {
  NodeUnderTest t = backward_node(c);
  expect_close(run_flash(t), run_ref(t), tolerance(c), what + " (sdpa_grad)");
}

void check_both(const SdpaCase& c, const std::string& what) {
  check_forward(c, what);
  check_backward(c, what);
}

TEST(CpuFlashAttention, PlainAndCausal) {
  SdpaCase c{.q = {2, 3, 17, 16}, .S = 17, .Ev = 16};
  check_both(c, "plain");
  c.causal = true;
  check_both(c, "causal");
  // Causal with L != S keeps key j <= row i (top-left diagonal).
  check_both({.q = {2, 20, 32}, .S = 45, .Ev = 24, .causal = true}, "causal L < S");
  check_both({.q = {1, 2, 150, 64}, .S = 70, .Ev = 64, .causal = true}, "causal L > S");
}

TEST(CpuFlashAttention, OddSizes) {
  check_both({.q = {1, 1, 8}, .S = 1, .Ev = 8}, "S=1 L=1 E=8");
  check_both({.q = {3, 1, 8}, .S = 1, .Ev = 8, .causal = true}, "S=1 causal");
  check_both({.q = {2, 2, 33, 16}, .S = 33, .Ev = 64}, "S=33 E=16 Ev=64");
  check_both({.q = {2, 2, 33, 64}, .S = 33, .Ev = 8, .causal = true}, "S=33 E=64 Ev=8");
  check_both({.q = {5, 130, 24}, .S = 129, .Ev = 40}, "L=130 S=129 E=24 Ev=40");
  // One batch-head: the backward splits its key tiles over the threads.
  check_both({.q = {1, 200, 32}, .S = 300, .Ev = 32}, "one batch-head");
  check_both({.q = {1, 200, 32}, .S = 200, .Ev = 32, .causal = true}, "one batch-head causal");
}

TEST(CpuFlashAttention, Masks) {
  const Shape q = {2, 3, 40, 16};
  check_both({.q = q, .S = 70, .Ev = 16, .mask = TensorType{{40, 70}, DType::boolean}},
             "bool [L, S]");
  check_both({.q = q, .S = 70, .Ev = 16, .mask = TensorType{{2, 1, 40, 70}, DType::f32}},
             "float [B, 1, L, S]");
  check_both({.q = q, .S = 70, .Ev = 16, .mask = TensorType{{70}, DType::f32}}, "float [S]");
  check_both({.q = q, .S = 70, .Ev = 16, .mask = TensorType{{2, 3, 40, 1}, DType::boolean}},
             "bool [B, H, L, 1]");
}

TEST(CpuFlashAttention, MaskGradient) {
  const Shape q = {2, 3, 40, 16};
  // Per batch-head masks: the keys pass runs in parallel.
  check_backward({.q = q,
                  .S = 70,
                  .Ev = 16,
                  .mask = TensorType{{2, 3, 40, 70}, DType::f32},
                  .mask_grad = true},
                 "dmask [B, H, L, S]");
  // Broadcast over batch-heads: gradients from several batch-heads meet.
  check_backward(
      {.q = q, .S = 70, .Ev = 16, .mask = TensorType{{3, 40, 70}, DType::f32}, .mask_grad = true},
      "dmask [H, L, S]");
  check_backward({.q = q,
                  .S = 70,
                  .Ev = 16,
                  .mask = TensorType{{40, 1}, DType::f32},
                  .mask_grad = true,
                  .dropout = 0.25},
                 "dmask [L, 1] with dropout");
  check_backward({.q = {1, 1, 100, 16},
                  .S = 150,
                  .Ev = 16,
                  .mask = TensorType{{1, 1, 100, 150}, DType::f32},
                  .mask_grad = true},
                 "dmask one batch-head");
}

TEST(CpuFlashAttention, ValidSeqLen) {
  const Shape q = {3, 2, 100, 16};
  for (bool left : {false, true}) {
    const std::string side = left ? "left" : "right";
    // Lengths that are not tile multiples, a length of 1, one past S
    // (clamped) and 0 (everything padded).
    check_both({.q = q, .S = 100, .Ev = 16, .lens = {70, 1, 101}, .left_pad = left},
               side + " padding");
    check_both({.q = q, .S = 100, .Ev = 16, .causal = true, .lens = {37, 0, 65}, .left_pad = left},
               side + " padding causal");
    check_both({.q = q,
                .S = 100,
                .Ev = 16,
                .mask = TensorType{{100, 100}, DType::boolean},
                .lens = {99, 64, 2},
                .left_pad = left},
               side + " padding with mask");
  }
}

TEST(CpuFlashAttention, Dropout) {
  const Shape q = {2, 2, 77, 32};
  check_both({.q = q, .S = 77, .Ev = 32, .dropout = 0.2}, "dropout");
  check_both({.q = q, .S = 77, .Ev = 32, .causal = true, .dropout = 0.5, .lens = {50, 77}},
             "dropout causal padded");
  check_forward({.q = q,
                 .S = 77,
                 .Ev = 32,
                 .causal = true,
                 .dropout = 0.3,
                 .return_probs = true,
                 .return_mask = true},
                "dropout returning probs and mask");
  check_forward({.q = q, .S = 77, .Ev = 32, .return_mask = true}, "mask without dropout");
  check_both({.q = {1, 3, 16}, .S = 5, .Ev = 16, .dropout = 1.0}, "dropout p=1");
}

TEST(CpuFlashAttention, SavedProbabilities) {
  const Shape q = {2, 2, 70, 16};
  check_both({.q = q, .S = 90, .Ev = 16, .recompute = false}, "recompute off");
  check_both({.q = q,
              .S = 90,
              .Ev = 16,
              .causal = true,
              .dropout = 0.1,
              .lens = {60, 13},
              .left_pad = true,
              .return_probs = true,
              .recompute = false},
             "recompute off, causal, dropout, left padding, probs");
  check_both({.q = q,
              .S = 90,
              .Ev = 16,
              .mask = TensorType{{70, 90}, DType::f32},
              .return_probs = true,
              .return_mask = true,
              .recompute = false},
             "recompute off, float mask, probs and mask");
}

TEST(CpuFlashAttention, BFloat16) {
  check_both({.q = {2, 2, 65, 32},
              .S = 65,
              .Ev = 32,
              .dtype = DType::bf16,
              .causal = true,
              .dropout = 0.1,
              .lens = {40, 65}},
             "bf16 causal dropout padded");
  check_both({.q = {2, 50, 16},
              .S = 30,
              .Ev = 16,
              .dtype = DType::bf16,
              .mask = TensorType{{50, 30}, DType::bf16},
              .return_probs = true,
              .recompute = false},
             "bf16 float mask, recompute off");
}

TEST(CpuFlashAttention, LongSequenceUsesLinearScratch) {
  // GPT-style: causal, dropout, head dim 64, S = 1024.
  SdpaCase c{.q = {1, 2, 1024, 64}, .S = 1024, .Ev = 64, .causal = true, .dropout = 0.1};
  check_both(c, "S=1024");
  // Scratch never holds anything [L, S]: doubling S at most doubles it.
  auto scratch = [](const NodeUnderTest& t) { return make_kernel(t)->scratch_bytes(); };
  SdpaCase twice = c;
  twice.q = {1, 2, 2048, 64};
  twice.S = 2048;
  const size_t forward = scratch(forward_node(c)), backward = scratch(backward_node(c));
  EXPECT_EQ(scratch(forward_node(twice)), forward);  // tiles only
  EXPECT_LE(scratch(backward_node(twice)), 2 * backward);
}

TEST(CpuFlashAttention, DeclinesOtherNodes) {
  // Another op, and an f64 sdpa, are left to other kernels.
  SdpaCase c{.q = {2, 4, 8}, .S = 4, .Ev = 8};
  NodeUnderTest t = forward_node(c);
  t.graph.nodes[t.index].op = OpKind::add;
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel =
      make_flash_attention_kernel(KernelRequest{t.graph, t.index});
  ASSERT_TRUE(kernel.ok());
  EXPECT_EQ(*kernel, nullptr);

  ForwardInputs f = forward_inputs(c);
  for (auto& buf : f.operands)
    buf = std::make_shared<HostBuffer>(TensorType{buf->type().shape, DType::f64});
  NodeUnderTest f64 = make_node(OpKind::sdpa, f.attrs, f.operands, {{Shape{2, 4, 8}, DType::f64}});
  kernel = make_flash_attention_kernel(KernelRequest{f64.graph, f64.index});
  ASSERT_TRUE(kernel.ok());
  EXPECT_EQ(*kernel, nullptr);
}

TEST(CpuFlashAttention, RejectsOperandsThatDisagreeWithAttrs) {
  SdpaCase c{.q = {2, 4, 8}, .S = 4, .Ev = 8};
  ForwardInputs f = forward_inputs(c);
  f.operands.pop_back();  // v missing
  NodeUnderTest t = make_node(OpKind::sdpa, f.attrs, f.operands, {{Shape{2, 4, 8}, DType::f32}});
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel =
      make_flash_attention_kernel(KernelRequest{t.graph, t.index});
  ASSERT_FALSE(kernel.ok());
  EXPECT_NE(kernel.status().message().find("operands"), std::string::npos) << kernel.status();
}

}  // namespace
}  // namespace mstep::cpu
