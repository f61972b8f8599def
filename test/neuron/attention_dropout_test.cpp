// Attention with dropout on the simulated NeuronCore: the sdpa and
// sdpa_grad nodes with an RNG state operand lowered (the keep mask drawn on
// chip by GpSimd philox_uniform, AttentionDropout.h) against ref's kernels,
// which draw Philox::uniform(seed, state offset + node offset, flat index
// of (b, i, j)) per probability. p = 0.5 everywhere but one case, so a mask
// that differs from ref's in one position moves that position's output
// (its probability doubled or zeroed) by far more than the tolerance; the
// forward with v = the identity (out = the dropped probabilities
// themselves) checks every position of the mask; a different node offset
// must give a different result. f32 and bf16; causal (GPT-mini's bf16
// [.., 256, 64]); valid_seq_len; an attn_mask; the backward's two paths
// (pass 2 reusing pass 1's P and dP: every Q tile's keys in one 256-key
// chunk; and recomputing them per key block: 600 keys). Tolerances: the
// conformance suite's for sdpa (AttentionRefCheck.h: f32 rtol 1e-4, atol
// 1e-5; bf16 4e-2 both); values ref gives as exactly 0 must be exactly 0.
#include <cmath>
#include <string>

#include "AttentionRefCheck.h"
#include "LoweringTestUtil.h"
#include "gmock/gmock.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using testing::Buffers;
using testing::expect_lowered_matches_ref;
using testing::host_fallbacks;
using testing::types_of;

struct Case {
  int64_t batch = 2, heads = 2, L = 200, S = 200, E = 16, Ev = 16;
  DType dtype = DType::f32;
  bool causal = false;
  double p = 0.5;
  int64_t seed = 1234, state_offset = 77, node_offset = 5;
  std::vector<int64_t> lens; ///< valid_seq_len (i64) when not empty: batch of them
  bool bool_mask = false;    ///< an [L, S] bool attn_mask (every 7th key excluded)
  bool identity_v = false;   ///< v [S, S] = I: the output is the dropped probabilities
  double scale = 0.25;
};

void set_attr(GraphNode& n, AttrName name, AttrValue v) {
  for (Attr& a : n.attrs)
    if (a.name == name) a.value = v;
}

/// An sdpa (or sdpa_grad) node over q [B, H, L, E], k [B, H, S, E], v [B,
/// H, S, Ev] [, attn_mask] [, valid_seq_len [B]] and the RNG state.
GraphNode dropout_node(const Case& c, bool backward) {
  const TensorType q{Shape({c.batch, c.heads, c.L, c.E}), c.dtype};
  const TensorType k{Shape({c.batch, c.heads, c.S, c.E}), c.dtype};
  const TensorType v{Shape({c.batch, c.heads, c.S, c.Ev}), c.dtype};
  const TensorType out{Shape({c.batch, c.heads, c.L, c.Ev}), c.dtype};
  GraphNode n{backward ? OpKind::sdpa_grad : OpKind::sdpa, {}, {}, {out}, nullptr};
  if (backward) n.results = {q, k, v};
  const uint32_t operands = 4 + backward + c.bool_mask + !c.lens.empty();
  for (uint32_t i = 0; i < operands; ++i) n.operands.push_back(ValueRef{i, 0});
  n.attrs = testing::sdpa_attrs(c.causal, c.scale, c.bool_mask, !c.lens.empty(), false);
  set_attr(n, AttrName::dropout_p, AttrValue(c.p));
  set_attr(n, AttrName::offset, AttrValue(c.node_offset));
  return n;
}

/// [grad_out,] q, k, v in [-1, 1] (v = I with identity_v) [, the mask] [,
/// the lengths], the RNG state (seed, state_offset).
Buffers inputs(const Case& c, const GraphNode& node, bool backward) {
  Buffers in;
  unsigned seed = 90;
  const TensorType out = backward ? TensorType{Shape({c.batch, c.heads, c.L, c.Ev}), c.dtype}
                                  : node.results[0];
  std::vector<TensorType> types = {out, {Shape({c.batch, c.heads, c.L, c.E}), c.dtype},
                                   {Shape({c.batch, c.heads, c.S, c.E}), c.dtype},
                                   {Shape({c.batch, c.heads, c.S, c.Ev}), c.dtype}};
  if (!backward) types.erase(types.begin());
  for (const TensorType& t : types)
    in.push_back(testing::buffer(t, testing::random_values(t.numel(), -1, 1, seed++)));
  if (c.identity_v) {
    std::vector<float> eye(types.back().numel(), 0.0f);
    for (int64_t x = 0; x < types.back().numel(); ++x)
      eye[x] = (x / c.Ev) % c.S == x % c.Ev ? 1.0f : 0.0f;
    in.back() = testing::buffer(types.back(), eye);
  }
  if (c.bool_mask) {
    auto m = std::make_shared<host::HostBuffer>(TensorType{Shape({c.L, c.S}), DType::boolean});
    for (int64_t x = 0; x < c.L * c.S; ++x) m->data<bool>()[x] = x % c.S % 7 != 3;
    in.push_back(m);
  }
  if (!c.lens.empty()) {
    auto len = std::make_shared<host::HostBuffer>(
        TensorType{Shape({static_cast<int64_t>(c.lens.size())}), DType::i64});
    std::copy(c.lens.begin(), c.lens.end(), len->data<int64_t>());
    in.push_back(len);
  }
  auto state = std::make_shared<host::HostBuffer>(TensorType{Shape({2}), DType::i64});
  state->data<int64_t>()[0] = c.seed;
  state->data<int64_t>()[1] = c.state_offset;
  in.push_back(state);
  return in;
}

