// Attention with valid_seq_len on the simulated NeuronCore: the sdpa and
// sdpa_grad nodes lowered (the lengths read on chip from HBM, ValidLength
// in AttentionTiles.h) against ref's kernels, the oracle the conformance
// suite checks against PyTorch. Right and left padding; lengths 0, 1,
// partial Q tiles (70, 150 of 200 rows), full, past the end and negative
// (ref clamps them to [0, n]); causal and not; f32 and bf16; i32 and i64
// lengths; several heads per length; L != S, where causal left padding
// leaves valid rows no key. Tolerances: the conformance suite's for sdpa
// (test/unit/backend_conformance_test.cpp: f32 rtol 1e-4, atol 1e-5;
// bf16 at the attention cases' tol_scale 2: 4e-2 both); values ref gives
// as exactly 0 (the padded rows' outputs and dq, the padded keys' dk and
// dv) must be exactly 0. NaN and inf planted in the padded k and v
// positions (ref skips them) must not reach any result; a scale that is not
// positive with the key bias runs on chip too (no host fallback).
#include <algorithm>
#include <cmath>
#include <limits>

#include "AttentionRefCheck.h"
#include "LoweringTestUtil.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron {
namespace {

using testing::Buffers;

struct Case {
  int64_t heads = 2, L = 200, S = 200, E = 16;
  DType dtype = DType::f32;
  bool causal = true, left = false;
  std::vector<int64_t> lens;
  DType len_dtype = DType::i64;
  double scale = 0.25;
  /// NaN, +inf and -inf in turn in every padded key's k and v row and
  /// every padded query's q (and grad_out) row.
  bool poison_padding = false;
};

/// An sdpa (or sdpa_grad) node over q [B, H, L, E], k, v [B, H, S, E] and
/// valid_seq_len [B], B = lens.size(), with all the attrs ref reads.
GraphNode valid_len_node(const Case& c, bool backward) {
  const int64_t B = static_cast<int64_t>(c.lens.size());
  const TensorType q{Shape({B, c.heads, c.L, c.E}), c.dtype};
  const TensorType kv{Shape({B, c.heads, c.S, c.E}), c.dtype};
  GraphNode n{backward ? OpKind::sdpa_grad : OpKind::sdpa, {}, {}, {q}, nullptr};
  if (backward) n.results = {q, kv, kv};
  for (uint32_t i = 0; i < (backward ? 5u : 4u); ++i) n.operands.push_back(ValueRef{i, 0});
  n.attrs = testing::sdpa_attrs(c.causal, c.scale, false, true, c.left);
  return n;
}

std::shared_ptr<host::HostBuffer> lengths(const Case& c) {
  const TensorType t{Shape({static_cast<int64_t>(c.lens.size())}), c.len_dtype};
  auto b = std::make_shared<host::HostBuffer>(t);
  for (size_t i = 0; i < c.lens.size(); ++i) {
    if (c.len_dtype == DType::i64)
      b->data<int64_t>()[i] = c.lens[i];
    else
      b->data<int32_t>()[i] = static_cast<int32_t>(c.lens[i]);
  }
  return b;
}

/// q, k, v (and grad_out first for the backward) in [-1, 1], then the lengths.
Buffers inputs(const Case& c, const GraphNode& node, bool backward) {
  Buffers in;
  unsigned seed = 40;
  const TensorType q = node.results[0],
                   kv{Shape({static_cast<int64_t>(c.lens.size()), c.heads, c.S, c.E}), c.dtype};
  std::vector<TensorType> types = {q, q, kv, kv};
  if (!backward) types.erase(types.begin());
  for (const TensorType& t : types)
    in.push_back(testing::buffer(t, testing::random_values(t.numel(), -1, 1, seed++)));
  if (c.poison_padding) {
    const float poison[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    // Plants poison in the padded rows of `buf` ([B, heads, n, E]).
    auto plant = [&](host::HostBuffer& buf, int64_t n) {
      int64_t planted = 0;
      for (size_t bi = 0; bi < c.lens.size(); ++bi) {
        const int64_t len = std::clamp<int64_t>(c.lens[bi], 0, n);
        for (int64_t h = 0; h < c.heads; ++h)
          for (int64_t j = 0; j < n; ++j) {
            if (c.left ? j >= n - len : j < len) continue; // kept
            for (int64_t e = 0; e < c.E; ++e) {
              const int64_t i = ((static_cast<int64_t>(bi) * c.heads + h) * n + j) * c.E + e;
              const float x = poison[(j + e) % 3];
              if (c.dtype == DType::bf16)
                buf.data<BFloat16>()[i] = BFloat16(x);
              else
                buf.data<float>()[i] = x;
              ++planted;
            }
          }
      }
      return planted;
    };
    // k and v: the last two; q (and grad_out first) before them.
    int64_t keys = 0, queries = 0;
    for (size_t x = 0; x < in.size(); ++x)
      (x + 2 >= in.size() ? keys : queries) += plant(*in[x], x + 2 >= in.size() ? c.S : c.L);
    EXPECT_GT(keys, 0) << "no padded key to poison";
    EXPECT_GT(queries, 0) << "no padded query row to poison";
  }
  in.push_back(lengths(c));
  return in;
}

using testing::expect_attention_matches;
using testing::host_fallbacks;

void check(const Case& c) {
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "sdpa_grad" : "sdpa");
    const GraphNode node = valid_len_node(c, backward);
    const Buffers in = inputs(c, node, backward);
    testing::expect_lowered_matches_ref(node, in, c.dtype);
  }
}

