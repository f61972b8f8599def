// lower_attention: the sdpa node's options checked, its shape read, the
// forward program built.
#include "lib/backends/neuron/AttentionLowering.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionProgram.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_attention(const GraphNode& node,
                                          absl::Span<const TensorType> types) {
  auto refuse = [&](absl::string_view why) {
    return absl::UnimplementedError(
        absl::StrCat("neuron lowering: ", op_name(node.op), " not tiled: ", why));
  };
  const bool backward = node.op == OpKind::sdpa_grad;
  if (!backward && node.op != OpKind::sdpa) return refuse("not an attention op");
  const AttrList& attrs = node.attrs;
  if (attr_int_or(attrs, AttrName::has_mask, 0) != 0) return refuse("an attention mask");
  if (attr_int_or(attrs, AttrName::offset, -1) >= 0) return refuse("dropout");
  if (attr_int_or(attrs, AttrName::return_probs, 0) != 0 ||
      attr_int_or(attrs, AttrName::return_mask, 0) != 0)
    return refuse("returned probabilities or dropout mask");
  if (attr_int_or(attrs, AttrName::recompute, 1) == 0 || node.results.size() != (backward ? 3 : 1))
    return refuse("probabilities saved for the backward (recompute = 0)");
  // The backward's operands: grad_out, then the forward's q, k, v [,
  // valid_seq_len].
  const size_t first = backward ? 1 : 0;
  const bool has_len = attr_int_or(attrs, AttrName::has_valid_len, 0) != 0;
  if (types.size() != first + 3 + has_len) return refuse("operands other than q, k, v");
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
    const TensorType& len = types[first + 3];
    if ((len.dtype != DType::i32 && len.dtype != DType::i64) || len.shape.rank() != 1 || r < 3 ||
        len.shape[0] != q.shape[0])
      return refuse(absl::StrCat("valid_seq_len ", len.to_string(), " is not i32 or i64 [",
                                 r < 3 ? int64_t{0} : q.shape[0], "] for q ", q.to_string()));
    s.lengths = len.shape[0];
    s.lengths_i64 = len.dtype == DType::i64;
    s.left_padding = attr_int_or(attrs, AttrName::padding_side, 0) == 1;
  }
  Shape out_shape = q.shape; // [..., L, Ev]
  out_shape[r - 1] = s.value_dim;
  if (backward && (types[0] != TensorType{out_shape, q.dtype} || node.results[1].dtype != q.dtype ||
                   node.results[2].dtype != q.dtype))
    return refuse(absl::StrCat("grad_out ", types[0].to_string(), " does not match the output"));
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
  // The lengths, the programs' last HBM tensor (int64 as int32 word pairs: the same bytes).
  if (has_len) out.hbm_binding.push_back(static_cast<int32_t>(first + 3));
  return out;
}

} // namespace mstep::neuron