void check(const Case& c, bool forward_only = false) {
  for (bool backward : {false, true}) {
    if (backward && forward_only) continue;
    SCOPED_TRACE(backward ? "sdpa_grad" : "sdpa");
    const GraphNode node = dropout_node(c, backward);
    const Buffers in = inputs(c, node, backward);
    expect_lowered_matches_ref(node, in, c.dtype, /*not_all_zero=*/true);
  }
}

TEST(NeuronAttentionDropout, F32) { check({}); }
TEST(NeuronAttentionDropout, Bf16) { check({.dtype = DType::bf16}); }
// GPT-mini's attention (bf16 [.., 256, 64], causal) and its dropout rate.
TEST(NeuronAttentionDropout, Bf16CausalGptMiniShape) {
  check({.batch = 1, .L = 256, .S = 256, .E = 64, .Ev = 64, .dtype = DType::bf16, .causal = true,
         .p = 0.1, .node_offset = 3 * 8 * 4 * 256 * 256});
}
TEST(NeuronAttentionDropout, F32Causal) { check({.causal = true}); }
// Causal with a scale that is not positive: masked in SBUF by GpSimd.
TEST(NeuronAttentionDropout, F32CausalNegativeScale) { check({.causal = true, .scale = -0.3}); }
TEST(NeuronAttentionDropout, F32ValidLen) { check({.lens = {150, 70}}); }
TEST(NeuronAttentionDropout, Bf16CausalValidLen) {
  check({.dtype = DType::bf16, .causal = true, .lens = {200, 33}});
}
TEST(NeuronAttentionDropout, F32BoolMask) { check({.bool_mask = true}); }
// 600 keys: the forward's two key chunks, the backward's pass 2 per key
// block (its keep factors drawn again there).
TEST(NeuronAttentionDropout, F32TwoKeyChunks) {
  check({.batch = 1, .heads = 2, .L = 130, .S = 600, .E = 32, .Ev = 32});
}
TEST(NeuronAttentionDropout, Bf16CausalTwoKeyChunks) {
  check({.batch = 1, .heads = 1, .L = 600, .S = 600, .E = 32, .Ev = 32, .dtype = DType::bf16,
         .causal = true});
}
// Seed and offsets past 32 bits: the counter's high words.
TEST(NeuronAttentionDropout, LargeSeedAndOffsets) {
  check({.seed = int64_t{0x7123456789abcdef}, .state_offset = int64_t{0x1ffffff00},
         .node_offset = int64_t{1} << 33});
}

// v = I: out[b, h, i, :] is row i's dropped probabilities, so every
// position of the mask is compared with ref's (a kept probability is about
// 2 / 128 here, far above the tolerance; a dropped one must be exactly 0).
TEST(NeuronAttentionDropout, EveryPositionOfTheMaskIsRefs) {
  const Case c{.L = 128, .S = 128, .Ev = 128, .identity_v = true};
  const GraphNode node = dropout_node(c, false);
  const Buffers in = inputs(c, node, false);
  expect_lowered_matches_ref(node, in, c.dtype, true);
  absl::StatusOr<Buffers> want = testing::run_ref(node, in);
  ASSERT_TRUE(want.ok()) << want.status();
  int64_t dropped = 0;
  for (int64_t x = 0; x < (*want)[0]->type().numel(); ++x) dropped += testing::at(*(*want)[0], x) == 0;
  EXPECT_NEAR(double(dropped) / double((*want)[0]->type().numel()), 0.5, 0.02);
}

// Another node offset (or state offset) draws another mask: the results
// differ from the first offset's by far more than the tolerance.
TEST(NeuronAttentionDropout, AnotherOffsetGivesAnotherMask) {
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "sdpa_grad" : "sdpa");
    const Case a{};
    Case b = a;
    b.node_offset += 1;
    const GraphNode na = dropout_node(a, backward), nb = dropout_node(b, backward);
    const Buffers in = inputs(a, na, backward);
    absl::StatusOr<Buffers> ga = testing::run_lowered_all(na, in);
    absl::StatusOr<Buffers> gb = testing::run_lowered_all(nb, in);
    ASSERT_TRUE(ga.ok() && gb.ok());
    for (size_t r = 0; r < ga->size(); ++r) {
      int64_t apart = 0;
      const int64_t n = (*ga)[r]->type().numel();
      for (int64_t x = 0; x < n; ++x)
        apart += std::abs(testing::at(*(*ga)[r], x) - testing::at(*(*gb)[r], x)) > 1e-2;
      EXPECT_GT(apart, n / 2) << "result " << r;
    }
  }
}