// 200 rows: a full Q tile and a 72-row one; lengths 0, 1, 70 and 150
// (partial tiles), 200 (full), past the end and negative.
const std::vector<int64_t> kLens = {0, 1, 70, 150, 200, 1000, -3};

TEST(NeuronAttentionValidLen, F32RightCausal) { check({.lens = kLens}); }
TEST(NeuronAttentionValidLen, F32LeftCausal) { check({.left = true, .lens = kLens}); }
TEST(NeuronAttentionValidLen, F32RightNotCausalI32) {
  check({.causal = false, .lens = kLens, .len_dtype = DType::i32});
}
TEST(NeuronAttentionValidLen, F32LeftNotCausalHead64) {
  check({.heads = 1, .E = 64, .causal = false, .left = true, .lens = {150, 1, 0}});
}
TEST(NeuronAttentionValidLen, Bf16RightCausal) { check({.dtype = DType::bf16, .lens = kLens}); }
TEST(NeuronAttentionValidLen, Bf16LeftCausalI32) {
  check({.dtype = DType::bf16, .left = true, .lens = kLens, .len_dtype = DType::i32});
}
// L < S: causal with left padding leaves the first valid rows no key (row
// i keeps one only from S - len on): they give zeros, as in ref.
TEST(NeuronAttentionValidLen, F32LeftCausalMoreKeysThanRows) {
  check({.heads = 1, .L = 100, .S = 300, .left = true, .lens = {250, 230, 30}});
}
// 600 keys: two key chunks, the second (88 keys) wholly padding for the
// shorter lengths; L > S.
TEST(NeuronAttentionValidLen, Bf16RightTwoKeyChunks) {
  check({.heads = 1, .L = 130, .S = 600, .E = 32, .dtype = DType::bf16, .causal = false,
         .lens = {600, 512, 511, 5}});
}

// One batch-head's lengths feed the bias by a stride-0 DMA (every
// partition reads the lengths) and an int64 length is read as two int32
// words: the program, not the host, applies them.
TEST(NeuronAttentionValidLen, LengthsAreAnHbmTensorOfInt32Words) {
  const Case c{.lens = {3, 4}};
  const GraphNode node = valid_len_node(c, false);
  const Buffers in = inputs(c, node, false);
  std::vector<TensorType> types;
  for (const auto& b : in) types.push_back(b->type());
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  ASSERT_TRUE(low.ok()) << low.status();
  const HbmTensor& len = low->program.hbm.back();
  EXPECT_EQ(len.name, "valid_len");
  EXPECT_EQ(len.dtype, DType::i32);
  EXPECT_EQ(len.elements, 4);
  EXPECT_EQ(low->hbm_binding, (std::vector<int32_t>{0, 1, 2, -1, 3}));
}

// Right padding and causal need no key bias (a kept row i sees keys j <=
// i < len only), so any scale works, the scores then scaled into SBUF.
TEST(NeuronAttentionValidLen, F32RightCausalNegativeScale) {
  check({.heads = 1, .lens = {0, 1, 70, 150, 200}, .scale = -0.25});
}

// A scale that is not positive with the key bias (left padding, or right
// padding without causal): the scores are scaled into SBUF, the bias added
// there, and the backward's recomputed P zeroes the padded keys by a select.
TEST(NeuronAttentionValidLen, F32LeftCausalNegativeScale) {
  check({.heads = 1, .left = true, .lens = {0, 1, 70, 150, 200}, .scale = -0.25});
}
TEST(NeuronAttentionValidLen, F32RightNotCausalZeroScale) {
  check({.heads = 1, .causal = false, .lens = {0, 1, 70, 200}, .scale = 0.0});
}
TEST(NeuronAttentionValidLen, Bf16LeftNotCausalNegativeScale) {
  check({.dtype = DType::bf16, .causal = false, .left = true, .lens = kLens, .scale = -0.5});
}

