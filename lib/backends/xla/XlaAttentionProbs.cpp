// The attention loops' parts for nodes with [L, S] results or operands
// (XlaAttentionEmitter.h), as the cpu flash kernels compute them
// (lib/backends/cpu/FlashAttention.cpp, FlashAttentionGrad.cpp; the ref
// kernels are the oracle):
// - a returned dropout mask: the keep bit of every [L, S] position (the
//   ref kernel's Philox draw, also where a key is excluded);
// - returned probabilities (after dropout) and saved ones (before it, for
//   a backward with recompute = 0): a second pass over each finished Q
//   tile recomputes the scores with the rows' final max m and sum l and
//   writes e^(s - m) / l; positions it does not visit (excluded rows,
//   padded keys, key tiles above the causal diagonal) are zeroed first.
//   `out` is the first pass's, bit for bit the out of the same node
//   without these results;
// - the backward from saved probabilities: its rows pass needs only
//   D_i = g_i . sum_j P_ij f_ij v_j, and its keys pass reads P instead of
//   recomputing it;
// - a float mask's gradient: dmask at (b, i, j)'s broadcast position +=
//   dS_ij, in f32, zeroed before the rows (emit_zero_mask_gradient); a
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
  const int64_t E = P_.E;
  llvm::Value* keys = smax(b_.CreateSub(key_end, key_lo_), lb_.i64(0));
  llvm::Value* key_tiles = b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc));
  lb_.loop(lb_.i64(0), key_tiles, [&](llvm::Value* kt) {
    llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
    llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_end, j0));
    llvm::Value* keys_t = key_tile(kt, b_.CreateAdd(mul(b, P_.S), j0), nc);
    lb_.loop(lb_.i64(0), nr, [&](llvm::Value* r) {
      llvm::Value* i = b_.CreateAdd(first, r);
      // The first pass's scores, normalized with the row's final m and l
      // (a row with every key excluded keeps m = -inf and l = 0: zeros).
      llvm::Value* s = mask_tile(i, j0, nc, row_times_tile(qs_, mul(r, E), keys_t, E));
      llvm::Value* m = lb_.load(f32_, m_, r);
      llvm::Value* l = lb_.load(f32_, l_, r);
      llvm::Value* m_used = b_.CreateSelect(b_.CreateFCmpOEQ(m, neg_inf()), lb_.f32(0.0f), m);
      llvm::Value* inv_l = b_.CreateSelect(b_.CreateFCmpOGT(l, lb_.f32(0.0f)),
                                           b_.CreateFDiv(lb_.f32(1.0f), l), lb_.f32(0.0f));
      llvm::Value* p = b_.CreateFMul(exp(b_.CreateFSub(s, splat(s, m_used))), splat(s, inv_l));
      store(DType::f32, p, s_, lb_.i64(0));
      llvm::Value* flat = b_.CreateAdd(mul(b_.CreateAdd(mul(b, P_.L), i), P_.S), j0);
      lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
        llvm::Value* at = b_.CreateAdd(flat, c);
        llvm::Value* pc = lb_.load(f32_, s_, c);
        if (saved) store(P_.dtype, pc, saved, at);
        if (!probs) return;
        if (P_.dropout) pc = b_.CreateFMul(pc, dropout_factor(at));
        store(P_.dtype, pc, probs, at);
      });
    });
  });
}

void AttentionEmitter::saved_row_statistics(llvm::Value* b, llvm::Value* g, llvm::Value* d) {
  const int64_t Ev = P_.Ev;
  lb_.loop(row_lo_, row_hi_, [&](llvm::Value* i) {
    llvm::Value* row = b_.CreateAdd(mul(b, P_.L), i);
    // Keys past row i are above the causal diagonal (their P is 0; not
    // reading them keeps a padded value out, as the ref kernel skips them).
    llvm::Value* key_end = P_.causal ? smin(key_hi_, add(i, 1)) : key_hi_;
    llvm::Value* keys = smax(b_.CreateSub(key_end, key_lo_), lb_.i64(0));
    chunks(Ev, [&](int64_t off, unsigned w) {
      store(DType::f32, llvm::Constant::getNullValue(vec(w)), acc_, lb_.i64(off));
    });
    // acc = sum_j P_ij f_ij v_j, a key tile at a time.
    lb_.loop(lb_.i64(0), b_.CreateSDiv(add(keys, kBc - 1), lb_.i64(kBc)), [&](llvm::Value* kt) {
      llvm::Value* j0 = b_.CreateAdd(key_lo_, mul(kt, kBc));
      llvm::Value* nc = smin(lb_.i64(kBc), b_.CreateSub(key_end, j0));
      llvm::Value* flat = b_.CreateAdd(mul(row, P_.S), j0);
      lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
        llvm::Value* p = load(P_.dtype, saved_in_, b_.CreateAdd(flat, c));
        if (P_.dropout) p = b_.CreateFMul(p, dropout_factor(b_.CreateAdd(flat, c)));
        lb_.store(p, s_, c);
      });
      std::vector<llvm::Value*> pv =
          weighted_rows(s_, P_.dtype, v_, b_.CreateAdd(mul(b, P_.S), j0), nc, Ev);
      size_t n = 0;
      chunks(Ev, [&](int64_t off, unsigned w) {
        llvm::Value* at = lb_.i64(off);
        store(DType::f32, b_.CreateFAdd(load(DType::f32, acc_, at, w), pv[n++]), acc_, at);
      });
    });
    lb_.store(dot(P_.dtype, g, mul(row, Ev), DType::f32, acc_, lb_.i64(0), Ev), d, i);
  });
}

llvm::Value* AttentionEmitter::saved_tile(llvm::Value* row, llvm::Value* j0, llvm::Value* nc) {
  llvm::Value* flat = b_.CreateAdd(mul(row, P_.S), j0);
  store(DType::f32, llvm::Constant::getNullValue(tile_row()), s_, lb_.i64(0));
  lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
    lb_.store(load(P_.dtype, saved_in_, b_.CreateAdd(flat, c)), s_, c);
  });
  return load(DType::f32, s_, lb_.i64(0), kBc);
}

void AttentionEmitter::add_mask_gradient(llvm::Value* i, llvm::Value* j0, llvm::Value* nc,
                                         llvm::Value* ds_t) {
  llvm::Value* row = b_.CreateAdd(mask_b_, mul(i, P_.mask_row_stride));
  lb_.loop(lb_.i64(0), nc, [&](llvm::Value* c) {
    llvm::Value* at = b_.CreateAdd(row, mul(b_.CreateAdd(j0, c), P_.mask_col_stride));
    lb_.store(b_.CreateFAdd(lb_.load(f32_, dmask_, at), lb_.load(f32_, ds_t, c)), dmask_, at);
  });
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
