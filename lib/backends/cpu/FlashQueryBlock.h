// One query block of attention with a tiled online softmax: the forward
// kernel's unit of work, and the backward's first pass (row statistics).
//
// Scores are kept transposed, st[key c][row r], so everything per row
// (running max, exp, sums, the logsumexp) runs on 16 rows at a time, and
// the key rows of k and v are read in place (f32). For a block of rows
// [i0, i0 + nr) of batch-head b, over key tiles of kBlockKeys:
//   1. st = k_tile * (scale q)^T; excluded keys (causal, bool mask) get
//      -inf and a floating mask is added.
//   2. m' = max(m, max_c st); p = exp(st - m'); l = l * e^(m - m') + sum p.
//   3. Dropout multiplies p by keep / (1 - p_drop), drawn from Philox
//      exactly as the ref kernel draws (or read from its returned mask).
//   4. acc = acc * e^(m - m') + p^T v_tile.
// Out is acc / l. Memory is O(tile) per thread, whatever S is.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/backends/cpu/FlashAttentionParams.h"
#include "lib/backends/cpu/FlashAttentionTiles.h"

namespace mstep::cpu::flash {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// One thread's tiles for a QueryBlock, carved from a float array.
struct QueryTiles {
  float* qt = nullptr;       // [E x kBlockRows]: scale * q^T of the block
  float* st = nullptr;       // [kBlockKeys x kBlockRows]: scores^T, then p^T
  float* factors = nullptr;  // [kBlockRows x kBlockKeys]: dropout factors
  float* acc = nullptr;      // [kBlockRows x Ev]
  float* m = nullptr;        // [kBlockRows] running max
  float* l = nullptr;        // [kBlockRows] running sum
  float* alpha = nullptr;    // [kBlockRows] per-tile rescale, then 1 / l
  float* k_rows = nullptr;   // [kBlockKeys x E], bf16 only: the key tile in f32
  float* v_rows = nullptr;   // [kBlockKeys x Ev], bf16 only

  /// Points the tiles of `t` into `base` (only counts when `t` is null);
  /// returns the floats they take, each part rounded to 64 bytes.
  static int64_t carve(QueryTiles* t, float* base, const AttentionParams& P) {
    int64_t used = 0;
    auto take = [&](float*& dst, int64_t n) {
      if (t) dst = base + used;
      used += round_up(n, kLanes);
    };
    QueryTiles counted;
    QueryTiles& d = t ? *t : counted;
    const bool convert = P.dtype != DType::f32;
    take(d.qt, P.E * kBlockRows);
    take(d.st, kBlockKeys * kBlockRows);
    take(d.factors, P.dropout ? kBlockRows * kBlockKeys : 0);
    take(d.acc, kBlockRows * P.Ev);
    take(d.m, kBlockRows);
    take(d.l, kBlockRows);
    take(d.alpha, kBlockRows);
    take(d.k_rows, convert ? kBlockKeys * P.E : 0);
    take(d.v_rows, convert ? kBlockKeys * P.Ev : 0);
    return used;
  }
};

/// The data one run attends over.
template <typename T>
struct AttentionInputs {
  const T* q = nullptr;
  const T* k = nullptr;
  const T* v = nullptr;
  const void* mask = nullptr;       // bool or T, per AttentionParams
  const bool* keep_mask = nullptr;  // the forward's returned dropout mask, if any
  DropoutDraw dropout;
};

/// The online softmax over one block of query rows (steps 1-4 above).
template <typename T>
class QueryBlock {
 public:
  QueryBlock(const AttentionParams& P, const AttentionInputs<T>& in, QueryTiles& t)
      : P_(P), in_(in), t_(t) {}

  /// Starts rows [i0, i0 + nr) of batch-head b: loads scale * q^T (so
  /// the products are the scaled scores), clears m, l, acc.
  void begin(int64_t b, int64_t i0, int64_t nr) {
    b_ = b;
    i0_ = i0;
    nr_ = nr;
    nr_vec_ = round_up(nr, kLanes);
    load_transposed(in_.q + (b * P_.L + i0) * P_.E, nr, P_.E, t_.qt, kBlockRows,
                    static_cast<float>(P_.scale));
    std::fill(t_.m, t_.m + kBlockRows, kNegInf);
    std::fill(t_.l, t_.l + kBlockRows, 0.0f);
    std::fill(t_.acc, t_.acc + nr * P_.Ev, 0.0f);
  }

  /// Step 1 for keys [j0, j0 + nc): t.st[c][r] = masked, scaled scores.
  void scores(int64_t j0, int64_t nc) {
    float* st = t_.st;
    const float* k_rows = rows_as_f32(in_.k + (b_ * P_.S + j0) * P_.E, nc, P_.E, t_.k_rows);
    gemm_assign<false>(nc, nr_vec_, P_.E, k_rows, P_.E, t_.qt, kBlockRows, st, kBlockRows);
    for (int64_t c = 0; c < nc; ++c) {
      float* row = st + c * kBlockRows;
      const int64_t j = j0 + c;
      // Rows i < j of a causal block are above the diagonal for key j.
      const int64_t first = P_.causal ? std::clamp<int64_t>(j - i0_, 0, nr_) : 0;
      for (int64_t r = 0; r < first; ++r) row[r] = kNegInf;
      if (!in_.mask) continue;
      const int64_t base = P_.mask_offset(b_, i0_, j);
      if (P_.bool_mask) {
        const bool* mask = static_cast<const bool*>(in_.mask) + base;
        for (int64_t r = first; r < nr_; ++r)
          if (!mask[r * P_.mask_row_stride]) row[r] = kNegInf;
      } else {
        const T* mask = static_cast<const T*>(in_.mask) + base;
        for (int64_t r = first; r < nr_; ++r) row[r] += to_f32(mask[r * P_.mask_row_stride]);
      }
    }
  }

