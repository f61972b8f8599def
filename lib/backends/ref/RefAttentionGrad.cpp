// Ref kernel for `sdpa_grad`, the backward of scaled dot-product attention
// (contract in lib/api/AttentionGrad.h). Like the forward ref kernel it is
// a naive per-row loop accumulated in double: the readable oracle that
// fused backends are checked against.
//
// The probabilities are recomputed from q and k (nothing [..., L, S] is
// saved by the forward), with the forward kernel's exclusion rules
// (RefAttention.cpp; the two must agree), or with recompute = 0 read from
// the forward's saved pre-dropout probabilities. Per batch-head b and query row i,
// with g = grad_out[i], P the softmax and P' the probabilities after
// dropout (keep_j / (1 - p), or P itself without dropout):
//   1. A row outside valid_seq_len, or with every key excluded, has P = 0:
//      its dq is zero and it adds nothing to dk, dv or dmask.
//   2. dv[j] += P'[j] * g.
//   3. dP[j] = (g . v[j]) * keep_j / (1 - p); keep_j is regenerated from the
//      RNG state and the forward's offset with the forward's Philox rule.
//   4. dS[j] = P[j] * (dP[j] - sum_k P[k] dP[k])   (softmax backward).
//   5. dq[i] = scale * sum_j dS[j] k[j];  dk[j] += scale * dS[j] q[i];
//      dmask at (b, i, j)'s broadcast position += dS[j].
// Keys with P[j] = 0 (excluded or padded) are skipped, so garbage (even
// NaN) in padded positions of q, k or v never reaches a gradient.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/backends/ref/RefKernels.h"
#include "lib/backends/ref/RefSdpaParams.h"
#include "mstep/core/Philox.h"

