// Reads an sdpa / sdpa_grad node into AttentionParams (see the header) and
// the per-run operands. The checks mirror the ref kernels' invariants: a
// node that fails them was not built by the attention API.
#include "lib/backends/cpu/FlashAttentionParams.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace mstep::cpu::flash {

namespace {

absl::Status node_error(const KernelRequest& request, absl::string_view problem) {
  const GraphNode& node = request.node();
  std::string operands;
  for (ValueRef v : node.operands)
    absl::StrAppend(&operands, operands.empty() ? "" : ", ", request.graph.type_of(v).to_string());
  return absl::InvalidArgumentError(
      absl::StrCat("cpu flash attention: node %", request.index, " (", op_name(node.op), ") ",
                   problem, "; operands (", operands,
                   "). The node disagrees with its attributes: it was not "
                   "built by the attention API (lib/api/AttentionOps.cpp); rebuild it there."));
}

/// The mask's strides (elements) read as if broadcast to `scores`; 0 along
/// broadcast dims and dims the mask lacks. Empty if it does not broadcast.
std::vector<int64_t> broadcast_strides(const Shape& mask, const Shape& scores) {
  const int64_t rank = scores.rank(), offset = rank - mask.rank();
  if (offset < 0) return {};
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (int64_t d = mask.rank() - 1; d >= 0; --d) {
    if (mask[d] != 1 && mask[d] != scores[d + offset]) return {};
    if (mask[d] != 1) strides[d + offset] = stride;
    stride *= mask[d];
  }
  return strides;
}

}  // namespace

absl::StatusOr<AttentionParams> read_attention_params(const KernelRequest& request) {
  const GraphNode& node = request.node();
  const AttrList& attrs = node.attrs;
  AttentionParams P;
  P.backward = node.op == OpKind::sdpa_grad;
  if (!P.backward && node.op != OpKind::sdpa)
    return node_error(request, "is not sdpa or sdpa_grad");
  int next = 0;
  if (P.backward) P.grad_out = next++;
  P.q = next++;
  P.k = next++;
  P.v = next++;
  const bool has_mask = attr_int(attrs, AttrName::has_mask) != 0;
  const bool has_len = attr_int(attrs, AttrName::has_valid_len) != 0;
  P.rng_offset = attr_int(attrs, AttrName::offset);
  P.dropout = P.rng_offset >= 0;  // -1: no RNG operand
  const bool recompute = attr_int(attrs, AttrName::recompute) != 0;
  if (has_mask) P.mask = next++;
  if (has_len) P.valid_len = next++;
  if (P.dropout) P.rng_state = next++;
  if (P.backward && !recompute) P.saved_probs_in = next++;
  if (node.operands.size() != static_cast<size_t>(next))
    return node_error(request, absl::StrCat("has ", node.operands.size(),
                                            " operands where its attributes ask for ", next));

  auto type = [&](int operand) -> const TensorType& {
    return request.graph.type_of(node.operands[operand]);
  };
  const TensorType &q = type(P.q), &k = type(P.k), &v = type(P.v);
  const int64_t r = q.shape.rank();
  if (r < 2 || k.shape.rank() != r || v.shape.rank() != r)
    return node_error(request, "needs q, k, v of one rank >= 2");
  if (k.dtype != q.dtype || v.dtype != q.dtype || !is_floating(q.dtype))
    return node_error(request, "needs floating q, k, v of one dtype");
  for (int64_t d = 0; d < r - 2; ++d) {
    if (k.shape[d] != q.shape[d] || v.shape[d] != q.shape[d])
      return node_error(request, "needs identical leading dims of q, k, v");
    P.batch *= q.shape[d];
    if (d > 0) P.rows_per_b0 *= q.shape[d];
  }
  P.dtype = q.dtype;
  P.L = q.shape[r - 2];
  P.E = q.shape[r - 1];
  P.S = k.shape[r - 2];
  P.Ev = v.shape[r - 1];
  if (k.shape[r - 1] != P.E || v.shape[r - 2] != P.S)
    return node_error(request, "needs q [..., L, E], k [..., S, E], v [..., S, Ev]");
  P.causal = attr_int(attrs, AttrName::is_causal) != 0;
  P.left_pad = attr_int(attrs, AttrName::padding_side) == 1;
  P.scale = attr_double(attrs, AttrName::scale);
  P.p = attr_double(attrs, AttrName::dropout_p);
  if (P.dropout && !(P.p >= 0 && P.p <= 1))
    return node_error(request, absl::StrCat("has dropout_p ", P.p, " outside [0, 1]"));

  Shape scores(q.shape.dims());
  scores[r - 1] = P.S;
  if (P.grad_out >= 0) {
    Shape out(q.shape.dims());
    out[r - 1] = P.Ev;
    if (type(P.grad_out) != TensorType{out, q.dtype})
      return node_error(request, "needs grad_out of out's type [..., L, Ev]");
  }
  if (has_mask) {
    const TensorType& mask = type(P.mask);
    P.bool_mask = mask.dtype == DType::boolean;
    if (!P.bool_mask && mask.dtype != q.dtype)
      return node_error(request, "needs a bool mask or one of q's dtype");
    const std::vector<int64_t> strides = broadcast_strides(mask.shape, scores);
    if (strides.empty()) return node_error(request, "has a mask that does not broadcast");
    P.mask_row_stride = strides[r - 2];
    P.mask_col_stride = strides[r - 1];
    P.mask_numel = mask.numel();
    P.mask_base.resize(P.batch);
    for (int64_t b = 0; b < P.batch; ++b) {
      int64_t rest = b, offset = 0;
      for (int64_t d = r - 3; d >= 0; --d) {
        offset += (rest % scores[d]) * strides[d];
        rest /= scores[d];
      }
      P.mask_base[b] = offset;
    }
    for (int64_t d = 0; d < r - 2; ++d)
      P.mask_shared_across_batch |= scores[d] > 1 && strides[d] == 0;
  }
  if (has_len) {
    const TensorType& len = type(P.valid_len);
    if (r < 3 || !is_integral(len.dtype) || len.shape != Shape{q.shape[0]})
      return node_error(request, "needs valid_seq_len i32/i64 [B] with q of rank >= 3");
    P.len_dtype = len.dtype;
  }
  if (P.dropout && type(P.rng_state) != TensorType{Shape{2}, DType::i64})
    return node_error(request, "needs an i64 [2] RNG state (seed, offset)");
  if (P.saved_probs_in >= 0 && type(P.saved_probs_in) != TensorType{scores, q.dtype})
    return node_error(request, "needs saved probabilities of q's dtype [..., L, S]");

  size_t results = 0;
  if (P.backward) {
    results = 3;
    if (attr_int(attrs, AttrName::return_mask) != 0) {
      if (!has_mask || P.bool_mask)
        return node_error(request, "asks for a mask gradient without a floating mask");
      P.dmask = static_cast<int>(results++);
    }
  } else {
    results = 1;
    if (attr_int(attrs, AttrName::return_probs) != 0) P.probs = static_cast<int>(results++);
    if (attr_int(attrs, AttrName::return_mask) != 0) P.dropout_mask = static_cast<int>(results++);
    if (!recompute) P.saved_probs_out = static_cast<int>(results++);
  }
  if (node.results.size() != results)
    return node_error(request, absl::StrCat("has ", node.results.size(),
                                            " results where its attributes ask for ", results));
  return P;
}

