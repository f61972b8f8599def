// Ref kernel for `sdpa` (scaled dot-product attention with FusedSDPA's
// options). Naive O(L * S) per query row, accumulated in double: it is the
// readable oracle the fused backends are checked against.
//
// Per batch-head b and query row i:
//   1. A row outside valid_seq_len produces zeros (out and probs).
//   2. score[j] = scale * q[i] . k[j]; a key j is excluded (-inf) when the
//      causal rule (j > i), a false bool mask, or valid_seq_len rules it
//      out; a floating mask is added.
//   3. probs = softmax(score). A row with every key excluded gives zero
//      probabilities and a zero output (PyTorch 1.13 gives NaN there).
//      With recompute = 0 they are also written, before dropout, to the
//      last result for the backward.
//   4. Dropout: key j is kept iff Philox::uniform(seed, state offset +
//      node offset, linear index of (b, i, j) in [..., L, S]) >= p; kept
//      probabilities are scaled by 1 / (1 - p).
//   5. out[i] = sum_j probs[j] * v[j].
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/backends/ref/RefKernels.h"
#include "lib/backends/ref/RefSdpaParams.h"
#include "mstep/core/Philox.h"

namespace mstep::ref {

namespace {

/// The forward's params: the shared ones and which extra results it writes.
struct SdpaForwardParams : SdpaParams {
  bool return_probs = false, return_mask = false, save_probs = false;
};

template <typename T>
absl::Status run_sdpa(const KernelArgs& a, const SdpaForwardParams& P) {
  const T* q = a.in(0).data<T>();
  const T* k = a.in(1).data<T>();
  const T* v = a.in(2).data<T>();
  size_t next_in = 3;
  const HostBuffer* mask = P.has_mask ? &a.in(next_in++) : nullptr;
  const HostBuffer* lens = P.has_len ? &a.in(next_in++) : nullptr;

  T* out = a.out(0).data<T>();
  size_t next_out = 1;
  T* probs_out = P.return_probs ? a.out(next_out++).data<T>() : nullptr;
  bool* mask_out = P.return_mask ? a.out(next_out++).data<bool>() : nullptr;
  T* saved_out = P.save_probs ? a.out(next_out++).data<T>() : nullptr;

  Shape scores(a.in(0).type().shape.dims());  // [..., L, S]
  scores[scores.rank() - 1] = P.S;
  Shape::Dims mstrides;
  if (mask) mstrides = broadcast_strides(mask->type().shape, scores);
  const bool bool_mask = mask && mask->type().dtype == DType::boolean;
  const int64_t ms_row = mask ? mstrides[scores.rank() - 2] : 0;
  const int64_t ms_col = mask ? mstrides[scores.rank() - 1] : 0;

  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const double keep_scale = P.p < 1 ? 1.0 / (1.0 - P.p) : 0.0;
  std::vector<double> s(P.S), acc(P.Ev);

  for (int64_t b = 0; b < P.batch; ++b) {
    int64_t row_lo = 0, row_hi = P.L, key_lo = 0, key_hi = P.S;
    if (lens) {
      const int64_t len = lens->type().dtype == DType::i32
                              ? lens->data<int32_t>()[b / P.rows_per_b0]
                              : lens->data<int64_t>()[b / P.rows_per_b0];
      valid_range(len, P.L, P.left_pad, row_lo, row_hi);
      valid_range(len, P.S, P.left_pad, key_lo, key_hi);
    }
    const int64_t mbase = mask ? mask_base(scores, mstrides, b) : 0;
    for (int64_t i = 0; i < P.L; ++i) {
      const int64_t row = b * P.L + i;  // row of the flat [..., L, S] matrix
      const T* qi = q + row * P.E;
      // Steps 2-3: masked scores and a NaN-propagating running max.
      double m = kNegInf;
      const bool row_valid = i >= row_lo && i < row_hi;
      for (int64_t j = 0; j < P.S; ++j) {
        bool excluded =
            !row_valid || j < key_lo || j >= key_hi || (P.causal && j > i);
        double add = 0;
        if (mask && !excluded) {
          const int64_t mo = mbase + i * ms_row + j * ms_col;
          if (bool_mask)
            excluded = !mask->data<bool>()[mo];
          else
            add = static_cast<double>(
                static_cast<Compute<T>>(mask->data<T>()[mo]));
        }
        if (excluded) {
          s[j] = kNegInf;
          continue;
        }
        const T* kj = k + (b * P.S + j) * P.E;
        double dot = 0;
        for (int64_t e = 0; e < P.E; ++e)
          dot += static_cast<double>(static_cast<Compute<T>>(qi[e])) *
                 static_cast<double>(static_cast<Compute<T>>(kj[e]));
        s[j] = P.scale * dot + add;
        if (s[j] > m || std::isnan(s[j])) m = std::isnan(m) ? m : s[j];
      }
      double sum = 0;
      if (m != kNegInf) {
        for (int64_t j = 0; j < P.S; ++j) sum += s[j] = std::exp(s[j] - m);
      } else {
        for (int64_t j = 0; j < P.S; ++j) s[j] = 0;  // no key left: zeros
        sum = 1;
      }
      // Steps 4-5.
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < P.S; ++j) {
        const int64_t flat = row * P.S + j;
        double pj = s[j] / sum;
        if (saved_out) saved_out[flat] = static_cast<T>(static_cast<Compute<T>>(pj));
        bool keep = true;
        if (P.dropout) {
          keep = Philox::uniform(P.seed, P.offset, flat) >= P.p;
          pj = keep ? pj * keep_scale : 0.0;
        }
        if (probs_out)
          probs_out[flat] = static_cast<T>(static_cast<Compute<T>>(pj));
        if (mask_out) mask_out[flat] = keep;
        // Excluded and dropped keys do not contribute at all, so a padded
        // key's (possibly garbage, even NaN) value cannot leak in.
        if (pj == 0) continue;
        const T* vj = v + (b * P.S + j) * P.Ev;
        for (int64_t e = 0; e < P.Ev; ++e)
          acc[e] += pj * static_cast<double>(static_cast<Compute<T>>(vj[e]));
      }
      T* oi = out + row * P.Ev;
      for (int64_t e = 0; e < P.Ev; ++e)
        oi[e] = static_cast<T>(static_cast<Compute<T>>(acc[e]));
    }
  }
  return absl::OkStatus();
}

absl::Status sdpa(const KernelArgs& a) {
  const AttrList& attrs = a.node.attrs;
  SdpaForwardParams P;
  MSTEP_RETURN_IF_ERROR(read_sdpa_params(a, 0, "sdpa", P));
  P.return_probs = attr_int(attrs, AttrName::return_probs) != 0;
  P.return_mask = attr_int(attrs, AttrName::return_mask) != 0;
  P.save_probs = attr_int(attrs, AttrName::recompute) == 0;
  if (a.outputs.size() != size_t{1} + P.return_probs + P.return_mask + P.save_probs)
    return absl::InternalError("sdpa: result count disagrees with the attrs");
  return dispatch_floating(a.in(0).type().dtype,
                           [&]<typename T>() { return run_sdpa<T>(a, P); });
}

}  // namespace

void register_attention_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::sdpa)] = sdpa;
}

}  // namespace mstep::ref
