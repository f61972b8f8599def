// Attention with attn_mask on the simulated NeuronCore: the sdpa and
// sdpa_grad nodes lowered (the mask tiles DMA'd from HBM by their
// broadcast strides and applied on chip, AttentionMask.h) against ref's
// kernels, the oracle the conformance suite checks against PyTorch. Bool
// masks (false excludes) and additive masks (q's dtype, with -inf and
// finfo.min entries) of the shapes sdpa broadcasts: [L, S], [S], [L, 1],
// [B, 1, L, S], [B, 1, 1, S] (a padding mask), [B, H, L, S]; f32 and bf16;
// with valid_seq_len (right and left padding); two key chunks; rows with
// every key excluded, which ref gives as zeros (and no gradient), and rows
// whose keys are all in the second chunk (the online softmax's first chunk
// then has no key). Tolerances: the conformance suite's for sdpa (f32 rtol
// 1e-4, atol 1e-5; bf16 4e-2 both, as attention_valid_len_test.cpp);
// values ref gives as exactly 0 must be exactly 0.
#include <algorithm>
#include <cmath>
#include <limits>

#include "AttentionRefCheck.h"
#include "LoweringTestUtil.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron {
namespace {

using testing::Buffers;

struct Case {
  int64_t batch = 2, heads = 2, L = 200, S = 200, E = 16;
  DType dtype = DType::f32;
  bool additive = false;
  /// The mask's shape, broadcasting to [batch, heads, L, S]; empty: [L, S].
  std::vector<int64_t> mask_shape;
  bool causal = false, left = false;
  std::vector<int64_t> lens; ///< valid_seq_len (i64) when not empty: batch of them
  double scale = 0.25;
  /// Additive: the excluded entries are the lowest finite value (as
  /// torch.finfo(dtype).min, which ref does not treat as excluded) instead
  /// of -inf.
  bool finite_min = false;
};

Shape mask_shape(const Case& c) {
  return c.mask_shape.empty() ? Shape({c.L, c.S}) : Shape(c.mask_shape);
}

/// An sdpa (or sdpa_grad) node over q [B, H, L, E], k, v [B, H, S, E], the
/// mask [and valid_seq_len [B]], with all the attrs ref reads.
GraphNode mask_node(const Case& c, bool backward) {
  const TensorType q{Shape({c.batch, c.heads, c.L, c.E}), c.dtype};
  const TensorType kv{Shape({c.batch, c.heads, c.S, c.E}), c.dtype};
  GraphNode n{backward ? OpKind::sdpa_grad : OpKind::sdpa, {}, {}, {q}, nullptr};
  if (backward) n.results = {q, kv, kv};
  const uint32_t operands = 4 + backward + !c.lens.empty();
  for (uint32_t i = 0; i < operands; ++i) n.operands.push_back(ValueRef{i, 0});
  n.attrs = testing::sdpa_attrs(c.causal, c.scale, true, !c.lens.empty(), c.left);
  return n;
}

/// The mask: per its row i (0 where it has no L dim) and leading index b,
/// pattern (i + 3 b) % 5: 0 every key kept but every 7th; 1 no key kept;
/// 2 only the keys from 512 on (the second chunk; none when S <= 512);
/// 3 only the row's own key (i % S); 4 pseudo-random halves. Additive:
/// kept keys get a value in [-2, 1], excluded ones -inf (or the lowest).
std::shared_ptr<host::HostBuffer> make_mask(const Case& c) {
  const Shape shape = mask_shape(c);
  const int64_t r = shape.rank(), cols = shape[r - 1], rows = r >= 2 ? shape[r - 2] : 1;
  const int64_t n = shape.numel();
  const DType dt = c.additive ? c.dtype : DType::boolean;
  auto buf = std::make_shared<host::HostBuffer>(TensorType{shape, dt});
  const float excluded =
      c.finite_min
          ? (c.dtype == DType::bf16 ? -3.3895314e38f : std::numeric_limits<float>::lowest())
          : -std::numeric_limits<float>::infinity();
  const std::vector<float> values = testing::random_values(n, -2, 1, 77);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t jm = e % cols, im = (e / cols) % rows, bm = e / (cols * rows);
    const int64_t j = cols == 1 ? 0 : jm, i = rows == 1 ? 0 : im;
    bool keep = true;
    switch ((im + 3 * bm) % 5) {
    case 0:
      keep = j % 7 != 3;
      break;
    case 1:
      keep = false;
      break;
    case 2:
      keep = j >= 512;
      break;
    case 3:
      keep = j == i % std::max<int64_t>(cols, 1);
      break;
    default:
      keep = ((j * 2654435761u + i * 40503u) >> 7) % 2 == 0;
      break;
    }
    if (!c.additive) {
      buf->data<bool>()[e] = keep;
    } else {
      const float x = keep ? values[e] : excluded;
      if (dt == DType::bf16)
        buf->data<BFloat16>()[e] = BFloat16(x);
      else
        buf->data<float>()[e] = x;
    }
  }
  return buf;
}

/// [grad_out,] q, k, v in [-1, 1], the mask [, the lengths].
Buffers inputs(const Case& c, const GraphNode& node, bool backward) {
  Buffers in;
  unsigned seed = 60;
  const TensorType q = node.results[0], kv{Shape({c.batch, c.heads, c.S, c.E}), c.dtype};
  std::vector<TensorType> types = {q, q, kv, kv};
  if (!backward) types.erase(types.begin());
  for (const TensorType& t : types)
    in.push_back(testing::buffer(t, testing::random_values(t.numel(), -1, 1, seed++)));
  in.push_back(make_mask(c));
  if (!c.lens.empty()) {
    auto len = std::make_shared<host::HostBuffer>(
        TensorType{Shape({static_cast<int64_t>(c.lens.size())}), DType::i64});
    std::copy(c.lens.begin(), c.lens.end(), len->data<int64_t>());
    in.push_back(len);
  }
  return in;
}

