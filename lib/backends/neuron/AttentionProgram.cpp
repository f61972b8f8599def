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
constexpr int kMaxSlots = 4; ///< batch-heads resident in the forward
/// attn_mask tiles: loaded kMaskAhead chunks ahead; a tile is read in its
/// chunk's stage 1, so kMaskAhead + 2 slots leave one load in flight.
constexpr int kMaskAhead = 2, kMaskSlots = kMaskAhead + 2;
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

  // Per batch-head slot: q^T [E, L], k^T [E, S], v [128, kblocks x Ev]
  // and q and k by rows (OnChipTranspose); batch-head h in slot h % nslots,
  // up to four slots as fit in half of SBUF, so the loads of the next
  // batch-heads overlap the work on this one even when it is short; with
  // valid_seq_len, each slot's key bias too. When two slots with their
  // rows do not fit, two slots (attention_tileable) share one pair of rows
  // tiles, each batch-head's loaded once the one before is transposed.
  const int64_t half = kSbufBytesPerPartition / 2;
  const int64_t rows_bytes =
      OnChipTranspose::rows_bytes(dt, E, L) + OnChipTranspose::rows_bytes(dt, E, S);
  const bool rows_per_slot = 2 * (head_bytes(s) + rows_bytes) <= half;
  const int nslots =
      rows_per_slot
          ? static_cast<int>(std::clamp<int64_t>(half / (head_bytes(s) + rows_bytes), 2, kMaxSlots))
          : 2;
  const int nrows = rows_per_slot ? nslots : 1;
  int32_t qT[kMaxSlots], kT[kMaxSlots], vv[kMaxSlots], kbias[kMaxSlots];
  int32_t q_rows[kMaxSlots], k_rows[kMaxSlots];
  for (int h = 0; h < std::min<int64_t>(nslots, s.batch); ++h) {
    qT[h] = sbuf(L * es, absl::StrCat("qT", h));
    kT[h] = sbuf(S * es, absl::StrCat("kT", h));
    vv[h] = sbuf(kblocks * Ev * es, absl::StrCat("v", h));
    kbias[h] = valid.allocate_bias(b, h);
    if (h >= nrows) continue;
    q_rows[h] = sbuf(OnChipTranspose::rows_bytes(dt, E, L), absl::StrCat("q_rows", h));
    k_rows[h] = sbuf(OnChipTranspose::rows_bytes(dt, E, S), absl::StrCat("k_rows", h));
  }
  // Per chunk, rotating: scores, p and the row statistics over 3 chunks
  // (stage 2 of chunk n+2 runs ahead of stage 4 of chunk n, which reads
  // chunk n-1's l), p^T and p v over 2.
  constexpr int kRing = 3;
  int32_t s_ps[kRing], s_sb[kRing], p_sb[kRing];
  int32_t negm[kRing], mc[kRing], rowsum[kRing], alpha[kRing], l[kRing], m[kRing], keep[kRing];
  int32_t kept[kRing]; // attn_mask: the chunk's "some key kept" row flags
  for (int g = 0; g < kRing; ++g) {
    s_ps[g] = psum(absl::StrCat("scores", g));
    s_sb[g] = sbuf(kChunk * 4, absl::StrCat("s", g));
    p_sb[g] = sbuf(kChunk * es, absl::StrCat("p", g));
    negm[g] = sbuf(4, absl::StrCat("neg_m", g));
    mc[g] = sbuf(4, absl::StrCat("chunk_neg_m", g));
    rowsum[g] = sbuf(4, absl::StrCat("rowsum", g));
    alpha[g] = sbuf(4, absl::StrCat("alpha", g));
    l[g] = sbuf(4, absl::StrCat("l", g));
    m[g] = s.save_stats ? sbuf(4, absl::StrCat("m", g)) : -1;
    keep[g] = valid.on() || mask.on() ? sbuf(4, absl::StrCat("row_keep", g)) : -1;
    kept[g] = mask.on() ? sbuf(4, absl::StrCat("chunk_kept", g)) : -1;
  }
  int32_t pT_ps[2], pT_sb[2], pv_ps[2];
  for (int g = 0; g < 2; ++g) {
    pT_ps[g] = psum(absl::StrCat("pT_psum", g));
    pv_ps[g] = psum(absl::StrCat("pv", g));
    pT_sb[g] = sbuf(kChunk * es, absl::StrCat("pT", g));
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

  // q and k by rows (q^T and k^T are made from them on chip, transpose_head
  // below, shortly before the batch-head's first chunk), v in 128-key blocks.
  const OnChipTranspose tr{ident, psum("qkT_psum"), dt};
  std::vector<bool> loaded(s.batch, false), transposed(s.batch, false);
  // The pipeline iteration (below) that emitted a batch-head's last loads.
  int64_t now = -2;
  std::vector<int64_t> loaded_at(s.batch, now);
  auto load_rows = [&](int64_t h) {
    const int r = static_cast<int>(h % nrows);
    tr.load(b, deps, q_rows[r], q_hbm, E, h * L, L);
    tr.load(b, deps, k_rows[r], k_hbm, E, h * S, S);
    loaded[h] = true;
    loaded_at[h] = now;
  };
  auto load_head = [&](int64_t h) {
    const int hs = static_cast<int>(h % nslots);
    loaded_at[h] = now;
    if (rows_per_slot || h == 0) load_rows(h);
    for (int64_t kb = 0; kb < kblocks; ++kb) {
      const int64_t rows = std::min(kBlock, S - kb * kBlock);
      deps.track(b.dma_copy(sb(vv[hs], dt, rows, kb * Ev, Ev),
                            hbm_rows(v_hbm, dt, Ev, h * S + kb * kBlock, static_cast<int32_t>(rows),
                                     0, Ev)),
                 /*partial_write=*/true);
    }
  };
  // valid_seq_len: a batch-head's key masks, and its padded keys (rows) zeroed
  // in k (q) by rows before the transposes, which then carry the zeros into
  // k^T (q^T), while a NaN left in a row would reach every key (row) of the
  // transpose through the identity matmul, 0 x NaN = NaN; and in v. With the
  // transposes, not with the loads, because the Vector queue is in order:
  // a select there would hold it until the DMA lands.
  auto transpose_head = [&](int64_t h) {
    if (!loaded[h] || transposed[h]) return;
    const int hs = static_cast<int>(h % nslots), r = static_cast<int>(h % nrows);
    if (valid.on()) {
      valid.prepare_head(b, deps, h, kbias[hs]);
      valid.zero_query_rows(b, deps, q_rows[r], dt, E);
      valid.zero_key_rows(b, deps, k_rows[r], dt, E);
      valid.zero_key_rows(b, deps, vv[hs], dt, Ev);
    }
    tr.transpose(b, deps, q_rows[r], E, L, qT[hs]);
    tr.transpose(b, deps, k_rows[r], E, S, kT[hs]);
    transposed[h] = true;
    if (!rows_per_slot && h + 1 < s.batch) load_rows(h + 1);
  };

  // Every (batch-head, Q tile, key chunk) the program computes, in order;
  // causal: chunks wholly above the diagonal (every key > every row) are
  // skipped, so the first chunk of a tile (keys from 0) is never empty.
  struct Chunk {
    int64_t h, q0, rows, tile, k0, w;
    bool first, last, diagonal;
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

  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // A chunk's scores stay in PSUM, unscaled, unless the scale is not
  // positive (the max of the scaled scores is then not scale x the max);
  // a diagonal chunk is then masked there by the Tensor engine (CausalMask),
  // else scaled into SBUF and masked by GpSimd (which cannot read PSUM).
  const bool mm_mask = s.causal && s.scale > 0;
  std::optional<CausalMask> cmask;
  if (mm_mask) cmask.emplace(b, deps, dt, ident);
  auto in_psum = [&](const Chunk&) { return s.scale > 0 && !mask.on(); };
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
  // Stage 1: scores; scaled into SBUF and masked when the chunk crosses the diagonal.
  auto stage1 = [&](int64_t n) {
    const Chunk& c = chunks[n];
    const int hs = static_cast<int>(c.h % nslots), g = static_cast<int>(n % kRing);
    deps.track(b.matmul(ps(s_ps[g], c.rows, 0, c.w), sb(qT[hs], dt, E, c.q0, c.rows),
                        sb(kT[hs], dt, E, c.k0, c.w), false));
    if (c.diagonal && mm_mask) cmask->add(b, deps, s_ps[g], 0, c.rows, c.q0, c.k0, c.w);
    if (valid.bias_in_psum()) valid.add_bias(b, deps, s_ps[g], 0, c.rows, kbias[hs], c.k0, c.w);
    if (in_psum(c)) return;
    const AccessPattern scores = sb(s_sb[g], DType::f32, c.rows, 0, c.w);
    deps.track(
        b.activation(scores, ps(s_ps[g], c.rows, 0, c.w), ActivationFunction::identity, s.scale));
    // Keep key k0 + x for row q0 + p when (q0 - k0) + p - x >= 0.
    if (c.diagonal)
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
  // Stage 2: the running max, kept negated (-m, the exp's bias); p = exp(s - m)
  // with its row sum (the tile's l when first); alpha = exp(m_old - m).
  auto stage2 = [&](int64_t n) {
    const Chunk& c = chunks[n];
    const int g = static_cast<int>(n % kRing), pg = static_cast<int>((n + kRing - 1) % kRing);
    const int64_t rows = c.rows;
    const bool raw = in_psum(c);
    const AccessPattern scores =
        raw ? ps(s_ps[g], rows, 0, c.w) : sb(s_sb[g], DType::f32, rows, 0, c.w);
    const float to_neg_m = raw ? -s.scale : -1.0f; // chunk max -> -m in scaled units
    deps.track(b.tensor_reduce(Engine::vector, column(mc[g], rows), scores, AluOp::max));
    if (c.first) {
      deps.track(b.tensor_scalar(Engine::vector, column(negm[g], rows), column(mc[g], rows),
                                 AluOp::multiply, to_neg_m));
    } else {
      deps.track(b.tensor_scalar(Engine::vector, column(mc[g], rows), column(mc[g], rows),
                                 AluOp::multiply, to_neg_m));
      deps.track(b.tensor_tensor(Engine::vector, column(negm[g], rows), column(negm[pg], rows),
                                 column(mc[g], rows), AluOp::min));
    }
    int64_t i = b.activation(sb(p_sb[g], dt, rows, 0, c.w), scores, ActivationFunction::exp,
                             raw ? s.scale : 1.0f);
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
  // Stage 3: p^T per 128-key block ([keys, rows] side by side in one PSUM
  // bank, copied to SBUF by the Scalar engine: the Vector engine is the
  // busier), then p v accumulated over the blocks.
  auto stage3 = [&](int64_t n) {
    const Chunk& c = chunks[n];
    const int hs = static_cast<int>(c.h % nslots), g = static_cast<int>(n % kRing);
    const int g2 = static_cast<int>(n % 2);
    const int64_t rows = c.rows, w = c.w, blocks = ceil_div(w, kBlock);
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t kb = std::min(kBlock, w - blk * kBlock);
      deps.track(b.matmul(ps(pT_ps[g2], kb, blk * rows, rows),
                          sb(p_sb[g], dt, rows, blk * kBlock, kb), sb(ident, dt, rows, 0, rows),
                          false));
    }
    const int64_t kparts = std::min(kBlock, w);
    deps.track(b.tensor_copy(Engine::scalar, sb(pT_sb[g2], dt, kparts, 0, blocks * rows),
                             ps(pT_ps[g2], kparts, 0, blocks * rows)));
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t kb = std::min(kBlock, w - blk * kBlock);
      deps.track(b.matmul(ps(pv_ps[g2], rows, 0, Ev), sb(pT_sb[g2], dt, kb, blk * rows, rows),
                          sb(vv[hs], dt, kb, (c.k0 / kBlock + blk) * Ev, Ev), blk > 0));
    }
  };
  // Stage 4: l = l alpha + rowsum, o = o alpha + p v; after a tile's last
  // chunk out = o / l, stored (and the statistics when asked for).
  auto stage4 = [&](int64_t n) {
    const Chunk& c = chunks[n];
    const int g = static_cast<int>(n % kRing), pg = static_cast<int>((n + kRing - 1) % kRing);
    const int g2 = static_cast<int>(n % 2), t = static_cast<int>(c.tile % 2);
    const int to = static_cast<int>(c.tile % nout);
    const int64_t rows = c.rows;
    const AccessPattern o = sb(o_run[t], DType::f32, rows, 0, Ev);
    if (mask.on()) { // the tile's row flags: the max over its chunks
      const AccessPattern run = column(kept_run[t], rows);
      if (c.first)
        deps.track(b.tensor_copy(Engine::vector, run, column(kept[g], rows)));
      else
        deps.track(b.tensor_tensor(Engine::vector, run, run, column(kept[g], rows), AluOp::max));
    }
    if (c.first) {
      deps.track(b.tensor_copy(Engine::vector, o, ps(pv_ps[g2], rows, 0, Ev)));
    } else {
      deps.track(b.tensor_tensor(Engine::vector, column(l[g], rows), column(l[pg], rows),
                                 column(alpha[g], rows), AluOp::multiply));
      deps.track(b.tensor_tensor(Engine::vector, column(l[g], rows), column(l[g], rows),
                                 column(rowsum[g], rows), AluOp::add));
      deps.track(
          b.tensor_tensor(Engine::vector, o, o, broadcast(alpha[g], rows, Ev), AluOp::multiply));
      deps.track(b.tensor_tensor(Engine::vector, o, o, ps(pv_ps[g2], rows, 0, Ev), AluOp::add));
    }
    if (!c.last) return;
    if (valid.on() || mask.on()) { // out = o (keep / l): zeros for the rows that keep no key
      if (valid.on()) valid.row_keep(b, deps, column(keep[g], rows), c.h, c.q0 / kBlock, rows);
      if (mask.on() && valid.on())
        deps.track(b.tensor_tensor(Engine::vector, column(keep[g], rows), column(keep[g], rows),
                                   column(kept_run[t], rows), AluOp::multiply));
      else if (mask.on())
        deps.track(b.tensor_copy(Engine::vector, column(keep[g], rows), column(kept_run[t], rows)));
      deps.track(b.tensor_tensor(Engine::vector, column(keep[g], rows), column(keep[g], rows),
                                 column(l[g], rows), AluOp::divide));
      deps.track(b.tensor_tensor(Engine::vector, sb(o_out[to], dt, rows, 0, Ev), o,
                                 broadcast(keep[g], rows, Ev), AluOp::multiply));
    } else {
      deps.track(b.tensor_tensor(Engine::vector, sb(o_out[to], dt, rows, 0, Ev), o,
                                 broadcast(l[g], rows, Ev), AluOp::divide));
    }
    const int64_t row0 = c.h * L + c.q0;
    const int32_t r = static_cast<int32_t>(rows);
    deps.track(
        b.dma_copy(hbm_rows(out_hbm, dt, Ev, row0, r, 0, Ev), sb(o_out[to], dt, rows, 0, Ev)));
    if (s.save_stats) {
      deps.track(b.tensor_scalar(Engine::vector, column(m[g], rows), column(negm[g], rows),
                                 AluOp::multiply, -1.0f));
      deps.track(b.dma_copy(hbm_rows(max_hbm, DType::f32, 1, row0, r, 0, 1), column(m[g], rows)));
      deps.track(b.dma_copy(hbm_rows(sum_hbm, DType::f32, 1, row0, r, 0, 1), column(l[g], rows)));
    }
  };

  // Software pipelined, four chunks in flight: iteration i emits stage 4 of
  // chunk i-3, 3 of i-2, 2 of i-1 and 1 of i, so each engine's queue
  // interleaves independent chunks. A batch-head's slot is reloaded (for
  // batch-head h + nslots) once its last reader, stage 3 of its last chunk,
  // is emitted.
  for (int64_t h = 0; h < std::min<int64_t>(nslots, s.batch); ++h) load_head(h);
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  for (int64_t i = 0; i < n_chunks + 3; ++i) {
    load_masks(i + kMaskAhead);
    // The next chunk's batch-head transposed an iteration ahead, so the
    // copies out of PSUM overlap this iteration, when its loads were
    // emitted two iterations ago or earlier: a transpose (and a zeroing
    // select) waiting for a DMA just issued would hold the in-order Tensor
    // (and Vector) queue (one chunk per batch-head, gpt_train's attention:
    // 70.2 -> 61.8 us, right padding 121.3 -> 63.8 us).
    now = i;
    if (i + 1 < n_chunks && loaded_at[chunks[i + 1].h] <= i - 2) transpose_head(chunks[i + 1].h);
    if (i >= 3) stage4(i - 3);
    if (i >= 2 && i - 2 < n_chunks) {
      stage3(i - 2);
      const Chunk& c = chunks[i - 2];
      const bool head_done = i - 2 + 1 == n_chunks || chunks[i - 1].h != c.h;
      if (head_done && c.h + nslots < s.batch) load_head(c.h + nslots);
    }
    if (i >= 1 && i - 1 < n_chunks) stage2(i - 1);
    if (i < n_chunks) {
      transpose_head(chunks[i].h);
      stage1(i);
    }
  }
  return b.take();
}

} // namespace mstep::neuron
