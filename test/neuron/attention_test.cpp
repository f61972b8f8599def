// AttentionProgram.h: the flash-tiled attention forward run on the
// simulator against a double-precision host attention (ref's rule: key j
// excluded from row i when causal and j > i); causal and not, ragged
// lengths (not multiples of the 128-row Q tile or the 512-key chunk),
// L != S, head dims 64 and 128, f32 and bf16; the saved row statistics;
// the causal skipping of tiles; the program passes the validator; and the
// sdpa node's lowering (covered options lowered, the rest refused).
#include <cmath>
#include <random>

#include "NeuronTestPrograms.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {
namespace {

using testing::bytes_of;
using testing::decode;
using testing::encode;
using ::testing::HasSubstr;
using testing::random_rounded;
using testing::values_of;

struct HostAttention {
  std::vector<double> out, row_max, row_sum;
};

/// out[b, i] = sum_j softmax_j(scale q_i . k_j) v_j in double, j <= i when causal.
HostAttention host_attention(const AttentionShape& s, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v) {
  HostAttention r;
  r.out.assign(s.batch * s.q_len * s.value_dim, 0);
  std::vector<double> p(s.kv_len);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < s.q_len; ++i) {
      const int64_t keys = s.causal ? std::min(s.kv_len, i + 1) : s.kv_len;
      double m = -INFINITY, l = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < s.head_dim; ++e)
          dot += double(q[(b * s.q_len + i) * s.head_dim + e]) *
                 k[(b * s.kv_len + j) * s.head_dim + e];
        p[j] = double(s.scale) * dot;
        m = std::max(m, p[j]);
      }
      for (int64_t j = 0; j < keys; ++j) l += p[j] = std::exp(p[j] - m);
      for (int64_t j = 0; j < keys; ++j)
        for (int64_t e = 0; e < s.value_dim; ++e)
          r.out[(b * s.q_len + i) * s.value_dim + e] +=
              p[j] / l * v[(b * s.kv_len + j) * s.value_dim + e];
      r.row_max.push_back(m);
      r.row_sum.push_back(l);
    }
  return r;
}

/// Runs the program on random inputs and checks it against host_attention.
void check_attention(const AttentionShape& s) {
  ASSERT_TRUE(attention_tileable(s).ok()) << attention_tileable(s);
  const TileProgram program = attention_forward_program(s);
  ASSERT_TRUE(validate(program).ok()) << validate(program);
  const auto q = random_rounded(s.batch * s.q_len * s.head_dim, s.dtype, 1);
  const auto k = random_rounded(s.batch * s.kv_len * s.head_dim, s.dtype, 2);
  const auto v = random_rounded(s.batch * s.kv_len * s.value_dim, s.dtype, 3);
  HbmContents hbm(program.hbm.size());
  hbm[0] = encode(q, s.dtype);
  hbm[1] = encode(k, s.dtype);
  hbm[2] = encode(v, s.dtype);
  for (size_t t = 3; t < hbm.size(); ++t)
    hbm[t].resize(program.hbm[t].elements * element_size(program.hbm[t].dtype));
  Simulator sim;
  absl::StatusOr<SimulationStats> run = sim.run(program, hbm);
  ASSERT_TRUE(run.ok()) << run.status();
  const HostAttention want = host_attention(s, q, k, v);
  const std::vector<float> got = decode(hbm[3], s.dtype);
  // Tolerances, |v| <= 1 so |out| <= 1:
  // - f32: the program rounds each score (an E-term fp32 dot), each exp and
  //   the fp32 sums over S keys; a few ulps per accumulated term:
  //   4 (E + S) 2^-24.
  // - bf16: p is rounded to bf16 before p v (2^-9 relative per term, at
  //   most 2^-9 max|v| in all, while l sums the unrounded p) and out is
  //   rounded to bf16 (2^-9); the host value is unrounded: 2^-8 in all,
  //   plus the fp32 term. A masking or rescaling error is far larger.
  const double tol = s.dtype == DType::bf16 ? std::ldexp(1.0, -8) + 4.0 * (s.head_dim + s.kv_len) *
                                                                        std::ldexp(1.0, -24)
                                            : 4.0 * (s.head_dim + s.kv_len) * std::ldexp(1.0, -24);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want.out[i], tol)
        << "row " << i / s.value_dim << " column " << i % s.value_dim;
  if (!s.save_stats) return;
  const std::vector<float> m = values_of<float>(hbm[4]), l = values_of<float>(hbm[5]);
  for (size_t r = 0; r < m.size(); ++r) {
    // m is a maximum of fp32 scores; l a sum of fp32 exps (each <= 1).
    ASSERT_NEAR(m[r], want.row_max[r], 4.0 * s.head_dim * std::ldexp(1.0, -24)) << "row " << r;
    ASSERT_NEAR(l[r], want.row_sum[r],
                8.0 * (s.head_dim + s.kv_len) * std::ldexp(1.0, -24) * want.row_sum[r])
        << "row " << r;
  }
}

