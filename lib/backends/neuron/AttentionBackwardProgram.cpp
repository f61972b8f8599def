// attention_backward_program: the backward's software-pipelined loop nest
// (AttentionProgram.h).
#include "lib/backends/neuron/AttentionProgram.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionBackwardPlan.h"
#include "lib/backends/neuron/AttentionMask.h"
#include "lib/backends/neuron/AttentionTiles.h"
#include "lib/backends/neuron/AttentionValidLength.h"
#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/TileBuilder.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

using namespace attention_tiles;
using namespace attention_backward;

absl::Status attention_backward_tileable(const AttentionShape& s) {
  MSTEP_RETURN_IF_ERROR(attention_tileable(s));
  if (s.value_dim > kMatmulMaxK)
    return absl::UnimplementedError(absl::StrCat("attention backward: value dim Ev = ", s.value_dim,
                                                 " > ", kMatmulMaxK, " (the dP contraction)"));
  if (backward_bytes(s) > kSbufBytesPerPartition / 2)
    return absl::UnimplementedError(
        absl::StrCat("attention backward: one batch-head needs ", backward_bytes(s),
                     " SBUF bytes per partition, over ", kSbufBytesPerPartition / 2));
  return absl::OkStatus();
}

TileProgram attention_backward_program(const AttentionShape& s) {
  const DType dt = s.dtype;
  const int64_t es = static_cast<int64_t>(element_size(dt));
  const int64_t L = s.q_len, S = s.kv_len, E = s.head_dim, Ev = s.value_dim;
  const int64_t tiles = ceil_div(L, kBlock), blocks = ceil_div(S, kBlock);
  TileBuilder b(s.causal ? "attention_bwd_causal" : "attention_bwd");
  DependencyTracker deps(b);
  const int32_t do_hbm = b.hbm_tensor("grad_out", dt, s.batch * L * Ev);
  const int32_t q_hbm = b.hbm_tensor("q", dt, s.batch * L * E);
  const int32_t k_hbm = b.hbm_tensor("k", dt, s.batch * S * E);
  const int32_t v_hbm = b.hbm_tensor("v", dt, s.batch * S * Ev);
  const int32_t dq_hbm = b.hbm_tensor("dq", dt, s.batch * L * E);
  const int32_t dk_hbm = b.hbm_tensor("dk", dt, s.batch * S * E);
  const int32_t dv_hbm = b.hbm_tensor("dv", dt, s.batch * S * Ev);
  auto sbuf = [&](int64_t bytes, std::string name) {
    return b.allocate(BufferKind::sbuf, bytes, std::move(name));
  };
  auto psum = [&](std::string name) {
    return b.allocate(BufferKind::psum, kPsumBankBytes, std::move(name));
  };
  const int32_t ident = make_identity(b, deps, dt);
  ValidLength valid(b, deps, s);
  // attn_mask: item n's tile in slot n % nwork (its working set), loaded
  // two items ahead of its stage A.
  constexpr int nwork = 4;
  constexpr int64_t chunk1 = kChunk / 2; // pass 1's key chunks (below)
  AttentionMask mask(b, deps, s, nwork, chunk1);
  const int32_t ones = sbuf(4, "one");
  deps.track(b.iota(column(ones, kBlock), AffineExpr{1, 0, {0}}));
  // dQ accumulates in one PSUM bank across the key blocks when every Q
  // tile's [rows, E] fits side by side; else in SBUF (fp32), by Vector adds.
  const bool dq_in_psum = tiles * E * 4 <= kPsumBankBytes;
  // Pass 2 reuses pass 1's exp(scale S - m) and dP (kept per Q tile, fp32)
  // when every Q tile's keys fit one pass 1 chunk (m is then final after
  // it): no second QK^T, dO v^T and exp per key block, and no PSUM reads
  // for them.
  const OperandPairing pairing = operand_pairing(s);
  const bool reuse = tile_keys(s, L - 1, 1) <= chunk1 &&
                     set_bytes(s, pairing, true) <= kSbufBytesPerPartition / 2;
  const float sign = reuse ? -1.0f : 1.0f; // reuse: the gradients are accumulated negated
  const OperandPairing pair =
      set_bytes(s, pairing, reuse) <= kSbufBytesPerPartition / 2 ? pairing : OperandPairing{};
  // Where q, dO (k, v) sit in their rows tiles, and q^T, dO^T (k^T, v^T) on
  // the partitions of theirs: paired, dO after q in one tile.
  const int64_t q_pitch = pair.on ? pair.pitch : E, do_pitch = pair.on ? pair.pitch : Ev;
  const int64_t do_col = pair.on ? pair.second : 0;
  // Paired, with L + S columns in one PSUM bank: q^T|dO^T and k^T|v^T side
  // by side in one SBUF tile (k^T from column L), one copy out of PSUM.
  const bool one_copy = pair.on && L + S <= kChunk;
  const int64_t kT_col = one_copy ? L : 0;
  // Resident per batch-head, up to kMaxSets sets (batch-head h in set h %
  // nsets) as fit in half of SBUF, so the next batch-heads' loads overlap
  // this one's work (issued kMaxSets - 1 batch-heads ahead).
  struct HeadSet {
    int32_t qT, kT, doT, vT, q_rows, do_rows, k_rows, v_rows, dq_acc, negm, rl, l, dsum;
    int32_t ds_bias; ///< per tile, pass 2's bias: -D
    int32_t dq_out;
    int32_t kbias = -1; ///< valid_seq_len's key bias
    int32_t kept = -1;  ///< attn_mask: per tile, 1 where the row keeps a key
    /// reuse: per Q tile -P = -exp(scale S - m) / l in the dtype and dP (fp32).
    std::vector<int32_t> p_in_kept, dp_kept;
  };
  constexpr int64_t kMaxSets = 8;
  const int nsets = static_cast<int>(std::clamp<int64_t>(
      kSbufBytesPerPartition / 2 / set_bytes(s, pair, reuse), 1, kMaxSets));
  std::vector<HeadSet> sets;
  for (int g = 0; g < nsets; ++g) {
    auto n = [&](const char* what) { return absl::StrCat(what, g); };
    HeadSet hs;
    hs.qT = sbuf((one_copy ? L + S : L) * es, n(one_copy ? "qdkvT" : pair.on ? "qdT" : "qT"));
    hs.doT = pair.on ? hs.qT : sbuf(L * es, n("doT"));
    hs.kT = one_copy ? hs.qT : sbuf(S * es, n(pair.on ? "kvT" : "kT"));
    hs.vT = pair.on ? hs.kT : sbuf(S * es, n("vT"));
    hs.q_rows = sbuf(tiles * q_pitch * es, n(pair.on ? "qd_rows" : "q_rows"));
    hs.do_rows = pair.on ? hs.q_rows : sbuf(tiles * Ev * es, n("do_rows"));
    hs.k_rows = sbuf(blocks * q_pitch * es, n(pair.on ? "kv_rows" : "k_rows"));
    hs.v_rows = pair.on ? hs.k_rows : sbuf(blocks * Ev * es, n("v_rows"));
    hs.dq_acc = dq_in_psum ? -1 : sbuf(tiles * E * 4, n("dq_acc"));
    hs.negm = sbuf(tiles * 4, n("neg_m"));
    hs.rl = sbuf(tiles * 4, n("inv_l"));
    hs.l = sbuf(tiles * 4, n("l"));
    hs.dsum = sbuf(tiles * 4, n("D"));
    hs.ds_bias = sbuf(tiles * 4, n("ds_bias"));
    hs.dq_out = sbuf(tiles * E * es, n("dq_out"));
    hs.kbias = valid.allocate_bias(b, g);
    if (mask.on()) hs.kept = sbuf(tiles * 4, n("row_kept"));
    for (int64_t t = 0; reuse && t < tiles; ++t) {
      const int64_t keys = tile_keys(s, t * kBlock, std::min(kBlock, L - t * kBlock));
      hs.p_in_kept.push_back(sbuf(keys * es, absl::StrCat("p_in_kept", g, "_", t)));
      hs.dp_kept.push_back(sbuf(keys * 4, absl::StrCat("dP_kept", g, "_", t)));
    }
    sets.push_back(std::move(hs));
  }
  // The operands of Q tile t (key block kb) by rows, and their transposes.
  auto q_rows = [&](const HeadSet& hs, int64_t rows, int64_t t) {
    return sb(hs.q_rows, dt, rows, t * q_pitch, E);
  };
  auto do_rows = [&](const HeadSet& hs, int64_t rows, int64_t t) {
    return sb(hs.do_rows, dt, rows, t * do_pitch + do_col, Ev);
  };
  auto k_rows = [&](const HeadSet& hs, int64_t keys, int64_t kb) {
    return sb(hs.k_rows, dt, keys, kb * q_pitch, E);
  };
  auto on_parts = [&](int32_t alloc, int64_t p0, int64_t parts, int64_t col, int64_t cols) {
    return tile_pattern(BufferKind::sbuf, alloc, dt, static_cast<int32_t>(p0),
                        static_cast<int32_t>(parts), col, {{cols, 1}});
  };
  // Pass 1's key chunks (chunk1): 256 keys, so its scores and dP share one PSUM bank.
  // Working tiles, four sets (item n uses set n % 4): the items are software
  // pipelined (below), so the items in flight use different buffers; an
  // item's PSUM bank is reused only after the stage that last reads it.
  // The other three PSUM banks accumulate dV, dK and dQ.
  struct Work {
    int32_t sd;                      ///< PSUM: scores, pass 1's dP at chunk1 (pass 2: dP, dS^T)
    int32_t s_sb, p_f, dp_sb, pd;    ///< fp32 [rows, chunk]
    int32_t p_in, ds_f, ds_in, dsT;  ///< [rows, 128]: P, dS (fp32 and dt), dS^T (dt)
    int32_t mc, nm, alpha, rowsum, dpart;
    int32_t kept = -1; ///< attn_mask: the chunk's row flags
  };
  // Pass 2's items: with reuse one per Q tile (all its key blocks, dK and
  // dV of every key block accumulated side by side in their PSUM banks
  // across the batch-head, stored after its last item), else one per key
  // block and Q tile (dK and dV per key block).
  const int64_t pass2_cols = reuse ? chunk1 : kBlock, out_blocks = reuse ? blocks : 1;
  std::vector<Work> work;
  for (int g = 0; g < nwork; ++g) {
    auto n = [&](const char* what) { return absl::StrCat(what, g); };
    work.push_back({psum(n("scores")), sbuf(chunk1 * 4, n("s")),
                    sbuf(chunk1 * 4, n("p")), sbuf(chunk1 * 4, n("dP_sb")),
                    sbuf(chunk1 * 4, n("p_dP")), sbuf(kBlock * es, n("p_in")),
                    sbuf(pass2_cols * 4, n("dS")), sbuf(pass2_cols * es, n("dS_in")),
                    sbuf(pass2_cols * es, n("dST")), sbuf(4, n("chunk_neg_m")), sbuf(4, n("new_neg_m")),
                    sbuf(4, n("alpha")), sbuf(4, n("rowsum")), sbuf(4, n("D_part"))});
    if (mask.on()) work.back().kept = sbuf(4, n("chunk_kept"));
  }
  const int32_t ps_dv = psum("dv_acc"), ps_dk = psum("dk_acc");
  const int32_t ps_dq = psum(dq_in_psum ? "dq_acc" : "dq_part");
  int32_t dk_out[2], dv_out[2];
  for (int g = 0; g < 2; ++g) {
    dk_out[g] = sbuf(out_blocks * E * es, absl::StrCat("dk_out", g));
    dv_out[g] = sbuf(out_blocks * Ev * es, absl::StrCat("dv_out", g));
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Causal masking on the Tensor engine when the scale is positive (CausalMask).
  const bool mm_mask = s.causal && s.scale > 0;
  std::optional<CausalMask> cmask;
  if (mm_mask) cmask.emplace(b, deps, dt, ident);
  auto add_mask = [&](int32_t bank, int64_t col, int64_t rows, int64_t q0, int64_t k0,
                      int64_t w) { cmask->add(b, deps, bank, col, rows, q0, k0, w); };
  // Pass 2's [rows, keys] pieces of a `sd` bank: scores at 0, dP at 128,
  // dS^T ([keys, rows]) at 256.
  constexpr int64_t kDpAt = kBlock, kDsTAt = 2 * kBlock;

  // q, dO, k and v by rows; their transposes (head/value dim on the
  // partitions) are made on chip (transpose_head), shortly before the
  // batch-head's first item.
  const OnChipTranspose tr{ident, psum("T_psum"), dt};
  std::vector<bool> loaded(s.batch, false), zeroed(s.batch, false), transposed(s.batch, false);
  // Batch-head h's `len` rows of a [.., d] HBM tensor (laid out as
  // `heads` says, head_rows) into a rows tile, 128-row block j at column j
  // x pitch + col (OnChipTranspose::load with the pairing's layout).
  auto load_rows = [&](int32_t rows_tile, int32_t src, int64_t heads, int64_t d, int64_t h,
                       int64_t len, int64_t pitch, int64_t col) {
    for (int64_t j = 0; j * kBlock < len; ++j) {
      const int64_t r = std::min(kBlock, len - j * kBlock);
      deps.track(b.dma_copy(sb(rows_tile, dt, r, j * pitch + col, d),
                            head_rows(src, dt, heads, len, d, h, j * kBlock, r)),
                 /*partial_write=*/true);
    }
  };
  auto load_head = [&](int64_t h) {
    const HeadSet& hs = sets[h % nsets];
    load_rows(hs.q_rows, q_hbm, s.heads.q, E, h, L, q_pitch, 0);
    load_rows(hs.do_rows, do_hbm, s.heads.grad_out, Ev, h, L, do_pitch, do_col);
    load_rows(hs.k_rows, k_hbm, s.heads.k, E, h, S, q_pitch, 0);
    load_rows(hs.v_rows, v_hbm, s.heads.v, Ev, h, S, do_pitch, do_col);
    loaded[h] = true;
  };
  // valid_seq_len: a batch-head's key masks, and its padded keys and query
  // rows zeroed in k, v, q and dO by rows before they are transposed (the
  // transposes then carry the zeros: a NaN left in a row would reach every
  // key or row of the transpose through the identity matmul, 0 x NaN =
  // NaN; and dV += P^T dO would take it even where P = 0), with the
  // transposes, not with the loads, because the Vector queue is in order:
  // a select there would hold it until the DMA lands; but a few items
  // ahead of the transposes (zero_head), so that they do not wait for the
  // selects in the Vector queue. Paired, one select and one transpose cover
  // both operands of a rows tile.
  auto zero_head = [&](int64_t h) {
    if (!loaded[h] || zeroed[h]) return;
    zeroed[h] = true;
    if (!valid.on()) return;
    const HeadSet& hs = sets[h % nsets];
    valid.prepare_head(b, deps, h, hs.kbias);
    valid.zero_query_rows(b, deps, hs.q_rows, dt, q_pitch);
    if (!pair.on) valid.zero_query_rows(b, deps, hs.do_rows, dt, Ev);
    valid.zero_key_rows(b, deps, hs.k_rows, dt, q_pitch);
    if (!pair.on) valid.zero_key_rows(b, deps, hs.v_rows, dt, Ev);
  };
  auto transpose_head = [&](int64_t h) {
    if (!loaded[h] || transposed[h]) return;
    const HeadSet& hs = sets[h % nsets];
    zero_head(h);
    if (one_copy) {
      for (int64_t x = 0; x < L + S; x += kBlock) {
        const bool q = x < L;
        const int64_t r = std::min(kBlock, q ? L - x : L + S - x), j = (q ? x : x - L) / kBlock;
        deps.track(b.matmul(ps(tr.bank, q_pitch, x, r),
                            sb(q ? hs.q_rows : hs.k_rows, dt, r, j * q_pitch, q_pitch),
                            sb(ident, dt, r, 0, r), false));
        if (q && x + kBlock >= L) x = L - kBlock; // k's blocks start at column L
      }
      deps.track(b.tensor_copy(Engine::scalar, sb(hs.qT, dt, q_pitch, 0, L + S),
                               ps(tr.bank, q_pitch, 0, L + S)));
      transposed[h] = true;
      return;
    }
    tr.transpose(b, deps, hs.q_rows, q_pitch, L, hs.qT);
    if (!pair.on) tr.transpose(b, deps, hs.do_rows, Ev, L, hs.doT);
    tr.transpose(b, deps, hs.k_rows, q_pitch, S, hs.kT);
    if (!pair.on) tr.transpose(b, deps, hs.v_rows, Ev, S, hs.vT);
    transposed[h] = true;
  };

  // The work items and their order (AttentionBackwardPlan.h). Stages
  // (below): an item's instructions in five groups A..E, software
  // pipelined: iteration i emits E of item i-4, D of i-3, C of i-2, B of
  // i-1 and A of i, so each engine's in-order queue interleaves independent
  // items, and no engine waits within an iteration for work of its own
  // later in that iteration.
  constexpr int64_t kStages = 5;
  const BackwardItems plan = backward_items(s, reuse, nsets, chunk1, kStages);
  const std::vector<WorkItem>& items = plan.items;
  const std::vector<bool>& starts = plan.starts;
  const int64_t n_items = static_cast<int64_t>(items.size());
  using Item = WorkItem;
  using Kind = ItemKind;

  // An item's exp(scale S - m) and dP, fp32 [rows, w] in SBUF: the working
  // set's, dP with reuse the Q tile's kept one at the item's keys. (D needs
  // p in fp32: an error in D reaches every dS of its row alike, and so
  // adds up in dQ and dK.)
  auto p_of = [&](const Item& it, const Work& wk) {
    return sb(wk.p_f, DType::f32, it.rows, 0, it.w);
  };
  auto dp_of = [&](const Item& it, const Work& wk, const HeadSet& hs) {
    return reuse ? sb(hs.dp_kept[it.t], DType::f32, it.rows, it.k0, it.w)
                 : sb(wk.dp_sb, DType::f32, it.rows, 0, it.w);
  };
  // Stage A: the matmuls that need only the resident operands (scores,
  // the causal mask, dP); pass 1 also takes the chunk's max and -m, and
  // copies dP to SBUF.
  auto stage_a = [&](int64_t n) {
    const Item& it = items[n];
    const HeadSet& hs = sets[it.h % nsets];
    const Work& wk = work[n % nwork];
    const int64_t rows = it.rows, w = it.w, t = it.t;
    if (it.kind == Kind::empty) return;
    const bool p1 = it.kind == Kind::pass1;
    if (!p1 && reuse) return;
    deps.track(b.matmul(ps(wk.sd, rows, 0, w), sb(hs.qT, dt, E, it.q0, rows),
                        sb(hs.kT, dt, E, kT_col + it.k0, w), false));
    if (it.diagonal && mm_mask) add_mask(wk.sd, 0, rows, it.q0, it.k0, w);
    if (valid.bias_in_psum()) valid.add_bias(b, deps, wk.sd, 0, rows, hs.kbias, it.k0, w);
    deps.track(b.matmul(p1 ? ps(wk.sd, rows, chunk1, w) : ps(wk.sd, rows, kDpAt, w),
                        on_parts(hs.doT, do_col, Ev, it.q0, rows),
                        on_parts(hs.vT, do_col, Ev, kT_col + it.k0, w), false));
    if (!p1 && mask.on()) { // scale x S + mask into SBUF for stage B's exp
      const AccessPattern scores = sb(wk.s_sb, DType::f32, rows, 0, w);
      deps.track(
          b.activation(scores, ps(wk.sd, rows, 0, w), ActivationFunction::identity, s.scale));
      const int slot = static_cast<int>(n % nwork);
      mask.prepare(b, deps, slot, rows, w, std::nullopt);
      mask.apply(b, deps, scores, slot, rows, w);
    }
    if (!p1) return;
    // Raw scores stay in PSUM (masked there) when the scale is positive:
    // the max of scale x S is then scale x the max of S; not with attn_mask
    // (applied to the scaled scores).
    const bool raw = s.scale > 0 && !mask.on();
    const AccessPattern scores = raw ? ps(wk.sd, rows, 0, w) : sb(wk.s_sb, DType::f32, rows, 0, w);
    if (!raw) {
      deps.track(
          b.activation(scores, ps(wk.sd, rows, 0, w), ActivationFunction::identity, s.scale));
      if (it.diagonal)
        deps.track(b.affine_select(scores, scores, AffineExpr{it.q0 - it.k0, 1, {-1}},
                                   CmpOp::greater_equal, kNegInf));
      if (valid.masks_keys() && !valid.bias_in_psum())
        valid.add_scaled_bias(b, deps, scores, rows, hs.kbias, it.k0, w);
      if (mask.on()) {
        const int slot = static_cast<int>(n % nwork);
        std::optional<AccessPattern> key_bias;
        if (valid.masks_keys()) key_bias = valid.bias_keys(hs.kbias, rows, it.k0, w);
        mask.prepare(b, deps, slot, rows, w, column(wk.kept, rows), key_bias);
        mask.apply(b, deps, scores, slot, rows, w);
      }
    }
    deps.track(b.tensor_reduce(Engine::vector, column(wk.mc, rows), scores, AluOp::max));
    const float to_neg_m = raw ? -s.scale : -1.0f; // chunk max -> -m in scaled units
    const AccessPattern neg_m = column(hs.negm, rows, t);
    if (it.first) {
      deps.track(
          b.tensor_scalar(Engine::vector, neg_m, column(wk.mc, rows), AluOp::multiply, to_neg_m));
    } else {
      deps.track(b.tensor_scalar(Engine::vector, column(wk.mc, rows), column(wk.mc, rows),
                                 AluOp::multiply, to_neg_m));
      deps.track(b.tensor_tensor(Engine::vector, column(wk.nm, rows), neg_m, column(wk.mc, rows),
                                 AluOp::min));
      int64_t i = b.activation(column(wk.alpha, rows), neg_m, ActivationFunction::exp, -1.0f);
      b.at(i).bias = column(wk.nm, rows);
      deps.track(i);
      deps.track(b.tensor_copy(Engine::vector, neg_m, column(wk.nm, rows)));
    }
    // dP into SBUF by Scalar: the Vector product in stage B then runs at
    // its SBUF rate (one PSUM operand doubles its cost).
    deps.track(b.tensor_copy(Engine::scalar, dp_of(it, wk, hs), ps(wk.sd, rows, chunk1, w)));
  };
  // Stage B. Pass 1: p = exp(scale S - m) with its row sum l (online over
  // the chunks). Pass 2: P = exp(scale S - m) / l and dS = P (dP - D), both
  // in the matmul dtype (with reuse -dS = (dP - D) (-P) from pass 1's dP
  // and -P, over the Q tile's keys).
  auto stage_b = [&](int64_t n) {
    const Item& it = items[n];
    const HeadSet& hs = sets[it.h % nsets];
    const Work& wk = work[n % nwork];
    const int64_t rows = it.rows, w = it.w, t = it.t;
    if (it.kind == Kind::empty) return;
    if (it.kind == Kind::pass1) {
      const bool raw = s.scale > 0 && !mask.on();
      const AccessPattern scores =
          raw ? ps(wk.sd, rows, 0, w) : sb(wk.s_sb, DType::f32, rows, 0, w);
      int64_t i = b.activation(p_of(it, wk), scores, ActivationFunction::exp,
                               raw ? s.scale : 1.0f);
      b.at(i).bias = column(hs.negm, rows, t);
      b.at(i).accum = it.first ? column(hs.l, rows, t) : column(wk.rowsum, rows);
      deps.track(i);
      return;
    }
    // With reuse P and dP come from pass 1 (its masking included), else
    // they are recomputed here.
    const AccessPattern p = p_of(it, wk);
    if (!reuse) {
      int64_t i =
          mask.on()
              ? b.activation(p, sb(wk.s_sb, DType::f32, rows, 0, w), ActivationFunction::exp)
              : b.activation(p, ps(wk.sd, rows, 0, w), ActivationFunction::exp, s.scale);
      b.at(i).bias = column(hs.negm, rows, t);
      deps.track(i);
      if (it.diagonal && !mm_mask)
        deps.track(b.affine_select(p, p, AffineExpr{it.q0 - it.k0, 1, {-1}},
                                   CmpOp::greater_equal, 0.0f));
      if (valid.masks_keys() && !valid.bias_in_psum())
        valid.drop_padded_keys(b, deps, p, rows, hs.kbias, it.k0, w);
    }
    const AccessPattern ds = sb(wk.ds_f, DType::f32, rows, 0, w);
    if (reuse) { // -dS = (dP - D) (-P): Scalar (bias -D), then Vector
      int64_t i = b.activation(ds, dp_of(it, wk, hs), ActivationFunction::identity);
      b.at(i).bias = column(hs.ds_bias, rows, t);
      deps.track(i);
      deps.track(b.tensor_tensor(Engine::vector, sb(wk.ds_in, dt, rows, 0, w), ds,
                                 sb(hs.p_in_kept[t], dt, rows, 0, w), AluOp::multiply));
      return;
    }
    // dP - D on Scalar (bias -D), P / l and dS = P (dP - D) on Vector,
    // straight into the matmul dtype.
    int64_t i = b.activation(ds, ps(wk.sd, rows, kDpAt, w), ActivationFunction::identity);
    b.at(i).bias = column(hs.ds_bias, rows, t);
    deps.track(i);
    const AccessPattern p_in = sb(wk.p_in, dt, rows, 0, w);
    deps.track(
        b.tensor_tensor(Engine::vector, p_in, p, broadcast(hs.rl, rows, w, t), AluOp::multiply));
    deps.track(
        b.tensor_tensor(Engine::vector, sb(wk.ds_in, dt, rows, 0, w), ds, p_in, AluOp::multiply));
  };
  // Pass 2 with reuse, a Q tile's item over its nb key blocks (-dS in
  // [rows, w] from stage B). Stage C: per key block -dV += (-P)^T dO,
  // -dK += (-dS)^T q and -dS^T by the identity (block kb at column kb x 128
  // of the item's PSUM bank); every gradient is accumulated negated and
  // flipped back by the output scales. After the batch-head's last item
  // its dK and dV: one Scalar and one Vector instruction for all key
  // blocks when they are whole and every one was begun, else per block
  // (zeros for a block no row sees).
  const bool whole_blocks = S % kBlock == 0 && tile_keys(s, L - 1, 1) == S;
  auto tile_pass2_c = [&](const Item& it, const HeadSet& hs, const Work& wk) {
    const int64_t rows = it.rows, t = it.t, nb = ceil_div(it.w, kBlock);
    for (int64_t kb = 0; kb < nb; ++kb) {
      const int64_t keys = std::min(kBlock, it.w - kb * kBlock);
      const bool acc = !(it.fresh >> kb & 1);
      const AccessPattern ds_in = sb(wk.ds_in, dt, rows, kb * kBlock, keys);
      deps.track(b.matmul(ps(ps_dv, keys, kb * Ev, Ev),
                          sb(hs.p_in_kept[t], dt, rows, kb * kBlock, keys),
                          do_rows(hs, rows, t), acc));
      deps.track(b.matmul(ps(ps_dk, keys, kb * E, E), ds_in, q_rows(hs, rows, t), acc));
      deps.track(b.matmul(ps(wk.sd, keys, kb * kBlock, rows), ds_in,
                          sb(ident, dt, rows, 0, rows), false));
    }
    if (!it.last) return;
    const int ob = static_cast<int>(it.h % 2);
    auto out = [&](int64_t keys, int64_t kb, int64_t nblk) {
      const std::initializer_list<FreeDim> dk = {{nblk * E, 1}}, dv = {{nblk * Ev, 1}};
      const AccessPattern dk_sb = at(BufferKind::sbuf, dk_out[ob], dt, keys, kb * E, dk),
                          dv_sb = at(BufferKind::sbuf, dv_out[ob], dt, keys, kb * Ev, dv);
      if (kb * kBlock >= tile_keys(s, L - 1, 1)) { // no row sees these keys
        deps.track(b.iota(dk_sb, AffineExpr{0, 0, {0}}));
        deps.track(b.iota(dv_sb, AffineExpr{0, 0, {0}}));
        return;
      }
      deps.track(b.activation(dk_sb, at(BufferKind::psum, ps_dk, DType::f32, keys, kb * E, dk),
                              ActivationFunction::identity, -s.scale));
      deps.track(b.tensor_scalar(Engine::vector, dv_sb,
                                 at(BufferKind::psum, ps_dv, DType::f32, keys, kb * Ev, dv),
                                 AluOp::multiply, -1.0f));
    };
    if (whole_blocks)
      out(kBlock, 0, blocks);
    else
      for (int64_t kb = 0; kb < blocks; ++kb) out(std::min(kBlock, S - kb * kBlock), kb, 1);
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const int64_t keys = std::min(kBlock, S - kb * kBlock);
      const int32_t nk = static_cast<int32_t>(keys);
      deps.track(b.dma_copy(head_rows(dk_hbm, dt, s.heads.dk, S, E, it.h, kb * kBlock, nk),
                            sb(dk_out[ob], dt, keys, kb * E, E)));
      deps.track(b.dma_copy(head_rows(dv_hbm, dt, s.heads.dv, S, Ev, it.h, kb * kBlock, nk),
                            sb(dv_out[ob], dt, keys, kb * Ev, Ev)));
    }
  };
  // Stage D: -dS^T to SBUF, one Scalar copy when the key blocks are whole.
  auto tile_pass2_d = [&](const Item& it, const Work& wk) {
    const int64_t nb = ceil_div(it.w, kBlock);
    if (it.w % kBlock == 0) {
      const std::initializer_list<FreeDim> dims = {{nb, kBlock}, {it.rows, 1}};
      deps.track(b.tensor_copy(Engine::scalar, at(BufferKind::sbuf, wk.dsT, dt, kBlock, 0, dims),
                               at(BufferKind::psum, wk.sd, DType::f32, kBlock, 0, dims)));
      return;
    }
    for (int64_t kb = 0; kb < nb; ++kb) {
      const int64_t keys = std::min(kBlock, it.w - kb * kBlock);
      deps.track(b.tensor_copy(Engine::scalar, sb(wk.dsT, dt, keys, kb * kBlock, it.rows),
                               ps(wk.sd, keys, kb * kBlock, it.rows)));
    }
  };
  // Stage E: -dQ += (-dS) k over the key blocks, in PSUM (or added to the
  // fp32 SBUF sums: each Q tile has one pass 2 item).
  auto tile_pass2_e = [&](const Item& it, const HeadSet& hs, const Work& wk) {
    const int64_t rows = it.rows, t = it.t, nb = ceil_div(it.w, kBlock);
    for (int64_t kb = 0; kb < nb; ++kb) {
      const int64_t keys = std::min(kBlock, it.w - kb * kBlock);
      deps.track(b.matmul(dq_in_psum ? ps(ps_dq, rows, t * E, E) : ps(ps_dq, rows, 0, E),
                          sb(wk.dsT, dt, keys, kb * kBlock, rows), k_rows(hs, keys, kb), kb > 0));
    }
    if (!dq_in_psum)
      deps.track(b.tensor_copy(Engine::vector, sb(hs.dq_acc, DType::f32, rows, t * E, E),
                               ps(ps_dq, rows, 0, E)));
  };
  // Stage C. Pass 1: p dP (Vector; its row sum in stage D). Pass 2 (with
  // reuse: tile_pass2_c): dV += P^T dO, dK += dS^T q (scaled at the end),
  // dS^T by the identity; after a key block's last item its dK and dV
  // (zeros when no row sees these keys) are stored.
  auto stage_c = [&](int64_t n) {
    const Item& it = items[n];
    const HeadSet& hs = sets[it.h % nsets];
    const Work& wk = work[n % nwork];
    const int64_t rows = it.rows, keys = it.w, t = it.t;
    if (it.kind == Kind::pass1) { // p dP on Vector (its row sum in stage D)
      deps.track(b.tensor_tensor(Engine::vector, sb(wk.pd, DType::f32, rows, 0, keys),
                                 p_of(it, wk), dp_of(it, wk, hs), AluOp::multiply));
      return;
    }
    if (reuse) {
      tile_pass2_c(it, hs, wk);
      return;
    }
    const int ob = static_cast<int>(it.kb % 2);
    if (it.kind == Kind::pass2) {
      const AccessPattern ds_in = sb(wk.ds_in, dt, rows, 0, keys);
      deps.track(b.matmul(ps(ps_dv, keys, 0, Ev), sb(wk.p_in, dt, rows, 0, keys),
                          do_rows(hs, rows, t), !it.first));
      deps.track(
          b.matmul(ps(ps_dk, keys, 0, E), ds_in, q_rows(hs, rows, t), !it.first));
      deps.track(b.matmul(ps(wk.sd, keys, kDsTAt, rows), ds_in, sb(ident, dt, rows, 0, rows),
                          false));
      if (it.last) {
        deps.track(b.activation(sb(dk_out[ob], dt, keys, 0, E), ps(ps_dk, keys, 0, E),
                                ActivationFunction::identity, s.scale));
        deps.track(b.tensor_copy(Engine::vector, sb(dv_out[ob], dt, keys, 0, Ev),
                                 ps(ps_dv, keys, 0, Ev)));
      }
    } else {
      deps.track(b.iota(sb(dk_out[ob], dt, keys, 0, E), AffineExpr{0, 0, {0}}));
      deps.track(b.iota(sb(dv_out[ob], dt, keys, 0, Ev), AffineExpr{0, 0, {0}}));
    }
    if (!it.last) return;
    const int32_t nk = static_cast<int32_t>(keys);
    deps.track(b.dma_copy(head_rows(dk_hbm, dt, s.heads.dk, S, E, it.h, it.k0, nk),
                          sb(dk_out[ob], dt, keys, 0, E)));
    deps.track(b.dma_copy(head_rows(dv_hbm, dt, s.heads.dv, S, Ev, it.h, it.k0, nk),
                          sb(dv_out[ob], dt, keys, 0, Ev)));
  };
  // Stage D. Pass 1: the row sum of p dP (Scalar), the online updates of l
  // and D; after a tile's last chunk 1 / l and -D = -(sum p dP) / l (pass
  // 2's bias; with reuse -1 / l, -D and -P in the dtype). Pass 2: dS^T
  // copied to SBUF (Scalar), a stage of its own so that the Scalar
  // engine's next stage B does not wait for this item's stage C.
  auto stage_d = [&](int64_t n) {
    const Item& it = items[n];
    const Work& wk = work[n % nwork];
    if (it.kind == Kind::pass1) {
      const int64_t rows = it.rows, keys = it.w, t = it.t;
      const HeadSet& hs = sets[it.h % nsets];
      const AccessPattern pd = sb(wk.pd, DType::f32, rows, 0, keys);
      int64_t i = b.activation(pd, pd, ActivationFunction::identity);
      b.at(i).accum = it.first ? column(hs.dsum, rows, t) : column(wk.dpart, rows);
      deps.track(i);
      if (mask.on()) { // the tile's row flags: the max over its chunks
        const AccessPattern run = column(hs.kept, rows, t);
        if (it.first)
          deps.track(b.tensor_copy(Engine::vector, run, column(wk.kept, rows)));
        else
          deps.track(b.tensor_tensor(Engine::vector, run, run, column(wk.kept, rows), AluOp::max));
      }
      if (!it.first)
        for (int32_t acc : {hs.l, hs.dsum}) {
          deps.track(b.tensor_tensor(Engine::vector, column(acc, rows, t), column(acc, rows, t),
                                     column(wk.alpha, rows), AluOp::multiply));
          deps.track(b.tensor_tensor(Engine::vector, column(acc, rows, t), column(acc, rows, t),
                                     column(acc == hs.l ? wk.rowsum : wk.dpart, rows),
                                     AluOp::add));
        }
      if (it.last) { // 1 / l, and -D = -(sum p dP) / l
        // valid_seq_len: keep / l, so P, dS and D are 0 in the rows it drops.
        // attn_mask: times the row flags (rows that keep no key).
        const AccessPattern rl = column(hs.rl, rows, t), kept = column(hs.kept, rows, t);
        if (valid.on()) valid.row_keep(b, deps, rl, it.h, t, rows);
        if (mask.on() && valid.on())
          deps.track(b.tensor_tensor(Engine::vector, rl, rl, kept, AluOp::multiply));
        else if (mask.on())
          deps.track(b.tensor_copy(Engine::vector, rl, kept));
        if (reuse) { // -1 / l, -D and -P in the dtype (pass 2's dV operand)
          const AccessPattern l = column(hs.l, rows, t);
          if (valid.on() || mask.on()) {
            deps.track(b.tensor_tensor(Engine::vector, rl, rl, l, AluOp::divide));
            deps.track(b.tensor_scalar(Engine::vector, rl, rl, AluOp::multiply, -1.0f));
          } else {
            const int64_t i = b.tensor_scalar(Engine::vector, rl, l, AluOp::divide, -1.0f);
            b.at(i).reverse = true;
            deps.track(i);
          }
          deps.track(b.tensor_tensor(Engine::vector, column(hs.ds_bias, rows, t),
                                     column(hs.dsum, rows, t), rl, AluOp::multiply));
          deps.track(b.tensor_tensor(Engine::gpsimd, sb(hs.p_in_kept[t], dt, rows, 0, keys),
                                     p_of(it, wk), broadcast(hs.rl, rows, keys, t),
                                     AluOp::multiply));
          return;
        }
        deps.track(b.tensor_tensor(Engine::vector, column(hs.rl, rows, t),
                                   valid.on() || mask.on() ? rl : column(ones, rows),
                                   column(hs.l, rows, t), AluOp::divide));
        deps.track(b.tensor_tensor(Engine::vector, column(hs.dsum, rows, t),
                                   column(hs.dsum, rows, t), column(hs.rl, rows, t),
                                   AluOp::multiply));
        deps.track(b.tensor_scalar(Engine::vector, column(hs.ds_bias, rows, t),
                                   column(hs.dsum, rows, t), AluOp::multiply, -1.0f));
      }
      return;
    }
    if (it.kind != Kind::pass2) return;
    if (reuse) return tile_pass2_d(it, wk);
    deps.track(b.tensor_copy(Engine::scalar, sb(wk.dsT, dt, it.w, 0, it.rows),
                             ps(wk.sd, it.w, kDsTAt, it.rows)));
  };
  // Stage E: dQ += dS k; after a batch-head's last item dQ is scaled and stored.
  auto stage_e = [&](int64_t n) {
    const Item& it = items[n];
    const HeadSet& hs = sets[it.h % nsets];
    const Work& wk = work[n % nwork];
    const int64_t rows = it.rows, keys = it.w, t = it.t;
    if (it.kind == Kind::pass2 && reuse) {
      tile_pass2_e(it, hs, wk);
    } else if (it.kind == Kind::pass2) {
      const AccessPattern k_blk = k_rows(hs, keys, it.kb);
      if (dq_in_psum) {
        deps.track(b.matmul(ps(ps_dq, rows, t * E, E), sb(wk.dsT, dt, keys, 0, rows), k_blk,
                            it.kb > 0));
      } else {
        deps.track(b.matmul(ps(ps_dq, rows, 0, E), sb(wk.dsT, dt, keys, 0, rows), k_blk, false));
        const AccessPattern dq = sb(hs.dq_acc, DType::f32, rows, t * E, E);
        if (it.kb == 0)
          deps.track(b.tensor_copy(Engine::vector, dq, ps(ps_dq, rows, 0, E)));
        else
          deps.track(b.tensor_tensor(Engine::vector, dq, dq, ps(ps_dq, rows, 0, E), AluOp::add));
      }
    }
    if (!it.head_last) return;
    // Every tile scaled first (in PSUM and whole, by one instruction), then
    // the stores (a store reads dq_out: a scale after it would wait for
    // the transfer).
    if (dq_in_psum && L % kBlock == 0) {
      deps.track(b.activation(sb(hs.dq_out, dt, kBlock, 0, tiles * E),
                              ps(ps_dq, kBlock, 0, tiles * E), ActivationFunction::identity,
                              sign * s.scale),
                 true);
    }
    for (int64_t tt = 0; tt < tiles && !(dq_in_psum && L % kBlock == 0); ++tt) {
      const int64_t r = std::min(kBlock, L - tt * kBlock);
      const AccessPattern acc = dq_in_psum ? ps(ps_dq, r, tt * E, E)
                                           : sb(hs.dq_acc, DType::f32, r, tt * E, E);
      deps.track(b.activation(sb(hs.dq_out, dt, r, tt * E, E), acc, ActivationFunction::identity,
                              sign * s.scale),
                 true);
    }
    for (int64_t tt = 0; tt < tiles; ++tt) {
      const int64_t r = std::min(kBlock, L - tt * kBlock);
      deps.track(b.dma_copy(head_rows(dq_hbm, dt, s.heads.dq, L, E, it.h, tt * kBlock, r),
                            sb(hs.dq_out, dt, r, tt * E, E)));
    }
  };

  for (int64_t h = 0; h < std::min<int64_t>(nsets, s.batch); ++h) load_head(h);
  int64_t mask_loaded = 0;
  auto load_masks = [&](int64_t upto) {
    for (; mask.on() && mask_loaded <= upto && mask_loaded < n_items; ++mask_loaded) {
      const Item& it = items[mask_loaded];
      if (it.kind == Kind::pass1 || (it.kind == Kind::pass2 && !reuse))
        mask.load(b, deps, static_cast<int>(mask_loaded % nwork), it.h, it.q0, it.rows, it.k0,
                  it.w);
    }
  };
  constexpr int64_t kZeroAhead = 4; // valid_seq_len's selects, items ahead of stage A
  int64_t lo = 0;
  while (lo < n_items) {
    int64_t hi = lo + 1; // [lo, hi): one pipelined group
    while (!starts[hi]) ++hi;
    for (int64_t i = lo; i < hi + kStages - 1; ++i) {
      // The next item's batch-head transposed an iteration ahead when its
      // rows are loaded, so the copies out of PSUM overlap this iteration.
      for (int64_t j = i + 2; j <= std::min(hi - 1, i + kZeroAhead); ++j) zero_head(items[j].h);
      if (i + 1 < hi) transpose_head(items[i + 1].h);
      if (i >= lo + 4) {
        stage_e(i - 4);
        const Item& it = items[i - 4];
        if (it.head_last && it.h + nsets < s.batch) load_head(it.h + nsets);
      }
      if (i >= lo + 3 && i - 3 < hi) stage_d(i - 3);
      if (i >= lo + 2 && i - 2 < hi) stage_c(i - 2);
      if (i >= lo + 1 && i - 1 < hi) stage_b(i - 1);
      if (i < hi) {
        load_masks(i + 2);
        transpose_head(items[i].h);
        stage_a(i);
      }
    }
    lo = hi;
  }
  return b.take();
}

} // namespace mstep::neuron
