// sdpa and sdpa_grad as tiled flash-style loop nests inside the xla step
// function (XlaOpLoops.h), with the cpu backend's flash kernels' numerics
// (lib/backends/cpu/FlashAttention.cpp, FlashAttentionGrad.cpp; the ref
// kernels are the oracle): scores, exp and sums in f32, an online softmax
// that never holds an [L, S] matrix, f32, bf16 or f16 storage (16-bit floats compute in
// f32 and rounds to nearest even once per stored element).
//
// The node is read by the cpu kernels' own reader (read_attention_params),
// so both backends take the same operands and options. Per batch-head b,
// with [row_lo, row_hi) and [key_lo, key_hi) the rows and keys that
// valid_seq_len keeps (everything without one):
//
// Forward, per tile of kBr query rows (Q tiles) and, inside it, per tile of
// kBc keys (K/V tiles, up to the tile's last row when causal: key tiles
// wholly above the diagonal are never visited). The K tile is transposed
// into a zero-padded [E x kBc] stack tile (all of a batch-head's K tiles
// once, when there are several Q tiles and the stack allows), so a row's
// kBc scores are one <kBc x float> value (E vector fmas). Rows go in
// groups of kRowGroup that share each loaded K/V vector (a 4 x 64-lane
// register block, as the cpu kernels' gemm_block). Per row r of the Q tile:
//   s = scale q_r k^T (+ floating mask; -inf where causal or a false bool
//   mask excludes the key, and past the tile's last key),
//   m' = max(m, max s), p = e^(s - m') (the cpu kernels' f32 exp),
//   l = l e^(m - m') + sum p, p *= the dropout factor (Philox, the ref
//   kernel's draws bit for bit, drawn by a loop the vectorizer widens, or
//   read from the keep mask the node returns), acc = acc e^(m - m') + p v
//   (the group's rows against each V vector; a lone row sums in four
//   interleaved ways). A mask contiguous in the keys is read as kBc lanes.
// out = acc / l (0 where l = 0: a row with every key excluded, and the
// rows outside valid_seq_len).
//
// Backward (the forward's results carry no statistics, so, as on cpu, it
// recomputes them): a rows pass (the forward's loop nest) keeps per row
// lse = m + log l and D = g . out; then per K/V tile (K and V transposed
// once), for each row that sees it, on the tile's kBc keys at once:
// p = e^(scale q k^T + mask - lse), dp = (g v^T) f, ds = p (dp - D),
// dv^T += g (p f), dk^T += q ds (transposed f32 tiles), dq += ds k (dq, dk
// scaled by `scale` when written; dq's sums in the result itself for f32,
// for bf16 in the batch-head's f32 slice of the step's scratch, so a long
// sequence does not need them on the stack).
//
// Sums run in vector order (reassociated), as the cpu kernels' vector code
// does; values agree with ref within the cpu kernels' tolerance (1e-4 f32,
// 2e-2 bf16). Nodes that return probabilities, a dropout mask or saved
// probabilities (recompute = 0), read saved ones, or differentiate a float
// mask add their parts from XlaAttentionProbs.cpp; a bf16 mask gradient
// stays a callout.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaAttentionEmitter.h"
#include "lib/backends/xla/XlaLoopScratch.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla::attention {

void AttentionEmitter::begin_function() {
  q_ = lb_.operand(P_.q);
  k_ = lb_.operand(P_.k);
  v_ = lb_.operand(P_.v);
  if (P_.mask >= 0) {
    mask_ = lb_.operand(P_.mask);
    std::vector<uint64_t> bases(P_.mask_base.begin(), P_.mask_base.end());
    auto* init = llvm::ConstantDataArray::get(lb_.module().getContext(), bases);
    mask_base_ = new llvm::GlobalVariable(lb_.module(), init->getType(), /*isConstant=*/true,
                                          llvm::GlobalValue::PrivateLinkage, init,
                                          "mstep_xla_sdpa_mask_base");
  }
  if (P_.valid_len >= 0) valid_len_ = lb_.operand(P_.valid_len);
  if (P_.dropout) {
    llvm::Value* state = lb_.operand(P_.rng_state);
    seed_ = lb_.load(lb_.i64(), state, lb_.i64(0));
    offset_ = add(lb_.load(lb_.i64(), state, lb_.i64(1)), P_.rng_offset);
  }
}

