// lower_attention: the sdpa node's options checked, its shape read, the
// forward program built.
#include "lib/backends/neuron/AttentionLowering.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

namespace {

/// The attn_mask's kind and its broadcast layout over the [..., L, S]
/// scores (AttentionShape::mask), from its type; `s` has the other fields.
absl::Status read_mask(const TensorType& mask, const Shape& q, AttentionShape& s) {
  const int64_t r = q.rank(), mr = mask.shape.rank();
  if (mask.dtype != DType::boolean && mask.dtype != s.dtype)
    return absl::UnimplementedError(
        absl::StrCat("attn_mask ", mask.to_string(), " is neither bool nor q's dtype"));
  // Broadcast strides, right-aligned: 0 where the mask's dim is 1 or absent.
  std::vector<int64_t> stride(r, 0);
  int64_t inner = 1;
  for (int64_t i = 1; i <= mr; ++i) {
    const int64_t m = mask.shape[mr - i], full = i > r ? 0 : i == 1 ? s.kv_len : q[r - i];
    if (i > r || (m != 1 && m != full))
      return absl::UnimplementedError(absl::StrCat("attn_mask ", mask.to_string(),
                                                   " does not broadcast to the scores of q ",
                                                   q.to_string()));
    stride[r - i] = m == 1 ? 0 : inner;
    inner *= m;
  }
  s.mask =
      mask.dtype == DType::boolean ? AttentionShape::Mask::boolean : AttentionShape::Mask::additive;
  s.mask_dtype = mask.dtype;
  s.mask_elements = mask.numel();
  s.mask_row_stride = stride[r - 2];
  s.mask_col_stride = stride[r - 1];
  s.mask_head_offset.assign(s.batch, 0);
  for (int64_t h = 0; h < s.batch; ++h)
    for (int64_t d = r - 3, rest = h; d >= 0; rest /= q[d], --d)
      s.mask_head_offset[h] += (rest % q[d]) * stride[d];
  return absl::OkStatus();
}

/// s.heads from `strided` (AttentionHeadStrides): H = the flagged
/// tensor's dim -3, which must be q's (the batch-heads b H + j).
absl::Status read_head_strides(const AttentionHeadStrides& strided,
                               absl::Span<const TensorType> types,
                               absl::Span<const TensorType> results, size_t first,
                               AttentionShape& s) {
  const Shape& q = types[first].shape;
  const int64_t r = q.rank();
  auto heads = [&](const std::vector<bool>& flags, size_t i, const Shape& t,
                   int64_t& field) -> absl::Status {
    if (i >= flags.size() || !flags[i]) return absl::OkStatus();
    if (r < 3 || t.rank() != r || t[r - 3] != q[r - 3])
      return absl::UnimplementedError(absl::StrCat("heads-strided ", t.to_string(), " has not q ",
                                                   q.to_string(), "'s heads (dim -3)"));
    field = t[r - 3];
    return absl::OkStatus();
  };
  for (size_t o = first + 3; o < strided.operands.size(); ++o)
    if (strided.operands[o])
      return absl::UnimplementedError("only q, k, v and grad_out can be read heads-strided");
  AttentionShape::HeadStrides& h = s.heads;
  int64_t* operand_field[] = {&h.grad_out, &h.q, &h.k, &h.v};
  for (size_t o = 0; o < first + 3; ++o)
    MSTEP_RETURN_IF_ERROR(
        heads(strided.operands, o, types[o].shape, *operand_field[o + 1 - first]));
  int64_t* result_field[] = {first ? &h.dq : &h.out, &h.dk, &h.dv};
  for (size_t i = 0; i < results.size(); ++i)
    MSTEP_RETURN_IF_ERROR(heads(strided.results, i, results[i].shape, *result_field[i]));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<LoweredOp> lower_attention_at_head_strides(const GraphNode& node,
                                                          absl::Span<const TensorType> types,
                                                          const AttentionHeadStrides& strided) {
  MSTEP_ASSIGN_OR_RETURN(LoweredOp out, lower_attention(node, types, strided));
  MSTEP_ASSIGN_OR_RETURN(out.cost, estimate_cost(out.program));
  return out;
}

absl::StatusOr<LoweredOp> lower_attention(const GraphNode& node, absl::Span<const TensorType> types,
                                          const AttentionHeadStrides& strided) {
  auto refuse = [&](absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat("neuron lowering: ", op_name(node.op), " not tiled: ", why));
  };
  const bool backward = node.op == OpKind::sdpa_grad;
  if (!backward && node.op != OpKind::sdpa) return refuse("not an attention op");
  const AttrList& attrs = node.attrs;
  const bool has_mask = attr_int_or(attrs, AttrName::has_mask, 0) != 0;
  // sdpa_grad's return_mask asks for the float mask's gradient (dmask).
  if (backward && attr_int_or(attrs, AttrName::return_mask, 0) != 0)
    return refuse("the attn_mask gradient (an [..., L, S] result)");
  if (attr_int_or(attrs, AttrName::return_probs, 0) != 0 ||
      attr_int_or(attrs, AttrName::return_mask, 0) != 0)
    return refuse("returned probabilities or dropout mask (an [..., L, S] result)");
  if (attr_int_or(attrs, AttrName::recompute, 1) == 0 || node.results.size() != (backward ? 3 : 1))
    return refuse("probabilities saved for the backward (recompute = 0)");
  // The backward's operands: grad_out, then the forward's q, k, v [,
  // attn_mask] [, valid_seq_len] [, the RNG state (dropout)].
  const size_t first = backward ? 1 : 0;
  const bool has_len = attr_int_or(attrs, AttrName::has_valid_len, 0) != 0;
  const int64_t offset = attr_int_or(attrs, AttrName::offset, -1);
  const bool has_rng = offset >= 0; // -1: no RNG operand (dropout_p == 0)
  if (types.size() != first + 3 + has_mask + has_len + has_rng)
    return refuse("operands other than q, k, v, attn_mask, valid_seq_len, RNG state");
  const size_t len_at = first + 3 + has_mask, rng_at = len_at + has_len;
  const TensorType &q = types[first], &k = types[first + 1], &v = types[first + 2];
  const int64_t r = q.shape.rank();
  if (r < 2 || k.shape.rank() != r || v.shape.rank() != r || q.dtype != k.dtype ||
      q.dtype != v.dtype || node.results[0].dtype != q.dtype)
    return refuse(absl::StrCat("q ", q.to_string(), ", k ", k.to_string(), ", v ", v.to_string(),
                               ": not one dtype and rank"));
  AttentionShape s;
  for (int64_t d = 0; d < r - 2; ++d) s.batch *= q.shape[d];
  s.q_len = q.shape[r - 2];
  s.head_dim = q.shape[r - 1];
  s.kv_len = k.shape[r - 2];
  s.value_dim = v.shape[r - 1];
  s.dtype = q.dtype;
  s.scale = static_cast<float>(attr_double(attrs, AttrName::scale));
  s.causal = attr_int_or(attrs, AttrName::is_causal, 0) != 0;
  if (has_len) {
    const TensorType& len = types[len_at];
    if ((len.dtype != DType::i32 && len.dtype != DType::i64) || len.shape.rank() != 1 || r < 3 ||
        len.shape[0] != q.shape[0])
      return refuse(absl::StrCat("valid_seq_len ", len.to_string(), " is not i32 or i64 [",
                                 r < 3 ? int64_t{0} : q.shape[0], "] for q ", q.to_string()));
    s.lengths = len.shape[0];
    s.lengths_i64 = len.dtype == DType::i64;
    s.left_padding = attr_int_or(attrs, AttrName::padding_side, 0) == 1;
  }
  if (has_mask) {
    if (absl::Status ok = read_mask(types[first + 3], q.shape, s); !ok.ok())
      return refuse(ok.message());
  }
  if (has_rng) {
    if (types[rng_at].dtype != DType::i64 || types[rng_at].numel() != 2)
      return refuse(absl::StrCat("RNG state ", types[rng_at].to_string(), " is not i64 [2]"));
    // p = 0 keeps every probability (u >= 0): the program without dropout.
    s.dropout_p = attr_double(attrs, AttrName::dropout_p);
    s.dropout = s.dropout_p != 0;
    s.dropout_offset = offset;
  }
  Shape out_shape = q.shape; // [..., L, Ev]
  out_shape[r - 1] = s.value_dim;
  if (backward && (types[0] != TensorType{out_shape, q.dtype} || node.results[1].dtype != q.dtype ||
                   node.results[2].dtype != q.dtype))
    return refuse(absl::StrCat("grad_out ", types[0].to_string(), " does not match the output"));
  if (absl::Status ok = read_head_strides(strided, types, node.results, first, s); !ok.ok())
    return refuse(ok.message());
  if (absl::Status ok = backward ? attention_backward_tileable(s) : attention_tileable(s); !ok.ok())
    return refuse(ok.message());
  LoweredOp out;
  if (backward) {
    out.program = attention_backward_program(s);
    out.hbm_binding = {0, 1, 2, 3, -1, -2, -3};
  } else {
    out.program = attention_forward_program(s);
    out.hbm_binding = {0, 1, 2, -1};
  }
  // The lengths (int64 as int32 word pairs: the same bytes), then the mask,
  // then the RNG state (int64 [2] as int32 [4]).
  if (has_len) out.hbm_binding.push_back(static_cast<int32_t>(len_at));
  if (has_mask) out.hbm_binding.push_back(static_cast<int32_t>(first + 3));
  if (s.dropout) out.hbm_binding.push_back(static_cast<int32_t>(rng_at));
  return out;
}

} // namespace mstep::neuron
