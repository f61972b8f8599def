// The flash `sdpa_grad` kernel: the attention backward without an [L, S]
// buffer. sdpa's results carry no logsumexp, so the kernel rebuilds the
// row statistics itself. With P the softmax, f the dropout factors
// (keep / (1 - p), regenerated from Philox), g = grad_out:
//   1. Rows pass, per (batch-head, query block), as the forward: the
//      online softmax gives lse_i = m_i + log l_i and out_i, and
//      D_i = g_i . out_i = sum_j P_ij f_ij dP_ij. With saved probabilities
//      (recompute = 0) only D is needed, from out_i = sum_j P_ij f_ij v_j.
//      This keeps O(L) floats per batch-head.
//   2. Keys pass, per (batch-head, set of key tiles): for each key tile the
//      query tiles that see it (causal and valid_seq_len skip the rest):
//      P = exp(scale q k^T + mask - lse) (or the saved tile), dP = g v^T,
//      dV += (P f)^T g, dS = P (dP f - D), dK += scale dS^T q,
//      dQ += scale dS k, dmask += dS.
//      dK and dV belong to the item. When there are fewer batch-heads than
//      threads the key tiles of one batch-head are split into interleaved
//      sets (balancing causal work); each set then sums its own dQ partial,
//      and 3. adds the partials (no atomics, the same result on any thread
//      count).
// A mask gradient accumulates straight into the result: items never share
// a mask element, except when the mask is broadcast over batch-heads, when
// the keys pass runs on one thread.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/backends/cpu/FlashAttention.h"
#include "lib/backends/cpu/FlashAttentionParams.h"
#include "lib/backends/cpu/FlashQueryBlock.h"

namespace mstep::cpu::flash {

namespace {

/// One thread's tiles for the keys pass.
struct KeyTiles {
  float* kt = nullptr;      // [E x kBlockKeys]: scale * k^T of the key tile
  float* vt = nullptr;      // [Ev x kBlockKeys]: v^T
  float* k_rows = nullptr;  // [kBlockKeys x E], bf16 only
  float* q_rows = nullptr;  // [kBlockRows x E], bf16 only
  float* g_rows = nullptr;  // [kBlockRows x Ev], bf16 only
  float* p = nullptr;       // [kBlockRows x kBlockKeys]: probabilities
  float* ds = nullptr;      // [kBlockRows x kBlockKeys]: dP, then dS
  float* pf = nullptr;      // [kBlockRows x kBlockKeys]: factors, then P f
  float* dk = nullptr;      // [kBlockKeys x E]
  float* dv = nullptr;      // [kBlockKeys x Ev]
  float* dq = nullptr;      // [L x E], when one item owns a batch-head's dQ

  /// As QueryTiles::carve.
  static int64_t carve(KeyTiles* t, float* base, const AttentionParams& P, bool own_dq) {
    int64_t used = 0;
    auto take = [&](float*& dst, int64_t n) {
      if (t) dst = base + used;
      used += round_up(n, kLanes);
    };
    KeyTiles counted;
    KeyTiles& d = t ? *t : counted;
    const bool convert = P.dtype != DType::f32;
    take(d.kt, P.E * kBlockKeys);
    take(d.vt, P.Ev * kBlockKeys);
    take(d.k_rows, convert ? kBlockKeys * P.E : 0);
    take(d.q_rows, convert ? kBlockRows * P.E : 0);
    take(d.g_rows, convert ? kBlockRows * P.Ev : 0);
    take(d.p, kBlockRows * kBlockKeys);
    take(d.ds, kBlockRows * kBlockKeys);
    take(d.pf, P.dropout ? kBlockRows * kBlockKeys : 0);
    take(d.dk, kBlockKeys * P.E);
    take(d.dv, kBlockKeys * P.Ev);
    take(d.dq, own_dq ? P.L * P.E : 0);
    return used;
  }
};

template <typename T>
class FlashSdpaGradKernel final : public FlashAttentionKernel {
 public:
  explicit FlashSdpaGradKernel(AttentionParams params)
      : P_(std::move(params)),
        threads_(std::max(1, omp_get_max_threads())),
        chunks_(key_chunks(P_, threads_)),
        serial_keys_pass_(P_.dmask >= 0 && P_.mask_shared_across_batch),
        scratch_(threads_,
                 std::max(QueryTiles::carve(nullptr, nullptr, P_),
                          KeyTiles::carve(nullptr, nullptr, P_, chunks_ == 1)),
                 2 * P_.batch * P_.L + (chunks_ > 1 ? P_.batch * chunks_ * P_.L * P_.E : 0)),
        lse_(scratch_.shared()),
        d_(lse_ + P_.batch * P_.L),
        dq_partials_(chunks_ > 1 ? d_ + P_.batch * P_.L : nullptr),
        query_blocks_((P_.L + kBlockRows - 1) / kBlockRows) {}