AttentionShape shape(int64_t batch, int64_t L, int64_t S, int64_t E, DType dtype, bool causal) {
  AttentionShape s;
  s.batch = batch;
  s.q_len = L;
  s.kv_len = S;
  s.head_dim = E;
  s.value_dim = E;
  s.dtype = dtype;
  s.scale = static_cast<float>(1.0 / std::sqrt(double(E)));
  s.causal = causal;
  return s;
}

// 200 rows: a full and a 72-row Q tile; 600 keys: a full and an 88-key chunk.
TEST(NeuronAttention, F32RaggedHead64) {
  check_attention(shape(1, 200, 600, 64, DType::f32, false));
}
TEST(NeuronAttention, F32CausalHead128) {
  check_attention(shape(2, 300, 300, 128, DType::f32, true));
}
TEST(NeuronAttention, Bf16RaggedHead128) {
  check_attention(shape(1, 257, 129, 128, DType::bf16, false));
}
// 700 keys past the diagonal of 130 rows: the second chunk is skipped for every tile.
TEST(NeuronAttention, Bf16CausalMoreKeysThanRows) {
  check_attention(shape(2, 130, 700, 64, DType::bf16, true));
}
// 600 rows over 300 keys: the later rows see every key, no chunk masked.
TEST(NeuronAttention, F32CausalMoreRowsThanKeys) {
  check_attention(shape(1, 600, 300, 64, DType::f32, true));
}
// q^T and k^T are made on chip from q and k loaded by rows. 128 rows over
// 4000 keys in f32: two batch-heads' operands and their rows tiles do not
// fit half of SBUF, so the two slots share one pair of rows tiles (batch-
// head 1's rows loaded once batch-head 0 is transposed).
TEST(NeuronAttention, SlotsShareOneRowsTileWhenSbufIsTight) {
  const AttentionShape s = shape(2, 128, 4000, 128, DType::f32, true);
  const TileProgram p = attention_forward_program(s);
  int64_t q_rows = 0, qkT = 0;
  for (const Allocation& a : p.allocations) {
    q_rows += a.name.rfind("q_rows", 0) == 0;
    qkT += a.name.rfind("qkT", 0) == 0;
  }
  EXPECT_EQ(q_rows, 1);
  EXPECT_EQ(qkT, 2);
  check_attention(s);
}
// Causal with L 100 and S 4000: one chunk per batch-head, but k^T and v
// of 4000 keys leave room for few resident batch-heads, fewer than the
// pipeline holds in flight: a batch-head's loads must wait for the slot's
// last reader (the pipeline stalls), not overwrite v under it.
TEST(NeuronAttention, FewSlotsAndOneChunkPerBatchHead) {
  check_attention(shape(3, 100, 4000, 64, DType::f32, true));
  check_attention(shape(3, 100, 4000, 128, DType::bf16, true));
}
TEST(NeuronAttention, ValueDimDiffersAndStatsSaved) {
  AttentionShape s = shape(3, 70, 1100, 32, DType::f32, true);
  s.value_dim = 96;
  s.scale = 0.3f;
  s.save_stats = true;
  check_attention(s);
}

