// The attention loops' parts for nodes with [L, S] results or operands
// (XlaAttentionEmitter.h), as the cpu flash kernels compute them
// (lib/backends/cpu/FlashAttention.cpp, FlashAttentionGrad.cpp; the ref
// kernels are the oracle):
// - a returned dropout mask: the keep bit of every [L, S] position (the
//   ref kernel's Philox draw, also where a key is excluded), written first
//   for the batch-head; the passes then read it back instead of drawing
//   again (dropout_factors), as the cpu kernel does;
// - returned probabilities (after dropout) and saved ones (before it, for
//   a backward with recompute = 0): a second pass over each finished Q
//   tile recomputes the scores with the rows' final max m and sum l and
//   writes e^(s - m) / l; positions it does not visit (excluded rows,
//   padded keys, key tiles above the causal diagonal) are zeroed first.
//   `out` is the first pass's, bit for bit the out of the same node
//   without these results. The rows go in groups of kRowGroup against
//   each transposed K tile (the first pass's products, the same sums),
//   and each row's kBc probabilities are stored as masked lanes;
// - the backward from saved probabilities: its rows pass needs only
//   D_i = g_i . sum_j P_ij f_ij v_j (row groups share each V vector; a
//   causal group reads up to its last row's keys, each row's P being 0
//   past its own), and its keys pass reads P instead of recomputing it;
// - a float mask's gradient: dmask at (b, i, j)'s broadcast position +=
//   dS_ij, in f32, zeroed before the rows (emit_zero_mask_gradient); a
//   row's kBc lanes at once where the mask is contiguous in the keys; a
//   bf16 one sums in f32 in the step's scratch and is rounded once after
//   the rows (emit_round_mask_gradient), as the ref kernel rounds its sums.
#include "lib/backends/xla/XlaAttentionEmitter.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla::attention {

void AttentionEmitter::write_keep_mask(llvm::Value* b, llvm::Value* keep_mask) {
  llvm::Value* base = mul(b, P_.L * P_.S);
  lb_.loop(
      P_.L * P_.S,
      [&](llvm::Value* x) {
        llvm::Value* flat = b_.CreateAdd(base, x);
        llvm::Value* keep = P_.dropout ? kept(flat) : b_.getTrue();
        lb_.store(b_.CreateZExt(keep, b_.getInt8Ty()), keep_mask, flat);
      },
      /*parallel=*/true);
}

void AttentionEmitter::write_probabilities(llvm::Value* b, llvm::Value* first, llvm::Value* nr,
                                           llvm::Value* key_end, llvm::Value* saved,
                                           llvm::Value* probs) {
  // The first pass's scores (the same sums), normalized with the rows'
  // final m and l (a row with every key excluded keeps m = -inf and l = 0:
  // zeros).
  score_groups(b, first, nr, key_end,
               [&](llvm::Value* j0, llvm::Value* nc, llvm::Value*, const Rows& rs,
                   const Rows& scores) {
    for (size_t k = 0; k < rs.size(); ++k) {
      llvm::Value* s = scores[k];
      llvm::Value* m = lb_.load(f32_, m_, rs[k]);
      llvm::Value* l = lb_.load(f32_, l_, rs[k]);
      llvm::Value* m_used = b_.CreateSelect(b_.CreateFCmpOEQ(m, neg_inf()), lb_.f32(0.0f), m);
      llvm::Value* inv_l = b_.CreateSelect(b_.CreateFCmpOGT(l, lb_.f32(0.0f)),
                                           b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      llvm::Value* p = b_.CreateFMul(exp(b_.CreateFSub(s, splat(s, m_used))), splat(s, inv_l));
      llvm::Value* row = b_.CreateAdd(mul(b, P_.L), b_.CreateAdd(first, rs[k]));
      llvm::Value* flat = b_.CreateAdd(mul(row, P_.S), j0);
      if (saved) store_lanes(P_.dtype, p, saved, flat, nc);
      if (!probs) continue;
      if (P_.dropout) p = b_.CreateFMul(p, dropout_factors(flat, nc));
      store_lanes(P_.dtype, p, probs, flat, nc);
    }
  });
}

void AttentionEmitter::saved_row_statistics(llvm::Value* b, llvm::Value* g, llvm::Value* d) {
  const int64_t Ev = P_.Ev;
  row_groups(row_lo_, row_hi_, [&](const Rows& is) {
    // Keys past row i are above the causal diagonal (their P is 0; not
    // reading them keeps a padded value out, as the ref kernel skips
    // them): the group goes to its last row's keys, each row's P is 0
    // past its own.
    auto key_end = [&](llvm::Value* i) { return P_.causal ? smin(key_hi_, add(i, 1)) : key_hi_; };
    llvm::Value* group_end = key_end(is.back());
    llvm::Value* keys = smax(b_.CreateSub(group_end, key_lo_), lb_.i64(0));
    Rows rows, p_at;
    for (size_t k = 0; k < is.size(); ++k) {
      rows.push_back(b_.CreateAdd(mul(b, P_.L), is[k]));
      p_at.push_back(lb_.i64(static_cast<int64_t>(k) * kBc));
      chunks(Ev, [&](int64_t off, unsigned w) {
        store(DType::f32, llvm::Constant::getNullValue(vec(w)), acc_,
              lb_.i64(static_cast<int64_t>(k) * Ev + off));
      });
    }
    // acc_k = sum_j P_kj f_kj v_j, a key tile at a time (each V vector
    // loaded once for the group).
    lb_.loop(lb_.i64(0), b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc)), [&](llvm::Value* kt) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
      llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(group_end, j0));
      for (size_t k = 0; k < is.size(); ++k) {
        llvm::Value* flat = b_.CreateAdd(mul(rows[k], P_.S), j0);
        llvm::Value* row_nc = smin(nc, b_.CreateSub(key_end(is[k]), j0));
        llvm::Value* p = load_lanes(P_.dtype, saved_in_, flat, row_nc);
        if (P_.dropout) p = b_.CreateFMul(p, dropout_factors(flat, row_nc));
        store(DType::f32, p, p_, p_at[k]);
      }
      std::vector<Rows> pv = weighted_rows(p_, p_at, P_.dtype, v_, b_.CreateAdd(mul(b, P_.S), j0),
                                           nc, Ev);
      for (size_t k = 0; k < is.size(); ++k) {
        size_t n = 0;
        chunks(Ev, [&](int64_t off, unsigned w) {
          llvm::Value* at = lb_.i64(static_cast<int64_t>(k) * Ev + off);
          store(DType::f32, b_.CreateFAdd(load(DType::f32, acc_, at, w), pv[k][n++]), acc_, at);
        });
      }
    });
    for (size_t k = 0; k < is.size(); ++k)
      lb_.store(dot(P_.dtype, g, mul(rows[k], Ev), DType::f32, acc_,
                    lb_.i64(static_cast<int64_t>(k) * Ev), Ev),
                d, is[k]);
  });
}