  absl::string_view name() const override { return "flash.sdpa_grad"; }
  size_t scratch_bytes() const override { return scratch_.bytes(); }

  void run(const void* const* operands, void* const* results) override {
    Run run;
    run.g = static_cast<const T*>(operands[P_.grad_out]);
    run.in.q = static_cast<const T*>(operands[P_.q]);
    run.in.k = static_cast<const T*>(operands[P_.k]);
    run.in.v = static_cast<const T*>(operands[P_.v]);
    if (P_.mask >= 0) run.in.mask = operands[P_.mask];
    if (P_.dropout) run.in.dropout = read_dropout(P_, operands[P_.rng_state]);
    if (P_.valid_len >= 0) run.valid_len = operands[P_.valid_len];
    if (P_.saved_probs_in >= 0) run.saved = static_cast<const T*>(operands[P_.saved_probs_in]);
    run.dq = static_cast<T*>(results[0]);
    run.dk = static_cast<T*>(results[1]);
    run.dv = static_cast<T*>(results[2]);
    if (P_.dmask >= 0) {
      // Only f32 reaches here (see make_flash_attention_kernel).
      run.dmask = static_cast<float*>(results[P_.dmask]);
      std::fill(run.dmask, run.dmask + P_.mask_numel, 0.0f);
    }

    const int64_t row_items = P_.batch * query_blocks_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(scratch_.team_size())
    for (int64_t item = 0; item < row_items; ++item)
      row_statistics(run, item / query_blocks_, item % query_blocks_);

    const int64_t key_items = P_.batch * chunks_;
#pragma omp parallel for schedule(dynamic, 1) \
    num_threads(scratch_.team_size()) if (!serial_keys_pass_)
    for (int64_t item = 0; item < key_items; ++item) key_chunk(run, item / chunks_, item % chunks_);

    if (chunks_ > 1) {
#pragma omp parallel for schedule(static) num_threads(scratch_.team_size())
      for (int64_t item = 0; item < row_items; ++item)
        sum_dq_partials(run, item / query_blocks_, item % query_blocks_);
    }
  }

 private:
  struct Run {
    AttentionInputs<T> in;
    const T* g = nullptr;
    const void* valid_len = nullptr;
    const T* saved = nullptr;
    T *dq = nullptr, *dk = nullptr, *dv = nullptr;
    float* dmask = nullptr;
  };

  /// Sets of key tiles per batch-head: enough items for every thread.
  static int64_t key_chunks(const AttentionParams& P, int threads) {
    const int64_t key_tiles = (P.S + kBlockKeys - 1) / kBlockKeys;
    // Split tiles of one batch-head only if their mask gradients stay apart.
    if (P.batch >= threads || key_tiles <= 1 || (P.dmask >= 0 && P.mask_col_stride == 0)) return 1;
    return std::min<int64_t>(key_tiles, (threads + P.batch - 1) / P.batch);
  }

  float* thread_scratch() { return scratch_.thread(omp_get_thread_num()); }