int64_t count(const TileProgram& p, Opcode op) {
  int64_t n = 0;
  for (const Instruction& inst : p.instructions) n += inst.opcode == op;
  return n;
}

// 1024 x 1024: 8 Q tiles of 128 rows, 2 key chunks of 512. Not causal: 16
// QK^T matmuls. Causal: Q tiles 0-3 (rows < 512) skip chunk 1: 12, and each
// tile masks exactly its one diagonal-crossing chunk: 8 mask matmuls
// accumulated into the scores (the scale is positive), from one mask tile
// made by one affine_select (plus the one that makes the identity). A
// diagonal-crossing chunk ends at its tile's last row: tile t's has t + 1
// key blocks (t < 4) or t - 3 (t >= 4), each 1 transpose and 1 p.v matmul.
// Both also make q^T and k^T on chip: a transpose per 128-row block, 8 + 8.
TEST(NeuronAttention, CausalSkipsTilesAboveTheDiagonal) {
  const TileProgram full = attention_forward_program(shape(1, 1024, 1024, 64, DType::bf16, false));
  const TileProgram causal = attention_forward_program(shape(1, 1024, 1024, 64, DType::bf16, true));
  // Per chunk: 1 QK^T, 4 transposes, 4 p.v matmuls.
  EXPECT_EQ(count(full, Opcode::nc_matmul), 16 * 9 + 16);
  EXPECT_EQ(count(causal, Opcode::nc_matmul), 12 + 4 * 8 + 2 * (1 + 2 + 3 + 4) * 2 + 8 + 16);
  EXPECT_EQ(count(full, Opcode::affine_select), 1);
  EXPECT_EQ(count(causal, Opcode::affine_select), 1 + 1);
  absl::StatusOr<CostReport> a = estimate_cost(full), b = estimate_cost(causal);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(b->total_ns, a->total_ns);
}

// Issue 19's third calibration point: a fused self-attention forward at
// 4096 x 4096, head dim 128, bf16 runs "in under about 536 us". The model
// (nothing fitted to this point) must meet the bound, within the 15% the
// issue allows; bench/neuron_calibration prints the estimate and error.
TEST(NeuronAttention, CalibrationPointMeetsThePublicBound) {
  AttentionShape s = shape(1, 4096, 4096, 128, DType::bf16, false);
  absl::StatusOr<CostReport> r = estimate_cost(attention_forward_program(s));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(r->total_ns, 536e3 * 1.15) << r->summary();
  // No faster than the Tensor engine's share alone: 4 L S d useful FLOPs
  // at the bf16 peak (2 x 128 x 128 x 2.8 GHz).
  EXPECT_GT(r->total_ns, 4.0 * 4096 * 4096 * 128 / (2.0 * 128 * 128 * 2.8)) << r->summary();
}