void AttentionEmitter::valid_ranges(llvm::Value* b) {
  if (P_.mask >= 0)
    mask_b_ = b_.CreateLoad(lb_.i64(), b_.CreateInBoundsGEP(lb_.i64(), mask_base_, b));
  if (!valid_len_) {
    row_lo_ = key_lo_ = lb_.i64(0);
    row_hi_ = lb_.i64(P_.L);
    key_hi_ = lb_.i64(P_.S);
    return;
  }
  llvm::Value* index = b_.CreateSDiv(b, lb_.i64(P_.rows_per_b0));
  llvm::Value* len = P_.len_dtype == DType::i32
                         ? b_.CreateSExt(lb_.load(b_.getInt32Ty(), valid_len_, index), lb_.i64())
                         : lb_.load(lb_.i64(), valid_len_, index);
  auto keep = [&](int64_t n, llvm::Value*& lo, llvm::Value*& hi) {
    llvm::Value* kept = smax(smin(len, lb_.i64(n)), lb_.i64(0));
    lo = P_.left_pad ? b_.CreateSub(lb_.i64(n), kept) : lb_.i64(0);
    hi = P_.left_pad ? lb_.i64(n) : kept;
  };
  keep(P_.L, row_lo_, row_hi_);
  keep(P_.S, key_lo_, key_hi_);
}

llvm::Value* AttentionEmitter::apply_mask(llvm::Value* i, llvm::Value* j, llvm::Value* s) {
  llvm::Value* at =
      b_.CreateAdd(mask_b_, b_.CreateAdd(mul(i, P_.mask_row_stride), mul(j, P_.mask_col_stride)));
  if (!P_.bool_mask) return b_.CreateFAdd(s, load(P_.dtype, mask_, at));
  llvm::Value* keep = lb_.load(b_.getInt8Ty(), mask_, at);
  return b_.CreateSelect(b_.CreateICmpEQ(keep, b_.getInt8(0)), neg_inf(), s);
}

llvm::Value* AttentionEmitter::kept(llvm::Value* flat) {
  llvm::Value* w0 = philox(lb_, seed_, b_.CreateAdd(offset_, flat)).first;
  // uniform() >= p iff (w0 >> 8) >= ceil(p 2^24) (read_dropout).
  const auto threshold = static_cast<uint32_t>(std::ceil(P_.p * 16777216.0));
  return b_.CreateICmpUGE(b_.CreateLShr(w0, 8), b_.getInt32(threshold));
}

llvm::Value* AttentionEmitter::dropout_factor(llvm::Value* flat) {
  const float keep_scale = P_.p < 1 ? static_cast<float>(1.0 / (1.0 - P_.p)) : 0.0f;
  return b_.CreateSelect(kept(flat), lb_.f32(keep_scale), lb_.f32(0.0f));
}

llvm::Value* AttentionEmitter::dropout_factors(llvm::Value* flat, llvm::Value* nc) {
  if (keep_mask_) {
    const float keep_scale = P_.p < 1 ? static_cast<float>(1.0 / (1.0 - P_.p)) : 0.0f;
    auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), kBc);
    llvm::Value* keep =
        b_.CreateMaskedLoad(bytes, b_.CreateInBoundsGEP(b_.getInt8Ty(), keep_mask_, flat),
                            llvm::Align(1), lanes_below(nc), llvm::Constant::getNullValue(bytes));
    llvm::Value* row = llvm::Constant::getNullValue(tile_row());
    return b_.CreateSelect(b_.CreateICmpNE(keep, llvm::Constant::getNullValue(bytes)),
                           splat(row, lb_.f32(keep_scale)), row);
  }
  lb_.loop(
      kBc, [&](llvm::Value* c) { lb_.store(dropout_factor(b_.CreateAdd(flat, c)), f_t_, c); },
      /*parallel=*/true);
  return load(DType::f32, f_t_, lb_.i64(0), kBc);
}