  /// Step 1 for query block `block` of batch-head b.
  void row_statistics(const Run& run, int64_t b, int64_t block) {
    const ValidRanges valid = valid_ranges(P_, run.valid_len, b);
    const int64_t first = std::max(block * kBlockRows, valid.row_lo);
    const int64_t last = std::min(std::min(P_.L, (block + 1) * kBlockRows), valid.row_hi);
    if (first >= last) return;
    const int64_t key_begin = valid.key_lo;
    const int64_t key_end = P_.causal ? std::min(valid.key_hi, last) : valid.key_hi;
    QueryTiles tiles;
    QueryTiles::carve(&tiles, thread_scratch(), P_);
    QueryBlock<T> rows(P_, run.in, tiles);
    rows.begin(b, first, last - first);
    for (int64_t j0 = key_begin; j0 < key_end; j0 += kBlockKeys) {
      const int64_t nc = std::min(kBlockKeys, key_end - j0);
      if (run.saved) {
        rows.load_probabilities(run.saved, j0, nc);
        rows.apply_dropout_factors(j0, nc);
        rows.add_probs_times_values(j0, nc);
      } else {
        rows.scores(j0, nc);
        rows.accumulate(j0, nc, /*apply_dropout=*/true);
      }
    }
    rows.finish_normalizer();
    for (int64_t r = 0; r < last - first; ++r) {
      const int64_t row = b * P_.L + first + r;
      const float norm = run.saved ? 1.0f : tiles.alpha[r];
      const float* acc = tiles.acc + r * P_.Ev;
      const T* g = run.g + row * P_.Ev;
      float d = 0;
      for (int64_t e = 0; e < P_.Ev; ++e) d += to_f32(g[e]) * acc[e];
      d_[row] = d * norm;
      // A row with every key excluded has l = 0: lse = +inf makes its P 0.
      lse_[row] = tiles.l[r] > 0 ? tiles.m[r] + std::log(tiles.l[r])
                                 : std::numeric_limits<float>::infinity();
    }
  }

  /// Step 2 for the key tiles chunk, chunk + chunks_, ... of batch-head b.
  void key_chunk(const Run& run, int64_t b, int64_t chunk) {
    const ValidRanges valid = valid_ranges(P_, run.valid_len, b);
    KeyTiles tiles;
    KeyTiles::carve(&tiles, thread_scratch(), P_, chunks_ == 1);
    float* dq = chunks_ == 1 ? tiles.dq : dq_partials_ + (b * chunks_ + chunk) * P_.L * P_.E;
    std::fill(dq, dq + P_.L * P_.E, 0.0f);
    if (chunk == 0) {  // padded keys get zero gradients
      zero_rows(run.dk, b, 0, valid.key_lo, P_.E);
      zero_rows(run.dk, b, valid.key_hi, P_.S, P_.E);
      zero_rows(run.dv, b, 0, valid.key_lo, P_.Ev);
      zero_rows(run.dv, b, valid.key_hi, P_.S, P_.Ev);
    }
    const float scale = static_cast<float>(P_.scale);
    const int64_t key_tiles = (valid.key_hi - valid.key_lo + kBlockKeys - 1) / kBlockKeys;
    for (int64_t tile = chunk; tile < key_tiles; tile += chunks_) {
      const int64_t j0 = valid.key_lo + tile * kBlockKeys;
      const int64_t nc = std::min(kBlockKeys, valid.key_hi - j0);
      key_tile(run, b, valid, j0, nc, tiles, dq);
      T* dk = run.dk + (b * P_.S + j0) * P_.E;
      for (int64_t x = 0; x < nc * P_.E; ++x) dk[x] = from_f32<T>(scale * tiles.dk[x]);
      T* dv = run.dv + (b * P_.S + j0) * P_.Ev;
      for (int64_t x = 0; x < nc * P_.Ev; ++x) dv[x] = from_f32<T>(tiles.dv[x]);
    }
    if (chunks_ == 1) write_dq(run, b, valid, 0, P_.L, dq, 1);
  }