// NaN and inf in every padded k and v position: the programs zero those
// rows on chip before the matmuls, so they reach neither the outputs nor
// the gradients (0 x NaN would be NaN), as in ref, which skips them. Left
// and right padding, causal and not, f32 and bf16, the key bias in PSUM and
// in SBUF (a negative scale).
TEST(NeuronAttentionValidLen, PoisonedPaddingF32RightCausal) {
  check({.lens = kLens, .poison_padding = true});
}
TEST(NeuronAttentionValidLen, PoisonedPaddingF32LeftCausal) {
  check({.left = true, .lens = kLens, .poison_padding = true});
}
TEST(NeuronAttentionValidLen, PoisonedPaddingF32RightNotCausal) {
  check({.causal = false, .lens = kLens, .len_dtype = DType::i32, .poison_padding = true});
}
TEST(NeuronAttentionValidLen, PoisonedPaddingBf16LeftNotCausal) {
  check({.dtype = DType::bf16, .causal = false, .left = true, .lens = kLens,
         .poison_padding = true});
}
TEST(NeuronAttentionValidLen, PoisonedPaddingBf16RightCausalTwoKeyChunks) {
  check({.heads = 1, .L = 130, .S = 600, .E = 32, .dtype = DType::bf16, .lens = {600, 512, 511, 5},
         .poison_padding = true});
}
TEST(NeuronAttentionValidLen, PoisonedPaddingF32LeftCausalMoreKeysThanRowsNegativeScale) {
  check({.heads = 1, .L = 100, .S = 300, .left = true, .lens = {250, 230, 30}, .scale = -0.25,
         .poison_padding = true});
}

int64_t count(const TileProgram& p, Opcode op) {
  int64_t n = 0;
  for (const Instruction& inst : p.instructions) n += inst.opcode == op;
  return n;
}

/// The Vector time of `p`'s selects (the padded keys zeroed) at the cost
/// model's rate: max(64, 60 + elements) cycles each at vector_ghz.
double select_ns(const TileProgram& p) {
  const CostParams params;
  double cycles = 0;
  for (const Instruction& inst : p.instructions)
    if (inst.opcode == Opcode::select)
      cycles += std::max(params.fixed_cycles, params.access_fixed_cycles +
                                                  static_cast<double>(inst.dst.free_elements()));
  return cycles / params.vector_ghz;
}

// The masking stays cheap next to the attention itself (cost model, the
// bench's GPT-mini attention shape: 32 batch-heads of 256 x 256, head dim
// 64, causal): with left padding one bf16 K = 1 matmul per score chunk
// (here one chunk per Q tile: 2 tiles x 32 heads; the backward's pass 1
// and pass 2 items: 2 + 3 per head), a bias row per batch-head and a
// column op per Q tile, no per-chunk Vector or GpSimd mask (forward /
// backward +25% / +7% in f32, +53% / +9% in bf16, the zeroing below and
// the forward's unpaired transposes included); with right padding no key
// bias at all, the same matmuls as without lengths but for those transposes. Zeroing the padded keys and query rows (NaN-safe) is
// one Vector select per batch-head on each of q, k, v (and the backward's
// dO), by rows (before the on-chip transposes, which carry the zeros),
// L E / 128, S E / 128, S Ev / 128 (L Ev / 128) elements: ~16 us forward
// and ~22 us backward of Vector time here in bf16, partly hidden (right
// padding adds 13 us forward, 10 us backward in all;
// ./build/bench/neuron_attention_masking).
TEST(NeuronAttentionValidLen, MaskingCostsLittle) {
  for (DType dt : {DType::f32, DType::bf16})
    for (bool backward : {false, true}) {
      SCOPED_TRACE(absl::StrCat(dtype_name(dt), backward ? " backward" : " forward"));
      AttentionShape s;
      s.batch = 32;
      s.q_len = s.kv_len = 256;
      s.head_dim = s.value_dim = 64;
      s.dtype = dt;
      s.scale = 0.125f;
      s.causal = true;
      AttentionShape right = s;
      right.lengths = 8;
      right.lengths_i64 = true;
      AttentionShape left = right;
      left.left_padding = true;
      auto program = backward ? attention_backward_program : attention_forward_program;
      const TileProgram p_plain = program(s), p_right = program(right), p_left = program(left);
      // Without lengths the forward transposes q and k of two batch-heads
      // (head dim 64) at once; with them one at a time (the zeroing selects
      // are per batch-head): 2 + 2 transposes per batch-head, not 2.
      const int64_t unpaired = backward ? 0 : 32 * 2;
      EXPECT_EQ(count(p_right, Opcode::nc_matmul), count(p_plain, Opcode::nc_matmul) + unpaired);
      EXPECT_EQ(count(p_left, Opcode::nc_matmul),
                count(p_plain, Opcode::nc_matmul) + unpaired + 32 * (backward ? 5 : 2));
      // The selects are per batch-head (q, k, v and the backward's dO by
      // rows), none per chunk.
      for (const TileProgram* p : {&p_right, &p_left})
        EXPECT_EQ(count(*p, Opcode::select), 32 * (backward ? 4 : 3));
      absl::StatusOr<CostReport> plain = estimate_cost(p_plain), masked = estimate_cost(p_left);
      ASSERT_TRUE(plain.ok() && masked.ok());
      // The masking adds two [rows, 1] Vector instructions per Q tile (the
      // row keep, folded into 1 / l) and, with left padding, a K=1 matmul per
      // key chunk: mostly fixed per-instruction costs, so ~20% of the bf16
      // forward here (42 us for 64 Q tiles; with lengths it also transposes
      // one batch-head at a time, not two, and groups fewer chunks: +53% in
      // all), less in f32 and
      // backward; then the selects' Vector time, no more.
      EXPECT_LT(masked->total_ns, 1.4 * plain->total_ns + select_ns(p_left));
    }
}

} // namespace
} // namespace mstep::neuron