namespace mstep::ref {

namespace {

/// The backward's params: the shared ones and what it reads or writes more.
struct SdpaGradParams : SdpaParams {
  bool mask_grad = false, saved_probs = false;
};

template <typename T>
double load(const T* p, int64_t i) {
  return static_cast<double>(static_cast<Compute<T>>(p[i]));
}

template <typename T>
void store(T* p, int64_t i, double x) {
  p[i] = static_cast<T>(static_cast<Compute<T>>(x));
}

template <typename T>
absl::Status run_sdpa_grad(const KernelArgs& a, const SdpaGradParams& P) {
  const T* g = a.in(0).data<T>();
  const T* q = a.in(1).data<T>();
  const T* k = a.in(2).data<T>();
  const T* v = a.in(3).data<T>();
  size_t next_in = 4;
  const HostBuffer* mask = P.has_mask ? &a.in(next_in++) : nullptr;
  const HostBuffer* lens = P.has_len ? &a.in(next_in++) : nullptr;
  next_in += P.dropout; // the RNG state, read into P
  const T* saved = P.saved_probs ? a.in(next_in++).data<T>() : nullptr;
  T* dq = a.out(0).data<T>();
  T* dk = a.out(1).data<T>();
  T* dv = a.out(2).data<T>();

  Shape scores(a.in(1).type().shape.dims());  // [..., L, S]
  scores[scores.rank() - 1] = P.S;
  Shape::Dims mstrides;
  if (mask) mstrides = broadcast_strides(mask->type().shape, scores);
  const bool bool_mask = mask && mask->type().dtype == DType::boolean;
  const int64_t ms_row = mask ? mstrides[scores.rank() - 2] : 0;
  const int64_t ms_col = mask ? mstrides[scores.rank() - 1] : 0;
  // The mask gradient accumulates over every batch-head and position that
  // broadcasting mapped onto one mask element.
  std::vector<double> dmask(P.mask_grad ? mask->type().shape.numel() : 0, 0.0);

  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const double keep_scale = P.p < 1 ? 1.0 / (1.0 - P.p) : 0.0;
  std::vector<double> s(P.S), dp(P.S), dq_row(P.E);
  std::vector<double> dk_acc(P.S * P.E), dv_acc(P.S * P.Ev);

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
    std::fill(dk_acc.begin(), dk_acc.end(), 0.0);
    std::fill(dv_acc.begin(), dv_acc.end(), 0.0);
    for (int64_t i = 0; i < P.L; ++i) {
      const int64_t row = b * P.L + i;
      const T* qi = q + row * P.E;
      const T* gi = g + row * P.Ev;
      std::fill(dq_row.begin(), dq_row.end(), 0.0);
      // P: the forward's saved probabilities, or recomputed from the masked
      // scores (forward steps 2-3). `live` is false for a row with every key
      // excluded (step 1); a saved all-zero row skips every key below anyway.
      bool live = true;
      if (saved) {
        for (int64_t j = 0; j < P.S; ++j) s[j] = load(saved, row * P.S + j);
      } else {
        double m = kNegInf;
        const bool row_valid = i >= row_lo && i < row_hi;
        for (int64_t j = 0; j < P.S; ++j) {
          bool excluded = !row_valid || j < key_lo || j >= key_hi || (P.causal && j > i);
          double add = 0;
          if (mask && !excluded) {
            const int64_t mo = mbase + i * ms_row + j * ms_col;
            if (bool_mask)
              excluded = !mask->data<bool>()[mo];
            else
              add = load(mask->data<T>(), mo);
          }
          if (excluded) {
            s[j] = kNegInf;
            continue;
          }
          double dot = 0;
          for (int64_t e = 0; e < P.E; ++e) dot += load(qi, e) * load(k, (b * P.S + j) * P.E + e);
          s[j] = P.scale * dot + add;
          if (s[j] > m || std::isnan(s[j])) m = std::isnan(m) ? m : s[j];
        }
        live = m != kNegInf;
        if (live) {
          double sum = 0;
          for (int64_t j = 0; j < P.S; ++j) sum += s[j] = std::exp(s[j] - m);
          for (int64_t j = 0; j < P.S; ++j) s[j] /= sum;
        }
      }
      if (live) {
        // Steps 2-3; `d` is sum_k P[k] dP[k] for step 4.
        double d = 0;
        for (int64_t j = 0; j < P.S; ++j) {
          dp[j] = 0;
          if (s[j] == 0) continue;
          double factor = 1;
          if (P.dropout)
            factor = Philox::uniform(P.seed, P.offset, row * P.S + j) >= P.p ? keep_scale : 0.0;
          if (factor == 0) continue;  // dropped: no path from this key to out
          const int64_t vj = (b * P.S + j) * P.Ev;
          double gv = 0;
          for (int64_t e = 0; e < P.Ev; ++e) {
            const double ge = load(gi, e);
            gv += ge * load(v, vj + e);
            dv_acc[j * P.Ev + e] += s[j] * factor * ge;
          }
          dp[j] = gv * factor;
          d += s[j] * dp[j];
        }
        // Steps 4-5.
        for (int64_t j = 0; j < P.S; ++j) {
          if (s[j] == 0) continue;
          const double ds = s[j] * (dp[j] - d);
          if (P.mask_grad) dmask[mbase + i * ms_row + j * ms_col] += ds;
          const int64_t kj = (b * P.S + j) * P.E;
          for (int64_t e = 0; e < P.E; ++e) {
            dq_row[e] += P.scale * ds * load(k, kj + e);
            dk_acc[j * P.E + e] += P.scale * ds * load(qi, e);
          }
        }
      }
      for (int64_t e = 0; e < P.E; ++e) store(dq, row * P.E + e, dq_row[e]);
    }
    for (int64_t x = 0; x < P.S * P.E; ++x) store(dk, b * P.S * P.E + x, dk_acc[x]);
    for (int64_t x = 0; x < P.S * P.Ev; ++x) store(dv, b * P.S * P.Ev + x, dv_acc[x]);
  }
  if (P.mask_grad) {
    T* out = a.out(3).data<T>();
    for (size_t x = 0; x < dmask.size(); ++x) store(out, static_cast<int64_t>(x), dmask[x]);
  }
  return absl::OkStatus();
}

absl::Status sdpa_grad(const KernelArgs& a) {
  const AttrList& attrs = a.node.attrs;
  SdpaGradParams P;
  MSTEP_RETURN_IF_ERROR(read_sdpa_params(a, 1, "sdpa_grad", P));
  P.mask_grad = attr_int(attrs, AttrName::return_mask) != 0;
  P.saved_probs = attr_int(attrs, AttrName::recompute) == 0;
  if (P.mask_grad &&
      (!P.has_mask || a.in(4).type().dtype == DType::boolean || a.outputs.size() < 4))
    return absl::InternalError("sdpa_grad: a mask gradient needs a floating mask and 4 results");
  if (a.inputs.size() != size_t{4} + P.has_mask + P.has_len + P.dropout + P.saved_probs)
    return absl::InternalError("sdpa_grad: operand count disagrees with the attrs");
  return dispatch_floating(a.in(1).type().dtype,
                           [&]<typename T>() { return run_sdpa_grad<T>(a, P); });
}

}  // namespace

void register_attention_grad_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::sdpa_grad)] = sdpa_grad;
}

}  // namespace mstep::ref
