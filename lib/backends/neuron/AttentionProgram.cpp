// attention_forward_program: the loop nest of AttentionProgram.h.
#include "lib/backends/neuron/AttentionProgram.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionMask.h"
#include "lib/backends/neuron/AttentionTiles.h"
#include "lib/backends/neuron/AttentionValidLength.h"
#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "lib/backends/neuron/TileBuilder.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

using namespace attention_tiles;

absl::Status attention_tileable(const AttentionShape& s) {
  auto no = [&](auto... why) {
    return absl::UnimplementedError(
        absl::StrCat("attention [", s.batch, ", L ", s.q_len, ", S ", s.kv_len, ", E ", s.head_dim,
                     ", Ev ", s.value_dim, "] ", dtype_name(s.dtype), " not tiled: ", why...));
  };
  if (s.dtype != DType::f32 && s.dtype != DType::bf16) return no("only f32 or bf16");
  if (s.batch < 1 || s.q_len < 1 || s.kv_len < 1 || s.head_dim < 1 || s.value_dim < 1)
    return no("an empty dimension");
  if (s.head_dim > kMatmulMaxK) return no("head dim E > ", kMatmulMaxK, " (the contraction)");
  if (s.value_dim > kMatmulMaxN) return no("value dim Ev > ", kMatmulMaxN, " (one PSUM bank)");
  // Two batch-heads resident (double buffer) in at most half of SBUF.
  if (absl::Status ok = ValidLength::tileable(s); s.lengths > 0 && !ok.ok())
    return no(ok.message());
  if (absl::Status ok = AttentionMask::tileable(s); !ok.ok()) return no(ok.message());
  if (2 * head_bytes(s) > kSbufBytesPerPartition / 2)
    return no("q^T, k^T and v of two batch-heads need ", 2 * head_bytes(s),
              " SBUF bytes per partition, over ", kSbufBytesPerPartition / 2,
              " (no sequence blocking of the resident operands)");
  return absl::OkStatus();
}

namespace {
constexpr int kMaxSlots = 8; ///< units of batch-heads resident (kLag's depth needs more than 4)
/// The pipeline's stages per chunk (attention_forward_program), 0..kLastStage.
constexpr int kLastStage = 7;
/// Chunks per group (their PSUM evacuations shared) at most.
constexpr int kGroup = 3;
/// attn_mask tiles: loaded kMaskAhead chunks ahead; a tile is read in its
/// chunk's stage 1, so kMaskAhead + 2 slots leave one load in flight.
constexpr int kMaskAhead = 2, kMaskSlots = kMaskAhead + 2;

/// The Scalar and Vector engines' busy time so far and that of the PSUM
/// port they share (the cost model's cycles of what the program holds), to
/// give a PSUM evacuation either may run to the one that keeps the largest
/// of the three smallest.
class EngineLoad {
public:
  Engine lighter(const TileProgram& p, int64_t cols) {
    for (; seen_ < static_cast<int64_t>(p.instructions.size()); ++seen_) {
      const Instruction& inst = p.instructions[seen_];
      if (inst.engine != Engine::scalar && inst.engine != Engine::vector) continue;
      const double ns = instruction_cycles(inst, params_) / engine_ghz(inst.engine, params_);
      ns_[inst.engine == Engine::vector] += ns;
      bool psum = inst.dst.kind == BufferKind::psum;
      for (const AccessPattern& src : inst.srcs) psum = psum || src.kind == BufferKind::psum;
      if (psum) port_ns_ += ns;
    }
    const double cycles = params_.access_fixed_cycles + static_cast<double>(cols);
    const double on_scalar = cycles / params_.scalar_ghz, on_vector = cycles / params_.vector_ghz;
    const double scalar = std::max({ns_[0] + on_scalar, ns_[1], port_ns_ + on_scalar});
    const double vector = std::max({ns_[0], ns_[1] + on_vector, port_ns_ + on_vector});
    return vector < scalar ? Engine::vector : Engine::scalar;
  }

private:
  CostParams params_;
  int64_t seen_ = 0;
  double ns_[2] = {0, 0}, port_ns_ = 0;
};
} // namespace