  /// dK, dV of keys [j0, j0 + nc) into tiles.dk/dv (dK unscaled), and
  /// their share of dQ (unscaled) into dq [L x E].
  void key_tile(const Run& run, int64_t b, const ValidRanges& valid, int64_t j0, int64_t nc,
                KeyTiles& t, float* dq) {
    const int64_t nc_vec = round_up(nc, kLanes);
    const T* k = run.in.k + (b * P_.S + j0) * P_.E;
    load_transposed(k, nc, P_.E, t.kt, kBlockKeys, static_cast<float>(P_.scale));
    load_transposed(run.in.v + (b * P_.S + j0) * P_.Ev, nc, P_.Ev, t.vt, kBlockKeys);
    const float* k_rows = rows_as_f32(k, nc, P_.E, t.k_rows);
    std::fill(t.dk, t.dk + nc * P_.E, 0.0f);
    std::fill(t.dv, t.dv + nc * P_.Ev, 0.0f);
    // Rows before j0 see none of these keys when causal.
    const int64_t row_begin = P_.causal ? std::max(valid.row_lo, j0) : valid.row_lo;
    for (int64_t i0 = row_begin; i0 < valid.row_hi; i0 += kBlockRows) {
      const int64_t nr = std::min(kBlockRows, valid.row_hi - i0);
      const int64_t row0 = b * P_.L + i0;
      const float* q = rows_as_f32(run.in.q + row0 * P_.E, nr, P_.E, t.q_rows);
      const float* g = rows_as_f32(run.g + row0 * P_.Ev, nr, P_.Ev, t.g_rows);
      probabilities(run, b, i0, nr, j0, nc, q, t);
      // dP = g v^T, times the dropout factors; pf = P f.
      gemm_assign<false>(nr, nc_vec, P_.Ev, g, P_.Ev, t.vt, kBlockKeys, t.ds, kBlockKeys);
      const float* p_dropped = t.p;
      if (P_.dropout) {
        for (int64_t r = 0; r < nr; ++r) {
          float* f = t.pf + r * kBlockKeys;
          dropout_factors(run.in.dropout, static_cast<uint64_t>((row0 + r) * P_.S + j0), nc, f);
          float* ds = t.ds + r * kBlockKeys;
          const float* p = t.p + r * kBlockKeys;
          for (int64_t c = 0; c < nc; ++c) {
            ds[c] *= f[c];
            f[c] *= p[c];
          }
        }
        p_dropped = t.pf;
      }
      gemm_accumulate<true>(nc, P_.Ev, nr, p_dropped, kBlockKeys, g, P_.Ev, t.dv, P_.Ev);
      // dS = P (dP - D).
      for (int64_t r = 0; r < nr; ++r) {
        const VecF d = splat(d_[row0 + r]);
        float* ds = t.ds + r * kBlockKeys;
        const float* p = t.p + r * kBlockKeys;
        for (int64_t c = 0; c < nc_vec; c += kLanes)
          store(ds + c, load(p + c) * (load(ds + c) - d));
      }
      if (run.dmask) {
        for (int64_t r = 0; r < nr; ++r) {
          float* dmask = run.dmask + P_.mask_offset(b, i0 + r, j0);
          const float* ds = t.ds + r * kBlockKeys;
          for (int64_t c = 0; c < nc; ++c) dmask[c * P_.mask_col_stride] += ds[c];
        }
      }
      gemm_accumulate<true>(nc, P_.E, nr, t.ds, kBlockKeys, q, P_.E, t.dk, P_.E);
      gemm_accumulate<false>(nr, P_.E, nc, t.ds, kBlockKeys, k_rows, P_.E, dq + i0 * P_.E, P_.E);
    }
  }