llvm::Value* AttentionEmitter::saved_tile(llvm::Value* row, llvm::Value* j0, llvm::Value* nc) {
  return load_lanes(P_.dtype, saved_in_, b_.CreateAdd(mul(row, P_.S), j0), nc);
}

void AttentionEmitter::add_mask_gradient(llvm::Value* i, llvm::Value* j0, llvm::Value* nc,
                                         llvm::Value* ds_t) {
  llvm::Value* row = b_.CreateAdd(mask_b_, mul(i, P_.mask_row_stride));
  if (P_.mask_col_stride == 1) return add_mask_gradient_lanes(b_.CreateAdd(row, j0), nc, ds_t);
  lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
    llvm::Value* at = b_.CreateAdd(row, mul(b_.CreateAdd(j0, c), P_.mask_col_stride));
    lb_.store(b_.CreateFAdd(lb_.load(f32_, dmask_, at), lb_.load(f32_, ds_t, c)), dmask_, at);
  });
}

void AttentionEmitter::add_mask_gradient_lanes(llvm::Value* at, llvm::Value* nc,
                                               llvm::Value* ds_t) {
  llvm::Value* ds = load(DType::f32, ds_t, lb_.i64(0), kBc);
  store_lanes(DType::f32, b_.CreateFAdd(load_lanes(DType::f32, dmask_, at, nc), ds), dmask_, at,
              nc);
}

llvm::Function* emit_zero_mask_gradient(llvm::Module& module, const std::string& name,
                                        size_t operands, size_t results, const AttentionParams& P,
                                        int64_t scratch_at) {
  const bool in_scratch = scratch_at >= 0;
  LoopBuilder lb(module, name, operands + (in_scratch ? kRuntimeOperands : 0), results);
  llvm::Value* sums =
      in_scratch ? lb.b().CreateConstInBoundsGEP1_64(lb.f32(), lb.operand(operands), scratch_at)
                 : lb.result(P.dmask);
  lb.b().CreateMemSet(sums, lb.b().getInt8(0), lb.i64(P.mask_numel * 4), llvm::MaybeAlign(4));
  return lb.finish();
}

llvm::Function* emit_round_mask_gradient(llvm::Module& module, const std::string& name,
                                         size_t operands, size_t results,
                                         const AttentionParams& P, int64_t scratch_at) {
  LoopBuilder lb(module, name, operands + kRuntimeOperands, results);
  llvm::Value* sums =
      lb.b().CreateConstInBoundsGEP1_64(lb.f32(), lb.operand(operands), scratch_at);
  lb.loop(
      P.mask_numel,
      [&](llvm::Value* i) {
        store_f32(lb, P.dtype, lb.load(lb.f32(), sums, i), lb.result(P.dmask), i);
      },
      /*parallel=*/true);
  return lb.finish();
}

} // namespace mstep::xla::attention