TileProgram attention_forward_program(const AttentionShape& s) {
  const DType dt = s.dtype;
  const int64_t es = static_cast<int64_t>(element_size(dt));
  const int64_t L = s.q_len, S = s.kv_len, E = s.head_dim, Ev = s.value_dim;
  const int64_t kblocks = ceil_div(S, kBlock);
  TileBuilder b(s.causal ? "attention_fwd_causal" : "attention_fwd");
  DependencyTracker deps(b);
  const int32_t q_hbm = b.hbm_tensor("q", dt, s.batch * L * E);
  const int32_t k_hbm = b.hbm_tensor("k", dt, s.batch * S * E);
  const int32_t v_hbm = b.hbm_tensor("v", dt, s.batch * S * Ev);
  const int32_t out_hbm = b.hbm_tensor("out", dt, s.batch * L * Ev);
  int32_t max_hbm = -1, sum_hbm = -1;
  if (s.save_stats) {
    max_hbm = b.hbm_tensor("row_max", DType::f32, s.batch * L);
    sum_hbm = b.hbm_tensor("row_sum", DType::f32, s.batch * L);
  }
  auto sbuf = [&](int64_t bytes, std::string name) {
    return b.allocate(BufferKind::sbuf, bytes, std::move(name));
  };
  auto psum = [&](std::string name) {
    return b.allocate(BufferKind::psum, kPsumBankBytes, std::move(name));
  };
  const int32_t ident = make_identity(b, deps, dt);
  ValidLength valid(b, deps, s);
  AttentionMask mask(b, deps, s, kMaskSlots, kChunk);

  // Batch-heads by units of G: two (head dim 32 or 64, no valid_seq_len)
  // share the partitions of their q^T and k^T, head g of a unit at
  // partitions [g E, (g + 1) E), so one transpose and one copy out of
  // PSUM serve both (the copies' cost is per column, whatever the
  // partitions). Per unit slot: qk^T [G E, L + S] (q^T in columns [0, L),
  // k^T in [L, L + S)), v [128, G x kblocks x Ev] and q and k by rows
  // ([128, blocks x G E], head g of block j at column (j G + g) E); unit u
  // in slot u % nslots, up to kMaxSlots as fit in half of SBUF, so the
  // loads of the next units overlap the work on this one even when it is
  // short; with valid_seq_len, each slot's key bias too. When two slots
  // with their rows do not fit, two slots (attention_tileable) share one
  // pair of rows tiles, each unit's loaded once the one before is transposed.
  const int64_t half = kSbufBytesPerPartition / 2;
  const int64_t qblocks = ceil_div(L, kBlock);
  auto unit_bytes = [&](int64_t g) {
    return es * (L + S + g * kblocks * Ev + (s.lengths > 0 ? S : 0) + g * E * (qblocks + kblocks));
  };
  const int64_t G =
      s.batch > 1 && (E == 32 || E == 64) && !valid.on() && 2 * unit_bytes(2) <= half ? 2 : 1;
  const int64_t units = ceil_div(s.batch, G);
  const bool rows_per_slot = 2 * unit_bytes(G) <= half;
  const int nslots =
      rows_per_slot ? static_cast<int>(std::clamp<int64_t>(half / unit_bytes(G), 2, kMaxSlots)) : 2;
  const int nrows = rows_per_slot ? nslots : 1;
  int32_t qkT[kMaxSlots], vv[kMaxSlots], kbias[kMaxSlots];
  int32_t q_rows[kMaxSlots], k_rows[kMaxSlots];
  for (int u = 0; u < std::min<int64_t>(nslots, units); ++u) {
    qkT[u] = sbuf((L + S) * es, absl::StrCat("qkT", u));
    vv[u] = sbuf(G * kblocks * Ev * es, absl::StrCat("v", u));
    kbias[u] = valid.allocate_bias(b, u);
    if (u >= nrows) continue;
    q_rows[u] = sbuf(es * G * E * qblocks, absl::StrCat("q_rows", u));
    k_rows[u] = sbuf(es * G * E * kblocks, absl::StrCat("k_rows", u));
  }
  // Batch-head h: its unit's slot, its first partition in qk^T, its column in v.
  auto slot = [&](int64_t h) { return static_cast<int>(h / G % nslots); };
  auto part0 = [&](int64_t h) { return static_cast<int32_t>(h % G * E); };
  auto v_col = [&](int64_t h) { return h % G * kblocks * Ev; };
  // Per group of chunks (below), rotating: the raw scores in PSUM over 3
  // groups; in SBUF the scaled scores over 4 (read up to two stages
  // later), p and p^T over 3 (read a stage later); p^T and p v in PSUM over
  // 2. Per chunk, the row statistics over kRing (read up to kLastStage - 2
  // stages later, and chunk n-1's by chunk n).
  constexpr int kPsumRing = 3, kScoresRing = 4, kPRing = 3, kRing = kGroup * (kLastStage + 1);
  int32_t s_ps[kPsumRing], s_sb[kScoresRing], p_sb[kPRing], pT_sb[kPRing];
  int32_t negm[kRing], mc[kRing], rowsum[kRing], alpha[kRing], l[kRing], m[kRing], keep[kRing];
  int32_t kept[kRing]; // attn_mask: the chunk's "some key kept" row flags
  for (int g = 0; g < kPsumRing; ++g) s_ps[g] = psum(absl::StrCat("scores", g));
  for (int g = 0; g < kScoresRing; ++g) s_sb[g] = sbuf(kChunk * 4, absl::StrCat("s", g));
  for (int g = 0; g < kPRing; ++g) {
    p_sb[g] = sbuf(kChunk * es, absl::StrCat("p", g));
    pT_sb[g] = sbuf(kChunk * es, absl::StrCat("pT", g));
  }
  for (int g = 0; g < kRing; ++g) {
    negm[g] = sbuf(4, absl::StrCat("neg_m", g));
    mc[g] = sbuf(4, absl::StrCat("chunk_neg_m", g));
    rowsum[g] = sbuf(4, absl::StrCat("rowsum", g));
    alpha[g] = sbuf(4, absl::StrCat("alpha", g));
    l[g] = sbuf(4, absl::StrCat("l", g));
    m[g] = s.save_stats ? sbuf(4, absl::StrCat("m", g)) : -1;
    keep[g] = sbuf(4, absl::StrCat("out_factor", g));
    kept[g] = mask.on() ? sbuf(4, absl::StrCat("chunk_kept", g)) : -1;
  }
  int32_t pT_ps[2], pv_ps[2];
  for (int g = 0; g < 2; ++g) {
    pT_ps[g] = psum(absl::StrCat("pT_psum", g));
    pv_ps[g] = psum(absl::StrCat("pv", g));
  }
  // Per Q tile parity: the running output; the outputs in the input dtype
  // over four Q tiles (a store's DMA, ~1.4 us, reads one while the next
  // tiles finish).
  constexpr int kOutRing = 4;
  const int nout =
      static_cast<int>(std::min<int64_t>(kOutRing, s.batch * ceil_div(L, kBlock)));
  int32_t o_run[2], o_out[kOutRing], kept_run[2];
  for (int t = 0; t < 2; ++t) {
    o_run[t] = sbuf(Ev * 4, absl::StrCat("o", t));
    kept_run[t] = mask.on() ? sbuf(4, absl::StrCat("row_kept", t)) : -1;
  }
  for (int t = 0; t < nout; ++t) o_out[t] = sbuf(Ev * es, absl::StrCat("o_out", t));

  // q and k by rows (q^T and k^T are made from them on chip, transpose_unit
  // below, shortly before the unit's first chunk), v in 128-key blocks.
  const int32_t tr_bank = psum("transposes_psum");
  EngineLoad load;
  std::vector<bool> loaded(units, false), transposed(units, false);
  // The pipeline iteration (below) that emitted a unit's last loads.
  int64_t now = -2;
  std::vector<int64_t> loaded_at(units, now);
  auto unit_heads = [&](int64_t u) { return std::min(G, s.batch - u * G); };
  auto load_rows = [&](int64_t u) {
    const int r = static_cast<int>(u % nrows);
    auto rows_of = [&](int32_t tile, int32_t src, int64_t heads, int64_t h, int64_t len) {
      for (int64_t j = 0; j * kBlock < len; ++j) {
        const int64_t n = std::min(kBlock, len - j * kBlock);
        deps.track(b.dma_copy(sb(tile, dt, n, (j * G + h % G) * E, E),
                              head_rows(src, dt, heads, len, E, h, j * kBlock, n)),
                   /*partial_write=*/true);
      }
    };
    for (int64_t h = u * G; h < u * G + unit_heads(u); ++h) {
      rows_of(q_rows[r], q_hbm, s.heads.q, h, L);
      rows_of(k_rows[r], k_hbm, s.heads.k, h, S);
    }
    loaded[u] = true;
    loaded_at[u] = now;
  };
  std::vector<bool> unit_loaded(units, false);
  auto load_unit = [&](int64_t u) {
    if (unit_loaded[u]) return;
    unit_loaded[u] = true;
    const int us = static_cast<int>(u % nslots);
    loaded_at[u] = now;
    if (rows_per_slot || u == 0) load_rows(u);
    for (int64_t h = u * G; h < u * G + unit_heads(u); ++h)
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        const int64_t rows = std::min(kBlock, S - kb * kBlock);
        deps.track(b.dma_copy(sb(vv[us], dt, rows, v_col(h) + kb * Ev, Ev),
                              head_rows(v_hbm, dt, s.heads.v, S, Ev, h, kb * kBlock, rows)),
                   /*partial_write=*/true);
      }
  };
  // valid_seq_len: a batch-head's key masks, and its padded keys (rows) zeroed
  // in k (q) by rows before the transposes, which then carry the zeros into
  // k^T (q^T), while a NaN left in a row would reach every key (row) of the
  // transpose through the identity matmul, 0 x NaN = NaN; and in v. With the
  // transposes, not with the loads, because the Vector queue is in order:
  // a select there would hold it until the DMA lands. The transposes: the
  // 128-row blocks of q, then of k, each [G E, rows] into the PSUM bank
  // side by side, copied to qk^T a bank (512 columns) at a time.
  auto transpose_unit = [&](int64_t u) {
    if (!loaded[u] || transposed[u]) return;
    const int us = static_cast<int>(u % nslots), r = static_cast<int>(u % nrows);
    if (valid.on()) { // G = 1
      valid.prepare_head(b, deps, u, kbias[us]);
      valid.zero_query_rows(b, deps, q_rows[r], dt, E);
      valid.zero_key_rows(b, deps, k_rows[r], dt, E);
      valid.zero_key_rows(b, deps, vv[us], dt, Ev);
    }
    const int64_t parts = unit_heads(u) == G ? G * E : E;
    int64_t bank_col0 = 0; // the qk^T column at the bank's column 0
    auto flush = [&](int64_t end) {
      if (end == bank_col0) return;
      const int64_t cols = end - bank_col0;
      const AccessPattern dst = sb(qkT[us], dt, parts, bank_col0, cols);
      const AccessPattern src = ps(tr_bank, parts, 0, cols);
      if (load.lighter(b.program(), cols) == Engine::vector)
        deps.track(b.tensor_copy(Engine::vector, dst, src), /*partial_write=*/true);
      else
        deps.track(b.tensor_copy(Engine::scalar, dst, src), /*partial_write=*/true);
      bank_col0 = end;
    };
    auto blocks = [&](int32_t tile, int64_t col0, int64_t len) {
      for (int64_t j = 0; j * kBlock < len; ++j) {
        const int64_t n = std::min(kBlock, len - j * kBlock), col = col0 + j * kBlock;
        if (col + n - bank_col0 > kChunk) flush(col);
        deps.track(b.matmul(ps(tr_bank, parts, col - bank_col0, n),
                            sb(tile, dt, n, j * G * E, parts), sb(ident, dt, n, 0, n), false));
      }
    };
    blocks(q_rows[r], 0, L);
    blocks(k_rows[r], L, S);
    flush(L + S);
    transposed[u] = true;
    if (!rows_per_slot && u + 1 < units) load_rows(u + 1);
  };

  // Every (batch-head, Q tile, key chunk) the program computes, in order;
  // causal: chunks wholly above the diagonal (every key > every row) are
  // skipped, so the first chunk of a tile (keys from 0) is never empty.
  struct Chunk {
    int64_t h, q0, rows, tile, k0, w;
    bool first, last, diagonal;
    int64_t col = 0, pT_col = 0, pv_col = 0; ///< in its group's PSUM banks
  };
  std::vector<Chunk> chunks;
  int64_t tiles = 0;
  for (int64_t h = 0; h < s.batch; ++h)
    for (int64_t q0 = 0; q0 < L; q0 += kBlock, ++tiles) {
      const int64_t rows = std::min(kBlock, L - q0);
      for (int64_t k0 = 0; k0 < S && !(s.causal && k0 > q0 + rows - 1); k0 += kChunk) {
        // Causal: not the keys past the tile's last row (no row sees them).
        const int64_t w = std::min({kChunk, S - k0, s.causal ? q0 + rows - k0 : S});
        chunks.push_back({h, q0, rows, tiles, k0, w, k0 == 0, false, s.causal && k0 + w - 1 > q0});
      }
      chunks.back().last = true;
    }
  // Consecutive chunks of a unit with the same rows go by groups of up to
  // kGroup whose scores (and p^T, p v) share a PSUM bank: one copy out of
  // PSUM per group, not per chunk, each paying the fixed ~60 cycles once
  // (GPT-mini, causal: 128 + 256 + 128 keys, a batch-head's two Q tiles
  // and the next one's first). In bf16 only: fp32 matmuls run at a quarter
  // of the rate, the Tensor engine is then the busier and the coarser
  // steps leave it waiting (GPT-mini f32 with valid_seq_len: 100 -> 110
  // us with groups of two; bf16, causal 45.9 -> 42.1 us with groups of
  // three, not causal 53.9 -> 48.7 us, bench/neuron_attention_masking). Not with
  // attn_mask (its tiles are loaded per chunk, a fixed distance ahead).
  struct Group {
    int64_t first = 0, count = 0;
  };
  std::vector<Group> groups;
  const bool grouped = !mask.on() && dt == DType::bf16;
  {
    int64_t cols = 0, pT_cols = 0;
    for (int64_t n = 0; n < static_cast<int64_t>(chunks.size()); ++n) {
      Chunk& c = chunks[n];
      const int64_t pT_w = ceil_div(c.w, kBlock) * c.rows;
      const Chunk* last = groups.empty() ? nullptr : &chunks[n - 1];
      const bool joins = last && grouped && groups.back().count < kGroup &&
                         last->h / G == c.h / G && last->rows == c.rows && cols + c.w <= kChunk &&
                         pT_cols + pT_w <= kChunk && (groups.back().count + 1) * Ev <= kChunk;
      if (!joins) {
        groups.push_back({n, 0});
        cols = pT_cols = 0;
      }
      c.col = cols;
      c.pT_col = pT_cols;
      c.pv_col = groups.back().count * Ev;
      cols += c.w;
      pT_cols += pT_w;
      ++groups.back().count;
    }
  }

  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // A chunk's scores are scaled out of PSUM into SBUF (fp32) at once, so
  // the PSUM port that the Vector and Scalar engines share is taken once
  // per score, and the max and exp read SBUF. A diagonal chunk is masked
  // in PSUM by the Tensor engine (CausalMask) when the scale is positive,
  // else in SBUF by GpSimd (which cannot read PSUM).
  const bool mm_mask = s.causal && s.scale > 0;
  std::optional<CausalMask> cmask;
  if (mm_mask) cmask.emplace(b, deps, dt, ident);
  // attn_mask: chunk n's tile in slot n % kMaskSlots, loaded kMaskAhead
  // chunks ahead of its stage 1.
  int64_t mask_loaded = 0;
  auto load_masks = [&](int64_t upto) {
    for (; mask.on() && mask_loaded <= upto && mask_loaded < static_cast<int64_t>(chunks.size());
         ++mask_loaded) {
      const Chunk& c = chunks[mask_loaded];
      mask.load(b, deps, static_cast<int>(mask_loaded % kMaskSlots), c.h, c.q0, c.rows, c.k0, c.w);
    }
  };
  auto ring = [&](int64_t n) { return static_cast<int>(n % kRing); };
  auto prev = [&](int64_t n) { return static_cast<int>((n + kRing - 1) % kRing); };
  // Stage 0 (Tensor): the raw scores in PSUM, masked there (causal, valid_seq_len).
  auto scores_matmul = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int hs = slot(c.h);
    const int32_t bank = s_ps[gi % kPsumRing];
    auto qk = [&](int64_t col, int64_t cols) {
      return tile_pattern(BufferKind::sbuf, qkT[hs], dt, part0(c.h), static_cast<int32_t>(E), col,
                          {{cols, 1}});
    };
    deps.track(b.matmul(ps(bank, c.rows, c.col, c.w), qk(c.q0, c.rows), qk(L + c.k0, c.w), false));
    if (c.diagonal && mm_mask) cmask->add(b, deps, bank, c.col, c.rows, c.q0, c.k0, c.w);
    if (valid.bias_in_psum()) valid.add_bias(b, deps, bank, c.col, c.rows, kbias[hs], c.k0, c.w);
  };
  // Without masking in SBUF the scores are kept negated, -s: their min is
  // -m, the exp's bias, with no negation per chunk.
  const bool negated = !mask.on() && (mm_mask || !s.causal) &&
                       !(valid.masks_keys() && !valid.bias_in_psum());
  const float sign = negated ? -1.0f : 1.0f;
  // Stage 1 (Scalar or Vector, whichever is less loaded): s = scale x scores
  // (or -s) into SBUF; masked there when not in PSUM.
  auto scale_scores = [&](int64_t gi) {
    const Chunk& last = chunks[groups[gi].first + groups[gi].count - 1];
    const int64_t cols = last.col + last.w;
    const AccessPattern raw = ps(s_ps[gi % kPsumRing], last.rows, 0, cols);
    const AccessPattern all = sb(s_sb[gi % kScoresRing], DType::f32, last.rows, 0, cols);
    if (load.lighter(b.program(), cols) == Engine::vector)
      deps.track(b.tensor_scalar(Engine::vector, all, raw, AluOp::multiply, sign * s.scale));
    else
      deps.track(b.activation(all, raw, ActivationFunction::identity, sign * s.scale));
  };
  // The masks applied in SBUF, per chunk after scale_scores.
  auto mask_scores = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int hs = slot(c.h), g = ring(n);
    const AccessPattern scores = sb(s_sb[gi % kScoresRing], DType::f32, c.rows, c.col, c.w);
    // Keep key k0 + x for row q0 + p when (q0 - k0) + p - x >= 0.
    if (c.diagonal && !mm_mask)
      deps.track(b.affine_select(scores, scores, AffineExpr{c.q0 - c.k0, 1, {-1}},
                                 CmpOp::greater_equal, kNegInf));
    if (valid.masks_keys() && !valid.bias_in_psum())
      valid.add_scaled_bias(b, deps, scores, c.rows, kbias[hs], c.k0, c.w);
    if (!mask.on()) return;
    const int slot = static_cast<int>(n % kMaskSlots);
    std::optional<AccessPattern> key_bias;
    if (valid.masks_keys()) key_bias = valid.bias_keys(kbias[hs], c.rows, c.k0, c.w);
    mask.prepare(b, deps, slot, c.rows, c.w, column(kept[g], c.rows), key_bias);
    mask.apply(b, deps, scores, slot, c.rows, c.w);
  };
  // Stage 2 (Vector): the running max, kept negated (-m, the exp's bias).
  auto row_max = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int g = ring(n), pg = prev(n);
    const int64_t rows = c.rows;
    const AccessPattern scores = sb(s_sb[gi % kScoresRing], DType::f32, rows, c.col, c.w);
    const int32_t dst = c.first ? negm[g] : mc[g]; // the chunk's -m
    if (negated) {
      deps.track(b.tensor_reduce(Engine::vector, column(dst, rows), scores, AluOp::min));
    } else {
      deps.track(b.tensor_reduce(Engine::vector, column(mc[g], rows), scores, AluOp::max));
      deps.track(b.tensor_scalar(Engine::vector, column(dst, rows), column(mc[g], rows),
                                 AluOp::multiply, -1.0f));
    }
    if (!c.first)
      deps.track(b.tensor_tensor(Engine::vector, column(negm[g], rows), column(negm[pg], rows),
                                 column(mc[g], rows), AluOp::min));
  };
  // Stage 3 (Scalar): p = exp(s - m) with its row sum (the tile's l when
  // first); alpha = exp(m_old - m).
  auto exp_scores = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int g = ring(n), pg = prev(n);
    const int64_t rows = c.rows;
    int64_t i = b.activation(sb(p_sb[gi % kPRing], dt, rows, c.col, c.w),
                             sb(s_sb[gi % kScoresRing], DType::f32, rows, c.col, c.w),
                             ActivationFunction::exp, sign);
    b.at(i).bias = column(negm[g], rows);
    b.at(i).accum = column(c.first ? l[g] : rowsum[g], rows);
    deps.track(i);
    if (!c.first) { // exp(-(-m_old) + (-m))
      i = b.activation(column(alpha[g], rows), column(negm[pg], rows), ActivationFunction::exp,
                       -1.0f);
      b.at(i).bias = column(negm[g], rows);
      deps.track(i);
    }
  };
  // Stage 4 (Vector): l = l alpha + rowsum; after a tile's last chunk the
  // output's factor keep / l (keep: 0 for the rows that keep no key, else 1).
  auto row_stats = [&](int64_t n, int64_t) {
    const Chunk& c = chunks[n];
    const int g = ring(n), pg = prev(n), t = static_cast<int>(c.tile % 2);
    const int64_t rows = c.rows;
    if (mask.on()) { // the tile's row flags: the max over its chunks
      const AccessPattern run = column(kept_run[t], rows);
      if (c.first)
        deps.track(b.tensor_copy(Engine::vector, run, column(kept[g], rows)));
      else
        deps.track(b.tensor_tensor(Engine::vector, run, run, column(kept[g], rows), AluOp::max));
    }
    if (!c.first) {
      deps.track(b.tensor_tensor(Engine::vector, column(l[g], rows), column(l[pg], rows),
                                 column(alpha[g], rows), AluOp::multiply));
      deps.track(b.tensor_tensor(Engine::vector, column(l[g], rows), column(l[g], rows),
                                 column(rowsum[g], rows), AluOp::add));
    }
    if (!c.last) return;
    const AccessPattern factor = column(keep[g], rows);
    if (valid.on() || mask.on()) {
      if (valid.on()) valid.row_keep(b, deps, factor, c.h, c.q0 / kBlock, rows);
      if (mask.on() && valid.on())
        deps.track(
            b.tensor_tensor(Engine::vector, factor, factor, column(kept_run[t], rows), AluOp::multiply));
      else if (mask.on())
        deps.track(b.tensor_copy(Engine::vector, factor, column(kept_run[t], rows)));
      deps.track(b.tensor_tensor(Engine::vector, factor, factor, column(l[g], rows), AluOp::divide));
    } else {
      const int64_t i = b.tensor_scalar(Engine::vector, factor, column(l[g], rows), AluOp::divide, 1.0f);
      b.at(i).reverse = true; // 1 / l
      deps.track(i);
    }
  };
  // Stage 4 (Tensor): p^T per 128-key block, [keys, rows] side by side in
  // one PSUM bank.
  auto transpose_p = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int64_t rows = c.rows, w = c.w;
    for (int64_t blk = 0; blk * kBlock < w; ++blk) {
      const int64_t kb = std::min(kBlock, w - blk * kBlock);
      deps.track(b.matmul(ps(pT_ps[gi % 2], kb, c.pT_col + blk * rows, rows),
                          sb(p_sb[gi % kPRing], dt, rows, c.col + blk * kBlock, kb),
                          sb(ident, dt, rows, 0, rows), false));
    }
  };
  // Stage 5 (Scalar or Vector): p^T copied to SBUF.
  auto copy_pT = [&](int64_t gi) {
    int64_t cols = 0, kparts = 0;
    for (int64_t n = groups[gi].first; n < groups[gi].first + groups[gi].count; ++n) {
      cols = chunks[n].pT_col + ceil_div(chunks[n].w, kBlock) * chunks[n].rows;
      kparts = std::max(kparts, std::min(kBlock, chunks[n].w));
    }
    deps.track(b.tensor_copy(load.lighter(b.program(), cols),
                             sb(pT_sb[gi % kPRing], dt, kparts, 0, cols),
                             ps(pT_ps[gi % 2], kparts, 0, cols)));
  };
  // Stage 6 (Tensor): p v accumulated over the blocks.
  auto pv_matmul = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int hs = slot(c.h);
    const int64_t rows = c.rows, w = c.w;
    for (int64_t blk = 0; blk * kBlock < w; ++blk) {
      const int64_t kb = std::min(kBlock, w - blk * kBlock);
      deps.track(b.matmul(ps(pv_ps[gi % 2], rows, c.pv_col, Ev),
                          sb(pT_sb[gi % kPRing], dt, kb, c.pT_col + blk * rows, rows),
                          sb(vv[hs], dt, kb, v_col(c.h) + (c.k0 / kBlock + blk) * Ev, Ev),
                          blk > 0));
    }
  };
  // Stage 7 (Vector): l = l alpha + rowsum, o = o alpha + p v; after a
  // tile's last chunk out = o / l, stored (and the statistics when asked for).
  auto update_output = [&](int64_t n, int64_t gi) {
    const Chunk& c = chunks[n];
    const int g = ring(n);
    const int t = static_cast<int>(c.tile % 2), to = static_cast<int>(c.tile % nout);
    const int64_t rows = c.rows;
    const AccessPattern o = sb(o_run[t], DType::f32, rows, 0, Ev);
    const AccessPattern pv = ps(pv_ps[gi % 2], rows, c.pv_col, Ev);
    if (c.first && !c.last) {
      deps.track(b.tensor_copy(Engine::vector, o, pv));
    } else if (!c.first) {
      deps.track(
          b.tensor_tensor(Engine::vector, o, o, broadcast(alpha[g], rows, Ev), AluOp::multiply));
      deps.track(b.tensor_tensor(Engine::vector, o, o, pv, AluOp::add));
    }
    if (!c.last) return;
    const int64_t i = b.activation(sb(o_out[to], dt, rows, 0, Ev), c.first ? pv : o,
                                   ActivationFunction::identity, 1.0f);
    b.at(i).scale_column = column(keep[g], rows);
    deps.track(i);
    const int64_t row0 = c.h * L + c.q0;
    const int32_t r = static_cast<int32_t>(rows);
    deps.track(b.dma_copy(head_rows(out_hbm, dt, s.heads.out, L, Ev, c.h, c.q0, rows),
                          sb(o_out[to], dt, rows, 0, Ev)));
    if (s.save_stats) {
      deps.track(b.tensor_scalar(Engine::vector, column(m[g], rows), column(negm[g], rows),
                                 AluOp::multiply, -1.0f));
      deps.track(b.dma_copy(hbm_rows(max_hbm, DType::f32, 1, row0, r, 0, 1), column(m[g], rows)));
      deps.track(b.dma_copy(hbm_rows(sum_hbm, DType::f32, 1, row0, r, 0, 1), column(l[g], rows)));
    }
  };

  // Software pipelined: iteration i emits stage k of group i - kLag[k],
  // the later groups' stages first (equal lags in stage order), so each
  // engine's queue interleaves independent groups and an instruction mostly
  // waits for work emitted an iteration earlier, not for its own group's
  // previous stage (the queues are in order: a wait there would hold
  // everything behind it). The lags: the scores matmul and their copy out
  // of PSUM go together, as do p v and the output (each pair's second
  // reads PSUM the first just wrote: short waits), the stages between an
  // iteration apart (chosen among the 128 tables with steps of 0 or 1 on
  // GPT-mini's attention, bf16 causal, not causal, f32 and with lengths:
  // within 1.5% of the best table on each). A unit's slot is reloaded (for unit
  // u + nslots) once its last reader, the p v of its last chunk, is
  // emitted. With attn_mask a group is one chunk: its tiles are loaded
  // kMaskAhead ahead.
  constexpr int kLag[kLastStage + 1] = {0, 0, 1, 2, 3, 4, 5, 5};
  for (int64_t u = 0; u < std::min<int64_t>(nslots, units); ++u) load_unit(u);
  const int64_t n_groups = static_cast<int64_t>(groups.size());
  auto unit_of = [&](int64_t gi) { return chunks[groups[gi].first].h / G; };
  auto stage = [&](int k, int64_t gi) {
    auto each = [&](auto&& emit) {
      for (int64_t n = groups[gi].first; n < groups[gi].first + groups[gi].count; ++n) emit(n, gi);
    };
    switch (k) {
    case 0:
      // `start` (below) emits a unit's loads before its first group.
      if (!unit_loaded[unit_of(gi)])
        throw_if_error(absl::InternalError(absl::StrCat(
            "attention_forward_program: unit ", unit_of(gi), " not loaded before its first group")));
      transpose_unit(unit_of(gi));
      each(scores_matmul);
      return;
    case 1:
      scale_scores(gi);
      each(mask_scores);
      return;
    case 2:
      each(row_max);
      return;
    case 3:
      each(exp_scores);
      return;
    case 4:
      each(transpose_p);
      each(row_stats);
      return;
    case 5:
      copy_pT(gi);
      return;
    case 6: {
      each(pv_matmul);
      const int64_t u = unit_of(gi);
      if ((gi + 1 == n_groups || unit_of(gi + 1) != u) && u + nslots < units) load_unit(u + nslots);
      return;
    }
    default:
      each(update_output);
    }
  };
  // The iteration each group starts at: the one after the previous group's,
  // or later when its unit's slot is freed (the p v of the last group of
  // unit u - nslots, stage 6) less than an iteration before: fewer slots
  // than units in flight (large resident operands, one group per unit),
  // the pipeline then waits instead of overwriting a slot still to be read.
  std::vector<int64_t> start(n_groups, 0), last_group(units, 0);
  for (int64_t g = 0; g < n_groups; ++g) last_group[unit_of(g)] = g;
  for (int64_t g = 1; g < n_groups; ++g) {
    start[g] = start[g - 1] + 1;
    const int64_t u = unit_of(g);
    if (u != unit_of(g - 1) && u >= nslots)
      start[g] = std::max(start[g], start[last_group[u - nslots]] + kLag[6] + 1);
  }
  const int64_t iterations = n_groups == 0 ? 0 : start.back() + kLag[kLastStage] + 1;
  std::vector<int64_t> group_at(iterations, -1); // the group starting at an iteration
  for (int64_t g = 0; g < n_groups; ++g) group_at[start[g]] = g;
  auto group_started = [&](int64_t t) {
    return t >= 0 && t < iterations ? group_at[t] : int64_t{-1};
  };
  int64_t started = -1; // the last group whose start is at most the iteration
  for (int64_t i = 0; i < iterations; ++i) {
    for (int64_t t = i; t <= i + kMaskAhead; ++t)
      if (group_started(t) >= 0) started = std::max(started, group_started(t));
    load_masks(started);
    // The next group's unit transposed an iteration ahead, so the copies
    // out of PSUM overlap this iteration, when its loads were emitted two
    // iterations ago or earlier: a transpose (and a zeroing select) waiting
    // for a DMA just issued would hold the in-order Tensor (and Vector) queue.
    now = i;
    if (const int64_t next = group_started(i + 1);
        next >= 0 && unit_loaded[unit_of(next)] && loaded_at[unit_of(next)] <= i - 2)
      transpose_unit(unit_of(next));
    for (int k = kLastStage; k >= 0;) { // by decreasing lag, equal lags in stage order
      int first = k;
      while (first > 0 && kLag[first - 1] == kLag[k]) --first;
      for (int j = first; j <= k; ++j)
        if (const int64_t g = group_started(i - kLag[j]); g >= 0) stage(j, g);
      k = first - 1;
    }
  }
  return b.take();
}

} // namespace mstep::neuron