  /// Steps 2-4 for keys [j0, j0 + nc) after scores(): updates m, l and
  /// acc; with `apply_dropout` acc sums the dropped-out probabilities.
  void accumulate(int64_t j0, int64_t nc, bool apply_dropout) {
    float* st = t_.st;
    for (int64_t r = 0; r < nr_vec_; r += kLanes) {
      VecF block_max = splat(kNegInf);
      for (int64_t c = 0; c < nc; ++c) block_max = vmax(block_max, load(st + c * kBlockRows + r));
      const VecF m_old = load(t_.m + r);
      const VecF m_new = vmax(m_old, block_max);
      // A row with no key yet keeps m = -inf; subtracting 0 keeps p = 0.
      const VecF m_used = m_new == splat(kNegInf) ? splat(0.0f) : m_new;
      const VecF alpha = exp16(m_old - m_used);
      VecF sum = splat(0.0f);
      for (int64_t c = 0; c < nc; ++c) {
        const VecF p = exp16(load(st + c * kBlockRows + r) - m_used);
        store(st + c * kBlockRows + r, p);
        sum += p;
      }
      store(t_.m + r, m_new);
      store(t_.l + r, load(t_.l + r) * alpha + sum);
      store(t_.alpha + r, alpha);
    }
    if (apply_dropout) apply_dropout_factors(j0, nc);
    for (int64_t r = 0; r < nr_; ++r) {
      float* acc = t_.acc + r * P_.Ev;
      const float alpha = t_.alpha[r];
      for (int64_t e = 0; e < P_.Ev; ++e) acc[e] *= alpha;
    }
    add_probs_times_values(j0, nc);
  }

  /// acc += st^T * v_tile for keys [j0, j0 + nc).
  void add_probs_times_values(int64_t j0, int64_t nc) {
    const float* v_rows = rows_as_f32(in_.v + (b_ * P_.S + j0) * P_.Ev, nc, P_.Ev, t_.v_rows);
    gemm_accumulate<true>(nr_, P_.Ev, nc, t_.st, kBlockRows, v_rows, P_.Ev, t_.acc, P_.Ev);
  }

  /// st[c][r] *= the dropout factor of (row i0 + r, key j0 + c).
  void apply_dropout_factors(int64_t j0, int64_t nc) {
    if (!P_.dropout) return;
    float* factors = t_.factors;
    for (int64_t r = 0; r < nr_; ++r) {
      const int64_t flat = ((b_ * P_.L) + i0_ + r) * P_.S + j0;
      float* f = factors + r * kBlockKeys;
      if (in_.keep_mask) {
        for (int64_t c = 0; c < nc; ++c)
          f[c] = in_.keep_mask[flat + c] ? in_.dropout.keep_scale : 0.0f;
      } else {
        dropout_factors(in_.dropout, static_cast<uint64_t>(flat), nc, f);
      }
    }
    for (int64_t c = 0; c < nc; ++c) {
      float* row = t_.st + c * kBlockRows;
      for (int64_t r = 0; r < nr_; ++r) row[r] *= factors[r * kBlockKeys + c];
    }
  }

  /// After the last accumulate(): t.alpha[r] = 1 / l (0 for a row with
  /// every key excluded, whose output is zero as in the ref kernel).
  void finish_normalizer() {
    for (int64_t r = 0; r < nr_; ++r) t_.alpha[r] = t_.l[r] > 0 ? 1.0f / t_.l[r] : 0.0f;
  }

  /// With the final m and l (after finish_normalizer): t.st = the
  /// normalized probabilities of keys [j0, j0 + nc), before dropout.
  void normalized_probabilities(int64_t j0, int64_t nc) {
    scores(j0, nc);
    for (int64_t r = 0; r < nr_vec_; r += kLanes) {
      const VecF m = load(t_.m + r);
      const VecF m_used = m == splat(kNegInf) ? splat(0.0f) : m;
      const VecF inv_l = load(t_.alpha + r);
      for (int64_t c = 0; c < nc; ++c) {
        float* p = t_.st + c * kBlockRows + r;
        store(p, exp16(load(p) - m_used) * inv_l);
      }
    }
  }

  /// Writes t.st (rows r < nr, keys c < nc) to rows [i0, ...) and keys
  /// [j0, ...) of an [..., L, S] result.
  void write_probabilities(T* dst, int64_t j0, int64_t nc) const {
    for (int64_t r = 0; r < nr_; ++r) {
      T* row = dst + ((b_ * P_.L) + i0_ + r) * P_.S + j0;
      for (int64_t c = 0; c < nc; ++c) row[c] = from_f32<T>(t_.st[c * kBlockRows + r]);
    }
  }

  /// t.st = rows [i0, ...) and keys [j0, j0 + nc) of an [..., L, S]
  /// tensor (the forward's saved probabilities), transposed.
  void load_probabilities(const T* src, int64_t j0, int64_t nc) {
    for (int64_t r = 0; r < nr_; ++r) {
      const T* row = src + ((b_ * P_.L) + i0_ + r) * P_.S + j0;
      for (int64_t c = 0; c < nc; ++c) t_.st[c * kBlockRows + r] = to_f32(row[c]);
    }
  }

 private:
  const AttentionParams& P_;
  const AttentionInputs<T>& in_;
  QueryTiles& t_;
  int64_t b_ = 0, i0_ = 0, nr_ = 0, nr_vec_ = 0;
};

}  // namespace mstep::cpu::flash