using testing::expect_attention_matches;
using testing::host_fallbacks;
using testing::types_of;

void check(const Case& c) {
  for (bool backward : {false, true}) {
    SCOPED_TRACE(backward ? "sdpa_grad" : "sdpa");
    const GraphNode node = mask_node(c, backward);
    const Buffers in = inputs(c, node, backward);
    // each result must test more than zeroed rows
    testing::expect_lowered_matches_ref(node, in, c.dtype, /*not_all_zero=*/true);
  }
}

TEST(NeuronAttentionMask, F32BoolLS) { check({}); }
TEST(NeuronAttentionMask, Bf16BoolLS) { check({.dtype = DType::bf16}); }
TEST(NeuronAttentionMask, F32AdditivePerBatch) {
  check({.additive = true, .mask_shape = {2, 1, 200, 200}});
}
TEST(NeuronAttentionMask, Bf16AdditivePerBatchHead) {
  check({.dtype = DType::bf16, .additive = true, .mask_shape = {2, 2, 200, 200}});
}
TEST(NeuronAttentionMask, F32BoolPaddingMask) { check({.mask_shape = {2, 1, 1, 200}}); }
TEST(NeuronAttentionMask, F32AdditiveKeysOnly) { check({.additive = true, .mask_shape = {200}}); }
TEST(NeuronAttentionMask, F32BoolRowsOnly) { check({.mask_shape = {200, 1}}); }
// finfo.min, not -inf: ref does not exclude those keys (a row of them is
// a softmax over equal scores, not zeros); neither does the program.
TEST(NeuronAttentionMask, F32AdditiveFiniteMin) {
  check({.additive = true, .mask_shape = {2, 1, 200, 200}, .finite_min = true});
}
TEST(NeuronAttentionMask, Bf16AdditiveFiniteMin) {
  check({.dtype = DType::bf16, .additive = true, .finite_min = true});
}
// Two key chunks (600 keys): pattern 2's rows keep keys of the second
// chunk only; L > S and L < S.
TEST(NeuronAttentionMask, F32BoolTwoKeyChunks) {
  check({.batch = 1, .heads = 2, .L = 130, .S = 600, .E = 32});
}
/// Two batch rows, one head, 70 rows, 600 keys, E 32.
Case two_chunks(DType dt) {
  return {.batch = 2, .heads = 1, .L = 70, .S = 600, .E = 32, .dtype = dt};
}
TEST(NeuronAttentionMask, Bf16AdditiveTwoKeyChunks) {
  Case c = two_chunks(DType::bf16);
  c.additive = true;
  c.mask_shape = {2, 1, 70, 600};
  check(c);
}
// With valid_seq_len: the rows it drops, the padded keys, and rows whose
// every kept key is padding, all zeros.
TEST(NeuronAttentionMask, F32BoolValidLenRight) {
  check({.mask_shape = {2, 1, 200, 200}, .lens = {150, 70}});
}
TEST(NeuronAttentionMask, F32AdditiveValidLenLeft) {
  check({.additive = true, .left = true, .lens = {150, 1}});
}
TEST(NeuronAttentionMask, Bf16BoolValidLenLeftTwoKeyChunks) {
  Case c = two_chunks(DType::bf16);
  c.left = true;
  c.lens = {550, 20};
  check(c);
}
// A scale that is not positive (the scores scaled into SBUF first anyway).
TEST(NeuronAttentionMask, F32AdditiveNegativeScale) {
  check({.additive = true, .lens = {200, 90}, .scale = -0.5});
}
// Causal with a mask: the API refuses the pair (as PyTorch), a graph built
// directly may hold it; ref applies both, so does the program.
TEST(NeuronAttentionMask, F32BoolCausalNodeLevel) { check({.causal = true}); }

// The mask is an HBM tensor read on chip, after the lengths: not applied
// on the host.
TEST(NeuronAttentionMask, MaskIsAnHbmTensorAfterTheLengths) {
  const Case c{.mask_shape = {2, 1, 1, 200}, .lens = {3, 4}};
  const GraphNode node = mask_node(c, true);
  const Buffers in = inputs(c, node, true);
  const std::vector<TensorType> types = types_of(in);
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  ASSERT_TRUE(low.ok()) << low.status();
  const HbmTensor& mask = low->program.hbm.back();
  EXPECT_EQ(mask.name, "mask");
  EXPECT_EQ(mask.dtype, DType::boolean);
  EXPECT_EQ(mask.elements, 400);
  EXPECT_EQ(low->hbm_binding, (std::vector<int32_t>{0, 1, 2, 3, -1, -2, -3, 5, 4}));
}

// The float mask's gradient (sdpa_grad with return_mask, a fourth result)
// stays on the host, counted.
TEST(NeuronAttentionMask, MaskGradientFallsBackToTheHost) {
  Case c{.additive = true};
  GraphNode node = mask_node(c, true);
  for (Attr& a : node.attrs)
    if (a.name == AttrName::return_mask) a.value = AttrValue(int64_t{1});
  const Buffers in = inputs(c, node, true);
  node.results.push_back(in[4]->type());
  const std::vector<TensorType> types = types_of(in);
  EXPECT_NE(testing::refusal(node, types).find("attn_mask gradient"), std::string::npos)
      << testing::refusal(node, types);
  EXPECT_EQ(host_fallbacks(node, types), 1u);
}

} // namespace
} // namespace mstep::neuron
