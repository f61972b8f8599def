// What the ref kernels for `sdpa` and `sdpa_grad` read alike from a node:
// the batch and matrix sizes, the exclusion rules, the scale and the
// dropout's Philox seed and offset; and the two index helpers that must
// agree between the forward and the backward (RefAttention.cpp,
// RefAttentionGrad.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::ref {

/// The node's static description, read once from the attributes.
struct SdpaParams {
  int64_t batch = 1;        // product of the leading dims
  int64_t rows_per_b0 = 1;  // flat batch-heads per index of dim 0
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  bool causal = false, has_mask = false, has_len = false, left_pad = false;
  double scale = 1, p = 0;
  bool dropout = false;
  uint64_t seed = 0, offset = 0;
};

/// Reads the params of an sdpa node (`q_input` 0) or an sdpa_grad node (1,
/// after grad_out): q, k and v are inputs q_input..q_input+2, then the
/// mask and the valid lengths when present, then the RNG state when the
/// node has dropout (its offset attribute is not -1).
inline absl::Status read_sdpa_params(const KernelArgs& a, size_t q_input, const char* op,
                                     SdpaParams& P) {
  const AttrList& attrs = a.node.attrs;
  const Shape& qs = a.in(q_input).type().shape;
  const int64_t r = qs.rank();
  for (int64_t d = 0; d < r - 2; ++d) P.batch *= qs[d];
  for (int64_t d = 1; d < r - 2; ++d) P.rows_per_b0 *= qs[d];
  P.L = qs[r - 2];
  P.E = qs[r - 1];
  P.S = a.in(q_input + 1).type().shape[r - 2];
  P.Ev = a.in(q_input + 2).type().shape[r - 1];
  P.causal = attr_int(attrs, AttrName::is_causal) != 0;
  P.scale = attr_double(attrs, AttrName::scale);
  P.p = attr_double(attrs, AttrName::dropout_p);
  P.has_mask = attr_int(attrs, AttrName::has_mask) != 0;
  P.has_len = attr_int(attrs, AttrName::has_valid_len) != 0;
  P.left_pad = attr_int(attrs, AttrName::padding_side) == 1;
  const int64_t offset = attr_int(attrs, AttrName::offset);
  P.dropout = offset >= 0;  // -1: no RNG operand (dropout_p == 0)
  if (P.dropout) {
    const size_t rng = q_input + 3 + P.has_mask + P.has_len;
    if (a.inputs.size() <= rng)
      return absl::InternalError(absl::StrCat(op, ": dropout without an RNG state operand"));
    const int64_t* state = a.in(rng).data<int64_t>();
    P.seed = static_cast<uint64_t>(state[0]);
    P.offset = static_cast<uint64_t>(state[1]) + static_cast<uint64_t>(offset);
  }
  return absl::OkStatus();
}

/// Clamps a runtime valid length to [0, n] and returns the kept range.
inline void valid_range(int64_t len, int64_t n, bool left, int64_t& lo, int64_t& hi) {
  len = len < 0 ? 0 : len > n ? n : len;
  lo = left ? n - len : 0;
  hi = left ? n : len;
}

/// Offset of the mask element for batch-head b (row 0, column 0), with
/// `strides` the mask's broadcast strides over [..., L, S].
inline int64_t mask_base(const Shape& scores, const Shape::Dims& strides, int64_t b) {
  int64_t off = 0;
  for (int64_t d = scores.rank() - 3; d >= 0; --d) {
    off += (b % scores[d]) * strides[d];
    b /= scores[d];
  }
  return off;
}

}  // namespace mstep::ref