/// The backward in double: P = softmax, dV = P^T dO, dP = dO v^T,
/// D = rowsum(P dP), dS = P (dP - D), dQ = scale dS k, dK = scale dS^T q;
/// with each element's sum of |terms| (the scale of its rounding error).
struct HostGrads {
  std::vector<double> dq, dk, dv, dq_mag, dk_mag, dv_mag;
};
HostGrads host_backward(const AttentionShape& s, const std::vector<float>& g,
                        const std::vector<float>& q, const std::vector<float>& k,
                        const std::vector<float>& v) {
  const int64_t L = s.q_len, S = s.kv_len, E = s.head_dim, Ev = s.value_dim;
  HostGrads r;
  for (auto* x : {&r.dq, &r.dq_mag}) x->assign(s.batch * L * E, 0);
  for (auto* x : {&r.dk, &r.dk_mag}) x->assign(s.batch * S * E, 0);
  for (auto* x : {&r.dv, &r.dv_mag}) x->assign(s.batch * S * Ev, 0);
  std::vector<double> p(S), dp(S);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t i = 0; i < L; ++i) {
      const int64_t keys = s.causal ? std::min(S, i + 1) : S;
      const float* qi = &q[(b * L + i) * E];
      const float* gi = &g[(b * L + i) * Ev];
      double m = -INFINITY, l = 0, d = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += double(qi[e]) * k[(b * S + j) * E + e];
        p[j] = s.scale * dot;
        m = std::max(m, p[j]);
      }
      for (int64_t j = 0; j < keys; ++j) l += p[j] = std::exp(p[j] - m);
      for (int64_t j = 0; j < keys; ++j) {
        p[j] /= l;
        dp[j] = 0;
        for (int64_t e = 0; e < Ev; ++e) dp[j] += double(gi[e]) * v[(b * S + j) * Ev + e];
        d += p[j] * dp[j];
      }
      for (int64_t j = 0; j < keys; ++j) {
        const double ds = p[j] * (dp[j] - d);
        for (int64_t e = 0; e < Ev; ++e) {
          r.dv[(b * S + j) * Ev + e] += p[j] * gi[e];
          r.dv_mag[(b * S + j) * Ev + e] += std::abs(p[j] * gi[e]);
        }
        for (int64_t e = 0; e < E; ++e) {
          r.dq[(b * L + i) * E + e] += s.scale * ds * k[(b * S + j) * E + e];
          r.dq_mag[(b * L + i) * E + e] += std::abs(s.scale * ds * k[(b * S + j) * E + e]);
          r.dk[(b * S + j) * E + e] += s.scale * ds * qi[e];
          r.dk_mag[(b * S + j) * E + e] += std::abs(s.scale * ds * qi[e]);
        }
      }
    }
  return r;
}

void check_backward(const AttentionShape& s) {
  ASSERT_TRUE(attention_backward_tileable(s).ok()) << attention_backward_tileable(s);
  const TileProgram program = attention_backward_program(s);
  ASSERT_TRUE(validate(program).ok()) << validate(program);
  const auto g = random_rounded(s.batch * s.q_len * s.value_dim, s.dtype, 4);
  const auto q = random_rounded(s.batch * s.q_len * s.head_dim, s.dtype, 5);
  const auto k = random_rounded(s.batch * s.kv_len * s.head_dim, s.dtype, 6);
  const auto v = random_rounded(s.batch * s.kv_len * s.value_dim, s.dtype, 7);
  HbmContents hbm(program.hbm.size());
  hbm[0] = encode(g, s.dtype);
  hbm[1] = encode(q, s.dtype);
  hbm[2] = encode(k, s.dtype);
  hbm[3] = encode(v, s.dtype);
  for (size_t t = 4; t < hbm.size(); ++t)
    hbm[t].resize(program.hbm[t].elements * element_size(program.hbm[t].dtype));
  Simulator sim;
  absl::StatusOr<SimulationStats> run = sim.run(program, hbm);
  ASSERT_TRUE(run.ok()) << run.status();
  const HostGrads want = host_backward(s, g, q, k, v);
  // Error relative to each element's sum of |terms|: f32 rounds the
  // recomputed scores, exps, D and the sums over L or S keys (a few ulps
  // per accumulated term: 16 (E + L + S) 2^-24); bf16 also rounds P and dS
  // to bf16 before the matmuls (2 x 2^-9 per term) and the result (2^-9).
  const double u = std::ldexp(1.0, -24);
  const double rel = 16.0 * (s.head_dim + s.q_len + s.kv_len) * u +
                     (s.dtype == DType::bf16 ? std::ldexp(1.0, -7) : 0.0);
  const double out_rel = s.dtype == DType::bf16 ? std::ldexp(1.0, -8) : 0.0;
  const char* names[] = {"dq", "dk", "dv"};
  const std::vector<double>* wants[] = {&want.dq, &want.dk, &want.dv};
  const std::vector<double>* mags[] = {&want.dq_mag, &want.dk_mag, &want.dv_mag};
  for (int o = 0; o < 3; ++o) {
    const std::vector<float> got = decode(hbm[4 + o], s.dtype);
    ASSERT_EQ(got.size(), wants[o]->size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], (*wants[o])[i],
                  rel * (*mags[o])[i] + out_rel * std::abs((*wants[o])[i]) + 1e-30)
          << names[o] << " element " << i;
  }
}