// The RNG state is the program's last HBM tensor, bound to the operand
// after the lengths; the node runs on chip (no host fallback).
TEST(NeuronAttentionDropout, RngStateIsTheLastHbmTensor) {
  const Case c{.lens = {3, 4}};
  const GraphNode node = dropout_node(c, true);
  const Buffers in = inputs(c, node, true);
  const std::vector<TensorType> types = types_of(in);
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->program.hbm.back().name, "rng_state");
  EXPECT_EQ(low->program.hbm.back().elements, 4);
  EXPECT_EQ(low->hbm_binding, (std::vector<int32_t>{0, 1, 2, 3, -1, -2, -3, 4, 5}));
  EXPECT_EQ(host_fallbacks(node, types), 0u);
  EXPECT_EQ(host_fallbacks(dropout_node(c, false), types_of(inputs(c, dropout_node(c, false), false))),
            0u);
}

// p = 0 with an RNG operand keeps every probability: the program without
// dropout (no draw), the same results as ref.
TEST(NeuronAttentionDropout, PZeroIsTheProgramWithoutDropout) {
  const Case c{.p = 0.0};
  const GraphNode node = dropout_node(c, false);
  const Buffers in = inputs(c, node, false);
  absl::StatusOr<LoweredOp> low = lower_node(node, types_of(in));
  ASSERT_TRUE(low.ok()) << low.status();
  for (const Instruction& inst : low->program.instructions)
    EXPECT_NE(inst.opcode, Opcode::philox_uniform);
  expect_lowered_matches_ref(node, in, c.dtype, true);
}

// The dropout tiles fit next to the largest resident operands: wherever
// the program without dropout lowers, the one with it passes the
// validator (SBUF capacity at every point) too.
TEST(NeuronAttentionDropout, LargeShapesValidate) {
  int checked = 0;
  for (const Case& c : {Case{.batch = 1, .heads = 1, .L = 4096, .S = 4096, .E = 128, .Ev = 128,
                             .dtype = DType::bf16, .causal = true},
                        Case{.batch = 1, .heads = 2, .L = 2048, .S = 2048, .E = 64, .Ev = 64},
                        Case{.batch = 1, .heads = 1, .L = 300, .S = 8192, .E = 64, .Ev = 64,
                             .dtype = DType::bf16}})
    for (bool backward : {false, true}) {
      SCOPED_TRACE(::testing::Message() << (backward ? "sdpa_grad" : "sdpa") << " L " << c.L
                                        << " S " << c.S << " " << dtype_name(c.dtype));
      Case plain = c;
      plain.p = 0;
      std::vector<TensorType> types;
      for (const TensorType& t : types_of(inputs(c, dropout_node(c, backward), backward)))
        types.push_back(t);
      if (!lower_node(dropout_node(plain, backward), types).ok()) continue;
      absl::StatusOr<LoweredOp> low = lower_node(dropout_node(c, backward), types);
      ASSERT_TRUE(low.ok()) << low.status();
      EXPECT_TRUE(validate(low->program).ok()) << validate(low->program);
      ++checked;
    }
  EXPECT_EQ(checked, 6); // each lowers without dropout
}

// What stays on the host, counted, with the reason: the returned dropout
// mask or probabilities ([..., L, S] results), p = 1, a wrong RNG state.
TEST(NeuronAttentionDropout, Refusals) {
  const Case c{};
  GraphNode node = dropout_node(c, false);
  const Buffers in = inputs(c, node, false);
  const std::vector<TensorType> types = types_of(in);
  GraphNode with_mask = node;
  set_attr(with_mask, AttrName::return_mask, AttrValue(int64_t{1}));
  with_mask.results.push_back(
      TensorType{Shape({c.batch, c.heads, c.L, c.S}), DType::boolean});
  EXPECT_THAT(testing::refusal(with_mask, types), HasSubstr("dropout mask"));
  EXPECT_EQ(host_fallbacks(with_mask, types), 1u);
  GraphNode p1 = node;
  set_attr(p1, AttrName::dropout_p, AttrValue(1.0));
  EXPECT_THAT(testing::refusal(p1, types), HasSubstr("is not in (0, 1)"));
  std::vector<TensorType> bad_state = types;
  bad_state.back() = TensorType{Shape({3}), DType::i64};
  EXPECT_THAT(testing::refusal(node, bad_state), HasSubstr("is not i64 [2]"));
}

} // namespace
} // namespace mstep::neuron