  /// t.p = the probabilities of rows [i0, i0 + nr) and keys [j0, j0 + nc)
  /// (zero in the padding columns up to a whole vector).
  void probabilities(const Run& run, int64_t b, int64_t i0, int64_t nr, int64_t j0, int64_t nc,
                     const float* q, KeyTiles& t) {
    const int64_t nc_vec = round_up(nc, kLanes);
    const int64_t row0 = b * P_.L + i0;
    if (run.saved) {
      for (int64_t r = 0; r < nr; ++r) {
        const T* src = run.saved + (row0 + r) * P_.S + j0;
        float* p = t.p + r * kBlockKeys;
        for (int64_t c = 0; c < nc; ++c) p[c] = to_f32(src[c]);
        std::fill(p + nc, p + nc_vec, 0.0f);
      }
      return;
    }
    gemm_assign<false>(nr, nc_vec, P_.E, q, P_.E, t.kt, kBlockKeys, t.p, kBlockKeys);  // scaled
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t i = i0 + r;
      float* s = t.p + r * kBlockKeys;
      // Keys past row i are above the causal diagonal.
      const int64_t visible = P_.causal ? std::clamp<int64_t>(i - j0 + 1, 0, nc) : nc;
      std::fill(s + visible, s + nc_vec, kNegInf);
      if (run.in.mask) {
        const int64_t base = P_.mask_offset(b, i, j0);
        const int64_t stride = P_.mask_col_stride;
        if (P_.bool_mask) {
          const bool* mask = static_cast<const bool*>(run.in.mask) + base;
          for (int64_t c = 0; c < visible; ++c)
            if (!mask[c * stride]) s[c] = kNegInf;
        } else {
          const T* mask = static_cast<const T*>(run.in.mask) + base;
          for (int64_t c = 0; c < visible; ++c) s[c] += to_f32(mask[c * stride]);
        }
      }
      const VecF lse = splat(lse_[row0 + r]);
      for (int64_t c = 0; c < nc_vec; c += kLanes) store(s + c, exp16(load(s + c) - lse));
    }
  }

  /// Step 3 for query block `block` of batch-head b.
  void sum_dq_partials(const Run& run, int64_t b, int64_t block) {
    const ValidRanges valid = valid_ranges(P_, run.valid_len, b);
    write_dq(run, b, valid, block * kBlockRows, std::min(P_.L, (block + 1) * kBlockRows),
             dq_partials_ + b * chunks_ * P_.L * P_.E, chunks_);
  }

  /// dq rows [first, last) of batch-head b = scale * the sum of `count`
  /// consecutive f32 [L x E] partials; zero outside the valid rows.
  void write_dq(const Run& run, int64_t b, const ValidRanges& valid, int64_t first, int64_t last,
                const float* partials, int64_t count) const {
    const float scale = static_cast<float>(P_.scale);
    for (int64_t i = first; i < last; ++i) {
      T* dst = run.dq + (b * P_.L + i) * P_.E;
      if (i < valid.row_lo || i >= valid.row_hi) {
        std::fill(dst, dst + P_.E, from_f32<T>(0));
        continue;
      }
      for (int64_t e = 0; e < P_.E; ++e) {
        float sum = 0;
        for (int64_t c = 0; c < count; ++c) sum += partials[(c * P_.L + i) * P_.E + e];
        dst[e] = from_f32<T>(scale * sum);
      }
    }
  }

  void zero_rows(T* data, int64_t b, int64_t first, int64_t last, int64_t width) const {
    if (first < last)
      std::fill(data + (b * P_.S + first) * width, data + (b * P_.S + last) * width,
                from_f32<T>(0));
  }

  const AttentionParams P_;
  const int threads_;
  const int64_t chunks_;
  const bool serial_keys_pass_;
  ThreadScratch scratch_;
  float* const lse_;          // [batch * L]
  float* const d_;            // [batch * L]
  float* const dq_partials_;  // [batch, chunks, L, E] when chunks_ > 1
  const int64_t query_blocks_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_flash_sdpa_grad_kernel(AttentionParams params) {
  if (params.dtype == DType::bf16)
    return std::make_unique<FlashSdpaGradKernel<BFloat16>>(std::move(params));
  return std::make_unique<FlashSdpaGradKernel<float>>(std::move(params));
}

}  // namespace mstep::cpu::flash