TEST(NeuronAttention, BackwardF32Ragged) {
  check_backward(shape(1, 200, 300, 64, DType::f32, false));
}
TEST(NeuronAttention, BackwardF32CausalTwoHeads) {
  check_backward(shape(2, 150, 280, 128, DType::f32, true));
}
// 600 rows over 130 keys and 100 rows over 700 keys (causal: the key
// blocks past row 99 get zero dK and dV).
TEST(NeuronAttention, BackwardBf16Causal) {
  check_backward(shape(1, 600, 130, 64, DType::bf16, true));
  check_backward(shape(1, 100, 700, 32, DType::bf16, true));
}

// The backward keeps up to eight batch-heads' operands resident and
// reloads a set for batch-head h + 8 (ten heads: sets reused); with one
// key block per head (64 keys) its pass 2 has a single item, and one pass
// 1 item (each Q tile's keys fit one chunk: pass 2 reuses its P and dP).
TEST(NeuronAttention, BackwardBf16CausalTenHeadsReuseTheResidentSets) {
  check_backward(shape(10, 200, 200, 64, DType::bf16, true));
  check_backward(shape(10, 64, 64, 32, DType::bf16, true));
}
// 2048 x 2048, head dim 64, f32: two resident sets fit (three do not), so
// batch-head h + 2 reuses h's set (three heads: one reload) and h + 1's
// pass 1 interleaves with h's pass 2 after kStages - 1 of its items.
TEST(NeuronAttention, BackwardF32CausalTwoResidentSets) {
  check_backward(shape(3, 2048, 2048, 64, DType::f32, true));
}
// 128 rows over 4000 keys in f32: two batch-heads' operands do not fit
// half of SBUF, so one set is reloaded between the heads (the pipeline
// drains at each head's end); the 31 key blocks past row 127 get zeros.
TEST(NeuronAttention, BackwardF32OneResidentSet) {
  check_backward(shape(2, 128, 4000, 128, DType::f32, true));
}
// A negative scale: the scores are scaled into SBUF and masked by GpSimd
// (the mask matmul and the raw-PSUM max need a positive scale).
TEST(NeuronAttention, BackwardNegativeScale) {
  AttentionShape s = shape(2, 200, 200, 64, DType::f32, true);
  s.scale = -0.125f;
  check_backward(s);
}

TEST(NeuronAttention, UntileableShapesSayWhy) {
  AttentionShape s = shape(1, 128, 128, 256, DType::bf16, false);
  EXPECT_THAT(std::string(attention_tileable(s).message()), HasSubstr("head dim E > 128"));
  s = shape(1, 128, 128, 64, DType::f16, false);
  EXPECT_THAT(std::string(attention_tileable(s).message()), HasSubstr("only f32 or bf16"));
  s = shape(1, 40000, 40000, 64, DType::f32, false);
  EXPECT_THAT(std::string(attention_tileable(s).message()), HasSubstr("SBUF bytes per partition"));
  s = shape(1, 128, 128, 64, DType::bf16, false);
  s.value_dim = 600;
  EXPECT_THAT(std::string(attention_tileable(s).message()), HasSubstr("value dim Ev > 512"));
}

// The sdpa node through lower_node and run_lowered: [2, 3, 150, 64] heads.
GraphNode sdpa_node(const TensorType& q, bool causal, bool has_mask) {
  GraphNode n{OpKind::sdpa, {}, {}, {q}, nullptr};
  for (uint32_t i = 0; i < 3; ++i) n.operands.push_back(ValueRef{i, 0});
  n.attrs.push_back({AttrName::is_causal, AttrValue(int64_t{causal})});
  n.attrs.push_back({AttrName::scale, AttrValue(0.125)});
  n.attrs.push_back({AttrName::dropout_p, AttrValue(0.0)});
  n.attrs.push_back({AttrName::offset, AttrValue(int64_t{-1})});
  n.attrs.push_back({AttrName::has_mask, AttrValue(int64_t{has_mask})});
  n.attrs.push_back({AttrName::has_valid_len, AttrValue(int64_t{0})});
  n.attrs.push_back({AttrName::return_probs, AttrValue(int64_t{0})});
  n.attrs.push_back({AttrName::return_mask, AttrValue(int64_t{0})});
  n.attrs.push_back({AttrName::recompute, AttrValue(int64_t{1})});
  return n;
}