llvm::Value* AttentionEmitter::apply_mask_lanes(llvm::Value* i, llvm::Value* j0, llvm::Value* nc,
                                                llvm::Value* s) {
  llvm::Value* at = b_.CreateAdd(mask_b_, b_.CreateAdd(mul(i, P_.mask_row_stride), j0));
  if (!P_.bool_mask) return b_.CreateFAdd(s, load_lanes(P_.dtype, mask_, at, nc));
  // Lanes past nc read as false: their scores are -inf already.
  auto* bytes = llvm::FixedVectorType::get(b_.getInt8Ty(), kBc);
  llvm::Value* keep =
      b_.CreateMaskedLoad(bytes, b_.CreateInBoundsGEP(b_.getInt8Ty(), mask_, at), llvm::Align(1),
                          lanes_below(nc), llvm::Constant::getNullValue(bytes));
  return b_.CreateSelect(b_.CreateICmpEQ(keep, llvm::Constant::getNullValue(bytes)),
                         splat(s, neg_inf()), s);
}

void AttentionEmitter::score_groups(llvm::Value* b, llvm::Value* first, llvm::Value* nr,
                                    llvm::Value* key_end, const ScoresBody& body) {
  llvm::Value* keys = smax(b_.CreateSub(key_end, key_lo_), lb_.i64(0));
  lb_.loop(lb_.i64(0), b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc)), [&](llvm::Value* kt) {
    llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
    llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_end, j0));
    llvm::Value* key_row0 = b_.CreateAdd(mul(b, P_.S), j0);
    llvm::Value* keys_t = key_tile(kt, key_row0, nc);
    row_groups(lb_.i64(0), nr, [&](const Rows& rs) {
      Rows q_at, scores;
      for (llvm::Value* r : rs) q_at.push_back(mul(r, P_.E));
      Rows products = rows_times_tile(qs_, q_at, keys_t, P_.E);
      for (size_t k = 0; k < rs.size(); ++k)
        scores.push_back(mask_tile(b_.CreateAdd(first, rs[k]), j0, nc, products[k]));
      body(j0, nc, key_row0, rs, scores);
    });
  });
}

void AttentionEmitter::attend_rows(llvm::Value* b, const RowDone& finish,
                                   const TileDone& tile_done) {
  const int64_t E = P_.E, Ev = P_.Ev;
  transpose_keys(b);
  llvm::Value* rows = b_.CreateSub(row_hi_, row_lo_);
  llvm::Value* q_tiles = b_.CreateSDiv(add(rows, kBr - 1), lb_.i64(kBr));
  lb_.loop(lb_.i64(0), q_tiles, [&](llvm::Value* t) {
    llvm::Value* first = b_.CreateAdd(row_lo_, mul(t, kBr));
    llvm::Value* nr = smin(lb_.i64(kBr), b_.CreateSub(row_hi_, first));
    llvm::Value* last = b_.CreateAdd(first, nr);
    // Key tiles past the Q tile's last row are wholly above the diagonal.
    llvm::Value* key_end = P_.causal ? smin(key_hi_, last) : key_hi_;
    // The tile's rows: scale * q, and empty statistics.
    lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
      llvm::Value* row = b_.CreateAdd(mul(b, P_.L), b_.CreateAdd(first, r));
      copy(DType::f32, qs_, mul(r, E), P_.dtype, q_, mul(row, E), E,
           lb_.f32(static_cast<float>(P_.scale)));
      lb_.store(neg_inf(), m_, r);
      lb_.store(lb_.f32(0.0f), l_, r);
      chunks(Ev, [&](int64_t off, unsigned w) {
        store(DType::f32, llvm::Constant::getNullValue(vec(w)), acc_, add(mul(r, Ev), off));
      });
    });
    score_groups(b, first, nr, key_end,
                 [&](llvm::Value* j0, llvm::Value* nc, llvm::Value* key_row0, const Rows& rs,
                     const Rows& scores) {
        Rows p_at, alphas;
        for (size_t k = 0; k < rs.size(); ++k) {
          llvm::Value* r = rs[k];
          llvm::Value* i = b_.CreateAdd(first, r);
          // The online softmax on the kBc lanes of the tile.
          llvm::Value* s = scores[k];
          llvm::Value* m_old = lb_.load(f32_, m_, r);
          llvm::Value* m_new = b_.CreateMaxNum(m_old, b_.CreateFPMaxReduce(s));
          // A row with no key yet keeps m = -inf; subtracting 0 keeps p = 0.
          llvm::Value* m_used =
              b_.CreateSelect(b_.CreateFCmpOEQ(m_new, neg_inf()), lb_.f32(0.0f), m_new);
          llvm::Value* alpha = exp(b_.CreateFSub(m_old, m_used));
          llvm::Value* p = exp(b_.CreateFSub(s, splat(s, m_used)));
          llvm::Value* at = lb_.i64(static_cast<int64_t>(k) * kBc);
          lb_.store(m_new, m_, r);
          lb_.store(fma(lb_.load(f32_, l_, r), alpha, reduce_add(p)), l_, r);
          // Past nc p is 0 whatever the factor.
          if (P_.dropout)
            p = b_.CreateFMul(
                p, dropout_factors(b_.CreateAdd(mul(b_.CreateAdd(mul(b, P_.L), i), P_.S), j0), nc));
          store(DType::f32, p, p_, at);
          p_at.push_back(at);
          alphas.push_back(alpha);
        }
        // acc = acc * alpha + p v.
        std::vector<Rows> pv = weighted_rows(p_, p_at, P_.dtype, v_, key_row0, nc, Ev);
        for (size_t k = 0; k < rs.size(); ++k) {
          size_t n = 0;
          chunks(Ev, [&](int64_t off, unsigned w) {
            llvm::Value* at = add(mul(rs[k], Ev), off);
            llvm::Value* a = load(DType::f32, acc_, at, w);
            store(DType::f32, fma(a, splat(a, alphas[k]), pv[k][n++]), acc_, at);
          });
        }
      });
    lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
      finish(b_.CreateAdd(first, r), mul(r, Ev), lb_.load(f32_, m_, r), lb_.load(f32_, l_, r));
    });
    if (tile_done) tile_done(first, nr, key_end);
  });
}