ValidRanges valid_ranges(const AttentionParams& P, const void* valid_len, int64_t b) {
  if (!valid_len) return {0, P.L, 0, P.S};
  const int64_t index = b / P.rows_per_b0;
  const int64_t len = P.len_dtype == DType::i32 ? static_cast<const int32_t*>(valid_len)[index]
                                                : static_cast<const int64_t*>(valid_len)[index];
  auto keep = [&](int64_t n, int64_t& lo, int64_t& hi) {
    const int64_t kept = std::clamp<int64_t>(len, 0, n);
    lo = P.left_pad ? n - kept : 0;
    hi = P.left_pad ? n : kept;
  };
  ValidRanges v;
  keep(P.L, v.row_lo, v.row_hi);
  keep(P.S, v.key_lo, v.key_hi);
  return v;
}

DropoutDraw read_dropout(const AttentionParams& P, const void* rng_state) {
  DropoutDraw d;
  if (!P.dropout) return d;
  const int64_t* state = static_cast<const int64_t*>(rng_state);
  d.seed = static_cast<uint64_t>(state[0]);
  d.offset = static_cast<uint64_t>(state[1]) + static_cast<uint64_t>(P.rng_offset);
  // uniform() is (word >> 8) * 2^-24, so uniform >= p iff (word >> 8) >=
  // ceil(p * 2^24); p * 2^24 is exact in double.
  d.threshold = static_cast<uint32_t>(std::ceil(P.p * 16777216.0));
  d.keep_scale = P.p < 1 ? static_cast<float>(1.0 / (1.0 - P.p)) : 0.0f;
  return d;
}

}  // namespace mstep::cpu::flash