TEST(NeuronAttention, SdpaNodeLowersAndMatchesHost) {
  const TensorType t{Shape({2, 3, 150, 64}), DType::f32};
  const GraphNode node = sdpa_node(t, true, false);
  const TensorType types[] = {t, t, t};
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_GT(low->cost.total_ns, 0);
  AttentionShape s = shape(6, 150, 150, 64, DType::f32, true);
  s.scale = 0.125f;
  std::vector<std::shared_ptr<host::HostBuffer>> in;
  std::vector<std::vector<float>> values;
  for (unsigned i = 0; i < 3; ++i) {
    values.push_back(random_rounded(t.numel(), DType::f32, 10 + i));
    in.push_back(std::make_shared<host::HostBuffer>(t));
    std::memcpy(in.back()->bytes(), values.back().data(), t.bytes());
  }
  host::HostBuffer out(t);
  const host::HostBuffer* ins[] = {in[0].get(), in[1].get(), in[2].get()};
  host::HostBuffer* outs[] = {&out};
  Simulator sim;
  ASSERT_TRUE(run_lowered(*low, sim, ins, outs).ok());
  const HostAttention want = host_attention(s, values[0], values[1], values[2]);
  for (int64_t i = 0; i < t.numel(); ++i)
    ASSERT_NEAR(out.data<float>()[i], want.out[i], 4.0 * (64 + 150) * std::ldexp(1.0, -24)) << i;
}

// sdpa_grad (operands grad_out, q, k, v; results dq, dk, dv) lowers to the
// backward program, with the forward node's attrs.
TEST(NeuronAttention, SdpaGradNodeLowers) {
  const TensorType t{Shape({2, 3, 70, 32}), DType::bf16};
  GraphNode grad = sdpa_node(t, true, false);
  grad.op = OpKind::sdpa_grad;
  grad.operands.push_back(ValueRef{3, 0});
  grad.results = {t, t, t};
  const TensorType types[] = {t, t, t, t};
  absl::StatusOr<LoweredOp> low = lower_node(grad, types);
  ASSERT_TRUE(low.ok()) << low.status();
  EXPECT_EQ(low->program.name, "attention_bwd_causal");
  EXPECT_EQ(low->hbm_binding, (std::vector<int32_t>{0, 1, 2, 3, -1, -2, -3}));
  EXPECT_GT(low->cost.total_ns, 0);
}

TEST(NeuronAttention, SdpaOptionsNotCoveredAreRefused) {
  const TensorType t{Shape({1, 64, 32}), DType::f32};
  // A bool or q-dtype mask lowers (attention_mask_test.cpp); another dtype does not.
  const TensorType types[] = {t, t, t, TensorType{Shape({64, 64}), DType::bf16}};
  absl::StatusOr<LoweredOp> low = lower_node(sdpa_node(t, false, true), types);
  ASSERT_FALSE(low.ok());
  EXPECT_EQ(low.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(low.status().message()),
              HasSubstr("neuron lowering: sdpa not tiled: attn_mask bf16[64, 64] is neither bool "
                        "nor q's dtype"));
  const TensorType big{Shape({1, 64, 200}), DType::f32};
  const TensorType big_types[] = {big, big, big};
  low = lower_node(sdpa_node(big, false, false), big_types);
  ASSERT_FALSE(low.ok());
  EXPECT_THAT(std::string(low.status().message()), HasSubstr("head dim E > 128"));
}

} // namespace
} // namespace mstep::neuron