void AttentionEmitter::emit_forward() {
  begin_function();
  const int64_t Ev = P_.Ev;
  qs_ = tile(kBr * P_.E);
  acc_ = tile(kBr * Ev);
  m_ = tile(kBr);
  l_ = tile(kBr);
  s_ = tile(kBc);
  p_ = tile(kRowGroup * kBc);
  kt_ = transposed_key_tiles();
  if (P_.dropout) f_t_ = tile(kBc);
  // The returned keep mask is written first for the whole batch-head, then
  // read back instead of drawing again (as the cpu kernel does).
  if (P_.dropout && P_.dropout_mask >= 0) keep_mask_ = lb_.result(P_.dropout_mask);
  llvm::Value* out = lb_.result(0);
  llvm::Value* probs = P_.probs >= 0 ? lb_.result(P_.probs) : nullptr;
  llvm::Value* saved = P_.saved_probs_out >= 0 ? lb_.result(P_.saved_probs_out) : nullptr;
  lb_.loop(lb_.row_begin(), lb_.row_end(), [&](llvm::Value* b) {
    valid_ranges(b);
    if (P_.dropout_mask >= 0) write_keep_mask(b, lb_.result(P_.dropout_mask));
    // Probabilities are zero where the second pass does not write them.
    for (llvm::Value* result : {probs, saved})
      if (result) zero(P_.dtype, result, mul(b, P_.L * P_.S), lb_.i64(P_.L * P_.S));
    TileDone second_pass;
    if (probs || saved)
      second_pass = [&](llvm::Value* first, llvm::Value* nr, llvm::Value* key_end) {
        write_probabilities(b, first, nr, key_end, saved, probs);
      };
    llvm::Value* base = mul(b, P_.L * Ev);
    // Rows outside valid_seq_len are zeros.
    zero(P_.dtype, out, base, mul(row_lo_, Ev));
    zero(P_.dtype, out, b_.CreateAdd(base, mul(row_hi_, Ev)),
         mul(b_.CreateSub(lb_.i64(P_.L), row_hi_), Ev));
    attend_rows(b, [&](llvm::Value* i, llvm::Value* acc_index, llvm::Value*, llvm::Value* l) {
      llvm::Value* norm = b_.CreateSelect(b_.CreateFCmpOGT(l, lb_.f32(0.0f)),
                                          b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      copy(P_.dtype, out, b_.CreateAdd(base, mul(i, Ev)), DType::f32, acc_, acc_index, Ev, norm);
    }, second_pass);
  });
}

void AttentionEmitter::emit_backward() {
  begin_function();
  const int64_t E = P_.E, Ev = P_.Ev;
  qs_ = tile(kBr * E);
  acc_ = tile(kBr * Ev);
  m_ = tile(kBr);
  l_ = tile(kBr);
  s_ = tile(kBc);
  p_ = tile(kRowGroup * kBc);
  kt_ = transposed_key_tiles();
  vt_ = tile(Ev * kBc);
  llvm::Value* ds_t = tile(kRowGroup * kBc);
  if (P_.dropout) f_t_ = tile(kBc);
  llvm::Value* lse = tile(P_.L);
  llvm::Value* d = tile(P_.L);
  llvm::Value* dk_t = tile(E * kBc);  // dk^T of the key tile, unscaled
  llvm::Value* dv_t = tile(Ev * kBc); // dv^T
  const bool convert = P_.dtype != DType::f32;
  // bf16 rows as f32, and dq's f32 sums (the result itself for f32, else
  // the scratch's).
  llvm::Value* q_row = convert ? tile(kRowGroup * E) : nullptr;
  llvm::Value* g_row = convert ? tile(kRowGroup * Ev) : nullptr;
  llvm::Value* dq_sum = convert ? dq_sums_ : nullptr;
  llvm::Value* g = lb_.operand(P_.grad_out);
  llvm::Value* dq = lb_.result(0);
  llvm::Value* dk = lb_.result(1);
  llvm::Value* dv = lb_.result(2);
  llvm::Value* scale = lb_.f32(static_cast<float>(P_.scale));
  if (P_.saved_probs_in >= 0) saved_in_ = lb_.operand(P_.saved_probs_in);
  if (P_.dmask >= 0) dmask_ = mask_gradient_sum_ ? mask_gradient_sum_ : lb_.result(P_.dmask);
  lb_.loop(lb_.row_begin(), lb_.row_end(), [&](llvm::Value* b) {
    valid_ranges(b);
    // 1. Rows pass: lse and D per valid row (rows outside stay unread);
    // with saved probabilities only D.
    if (saved_in_)
      saved_row_statistics(b, g, d);
    else attend_rows(b, [&](llvm::Value* i, llvm::Value* acc_index, llvm::Value* m, llvm::Value* l) {
      llvm::Value* positive = b_.CreateFCmpOGT(l, lb_.f32(0.0f));
      llvm::Value* norm = b_.CreateSelect(positive, b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      llvm::Value* g_index = mul(b_.CreateAdd(mul(b, P_.L), i), Ev);
      lb_.store(b_.CreateFMul(dot(P_.dtype, g, g_index, DType::f32, acc_, acc_index, Ev), norm), d,
                i);
      // A row with every key excluded: lse = +inf makes its p 0.
      llvm::Value* log_l = lb_.to_f32(lb_.call(llvm::Intrinsic::log, lb_.to_f64(l)));
      lb_.store(b_.CreateSelect(positive, b_.CreateFAdd(m, log_l),
                                lb_.f32(std::numeric_limits<float>::infinity())),
                lse, i);
    });
    // 2. Keys pass.
    llvm::Value* dq_base = mul(b, P_.L * E); // in dq, or in the scratch's sums
    llvm::Value* dq_acc = convert ? dq_sum : dq;
    zero(DType::f32, dq_acc, dq_base, lb_.i64(P_.L * E));
    llvm::Value* k_base = mul(b, P_.S);
    // Padded keys get zero gradients.
    zero(P_.dtype, dk, mul(k_base, E), mul(key_lo_, E));
    zero(P_.dtype, dk, mul(b_.CreateAdd(k_base, key_hi_), E),
         mul(b_.CreateSub(lb_.i64(P_.S), key_hi_), E));
    zero(P_.dtype, dv, mul(k_base, Ev), mul(key_lo_, Ev));
    zero(P_.dtype, dv, mul(b_.CreateAdd(k_base, key_hi_), Ev),
         mul(b_.CreateSub(lb_.i64(P_.S), key_hi_), Ev));
    llvm::Value* keys = smax(b_.CreateSub(key_hi_, key_lo_), lb_.i64(0));
    llvm::Value* key_tiles = b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc));
    lb_.loop(lb_.i64(0), key_tiles, [&](llvm::Value* kt) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
      llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_hi_, j0));
      llvm::Value* key_row0 = b_.CreateAdd(k_base, j0);
      transpose_tile(kt_, P_.dtype, k_, key_row0, nc, E);
      transpose_tile(vt_, P_.dtype, v_, key_row0, nc, Ev);
      zero(DType::f32, dk_t, lb_.i64(0), lb_.i64(kBc * E));
      zero(DType::f32, dv_t, lb_.i64(0), lb_.i64(kBc * Ev));
      // Rows before j0 see none of these keys when causal.
      llvm::Value* row_begin = P_.causal ? smax(row_lo_, j0) : row_lo_;
      row_groups(row_begin, row_hi_, [&](const Rows& is) {
        // q and g rows as f32 (in place for f32 data).
        llvm::Value *qp = q_, *gp = g;
        Rows rows, q_at, g_at, ds_at, pfs, dss;
        for (size_t k = 0; k < is.size(); ++k) {
          llvm::Value* row = b_.CreateAdd(mul(b, P_.L), is[k]);
          rows.push_back(row);
          q_at.push_back(mul(row, E));
          g_at.push_back(mul(row, Ev));
          if (!convert) continue;
          copy(DType::f32, q_row, lb_.i64(k * E), P_.dtype, q_, q_at[k], E);
          copy(DType::f32, g_row, lb_.i64(k * Ev), P_.dtype, g, g_at[k], Ev);
          q_at[k] = lb_.i64(k * E);
          g_at[k] = lb_.i64(k * Ev);
        }
        if (convert) qp = q_row, gp = g_row;
        // The tile's kBc keys at once (p = 0 past nc: -inf scores, zero v).
        Rows ps;
        if (saved_in_) {
          for (llvm::Value* row : rows) ps.push_back(saved_tile(row, j0, nc));
        } else {
          Rows products = rows_times_tile(qp, q_at, kt_, E);
          for (size_t k = 0; k < is.size(); ++k) {
            llvm::Value* s =
                mask_tile(is[k], j0, nc, b_.CreateFMul(products[k], splat(products[k], scale)));
            ps.push_back(exp(b_.CreateFSub(s, splat(s, lb_.load(f32_, lse, is[k])))));
          }
        }
        Rows dps = rows_times_tile(gp, g_at, vt_, Ev);
        for (size_t k = 0; k < is.size(); ++k) {
          llvm::Value *p = ps[k], *dp = dps[k], *pf = p;
          if (P_.dropout) {
            llvm::Value* f = dropout_factors(b_.CreateAdd(mul(rows[k], P_.S), j0), nc);
            dp = b_.CreateFMul(dp, f);
            pf = b_.CreateFMul(p, f);
          }
          llvm::Value* ds =
              b_.CreateFMul(p, b_.CreateFSub(dp, splat(dp, lb_.load(f32_, d, is[k]))));
          ds_at.push_back(lb_.i64(static_cast<int64_t>(k) * kBc));
          store(DType::f32, ds, ds_t, ds_at[k]);
          if (dmask_)
            add_mask_gradient(is[k], j0, nc, b_.CreateInBoundsGEP(f32_, ds_t, ds_at[k]));
          pfs.push_back(pf);
          dss.push_back(ds);
        }
        // dv^T += g (p f), dk^T += q ds (transposed tiles: whole key rows).
        add_outer(dv_t, gp, g_at, Ev, pfs);
        add_outer(dk_t, qp, q_at, E, dss);
        // dq_i += ds k.
        std::vector<Rows> dsk = weighted_rows(ds_t, ds_at, P_.dtype, k_, key_row0, nc, E);
        for (size_t k = 0; k < is.size(); ++k) {
          llvm::Value* dq_row = b_.CreateAdd(dq_base, mul(is[k], E));
          size_t n = 0;
          chunks(E, [&](int64_t off, unsigned w) {
            llvm::Value* at = add(dq_row, off);
            store(DType::f32, b_.CreateFAdd(load(DType::f32, dq_acc, at, w), dsk[k][n++]), dq_acc,
                  at);
          });
        }
      });
      lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
        llvm::Value* key = b_.CreateAdd(key_row0, c);
        lb_.loop(E, [&](llvm::Value* e) {
          llvm::Value* x = lb_.load(f32_, dk_t, b_.CreateAdd(mul(e, kBc), c));
          store(P_.dtype, b_.CreateFMul(x, scale), dk, b_.CreateAdd(mul(key, E), e));
        });
        lb_.loop(Ev, [&](llvm::Value* e) {
          store(P_.dtype, lb_.load(f32_, dv_t, b_.CreateAdd(mul(e, kBc), c)), dv,
                b_.CreateAdd(mul(key, Ev), e));
        });
      });
    });
    // 3. dq = scale * the sums (zero outside the valid rows).
    lb_.loop(P_.L, [&](llvm::Value* i) {
      copy(P_.dtype, dq, mul(b_.CreateAdd(mul(b, P_.L), i), E), DType::f32, dq_acc,
           b_.CreateAdd(dq_base, mul(i, E)), E, scale);
    });
  });
}

} // namespace mstep::xla::attention

namespace mstep::xla {

using namespace attention;

namespace {

std::string lb_name(const GraphNode& nd, uint32_t node) {
  return absl::StrCat("mstep_xla_", op_name(nd.op), "_", node);
}

} // namespace

std::optional<OpLoop> emit_attention_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.op != OpKind::sdpa && nd.op != OpKind::sdpa_grad) return std::nullopt;
  // A node the reader rejects stays a callout, whose kernel reports it.
  absl::StatusOr<AttentionParams> read =
      cpu::flash::read_attention_params(cpu::KernelRequest{graph, node});
  if (!read.ok()) return std::nullopt;
  const AttentionParams& P = *read;
  if (!is_loop_float(P.dtype)) return std::nullopt;
  // A bf16 backward sums dq, and a mask gradient, in f32 in the step's
  // scratch (XlaLoopScratch.h); the mask gradient is rounded once after
  // the rows.
  const bool in_scratch = P.backward && P.dtype != DType::f32;
  const bool mask_sum_in_scratch = P.dmask >= 0 && in_scratch;
  const int64_t mask_at = in_scratch ? attention_dq_scratch_floats(nd) : -1;
  const size_t operands = nd.operands.size();
  if (P.E > kMostHeadDim || P.Ev > kMostHeadDim || P.L == 0 || P.S == 0 || P.batch == 0)
    return std::nullopt;
  if (stack_floats(P, false) * 4 > kMostStackBytes) return std::nullopt;

  // A row function over the batch-heads: each writes only its own rows of
  // out, probabilities and dropout mask (dq, dk, dv) and keeps its tiles on
  // its own stack, so the step function may split them over the threads
  // without changing a bit.
  LoopBuilder lb(module, lb_name(nd, node), operands + (in_scratch ? kRuntimeOperands : 0),
                 nd.results.size(), LoopBuilder::Rows{});
  llvm::Value* scratch = in_scratch ? lb.operand(operands) : nullptr;
  AttentionEmitter emitter(
      lb, P, scratch,
      mask_sum_in_scratch ? lb.b().CreateConstInBoundsGEP1_64(lb.f32(), scratch, mask_at)
                          : nullptr);
  if (P.backward)
    emitter.emit_backward();
  else
    emitter.emit_forward();
  OpLoop loop{lb.finish(), false, P.batch, 1, P.batch * P.L * P.S};
  loop.calls_runtime = in_scratch;
  if (P.dmask >= 0) {
    // The mask gradient is zeroed first, then each batch-head adds into
    // it. Batch-heads that share mask elements (a mask broadcast over a
    // batch or head dim) would add into the same ones, so they stay on
    // one thread, in order, as the cpu kernel's keys pass does.
    loop.check = emit_zero_mask_gradient(module, absl::StrCat(lb_name(nd, node), "_zero_dmask"),
                                         operands, nd.results.size(), P, mask_at);
    if (mask_sum_in_scratch)
      loop.after_rows =
          emit_round_mask_gradient(module, absl::StrCat(lb_name(nd, node), "_round_dmask"),
                                   operands, nd.results.size(), P, mask_at);
    if (P.mask_shared_across_batch) loop.work = 0;
  }
  return loop;
}

} // namespace mstep::xla
