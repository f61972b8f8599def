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
  if (node.op == OpKind::sdpa_grad)
    return refuse("the attention backward is not tiled yet (it runs on the host)");
  if (node.op != OpKind::sdpa) return refuse("not an attention forward");
  const AttrList& attrs = node.attrs;
  if (attr_int_or(attrs, AttrName::has_mask, 0) != 0) return refuse("an attention mask");
  if (attr_int_or(attrs, AttrName::has_valid_len, 0) != 0) return refuse("valid_seq_len");
  if (attr_int_or(attrs, AttrName::offset, -1) >= 0) return refuse("dropout");
  if (attr_int_or(attrs, AttrName::return_probs, 0) != 0 ||
      attr_int_or(attrs, AttrName::return_mask, 0) != 0)
    return refuse("returned probabilities or dropout mask");
  if (attr_int_or(attrs, AttrName::recompute, 1) == 0 || node.results.size() != 1)
    return refuse("probabilities saved for the backward (recompute = 0)");
  if (types.size() != 3) return refuse("operands other than q, k, v");
  const TensorType &q = types[0], &k = types[1], &v = types[2];
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
  if (absl::Status ok = attention_tileable(s); !ok.ok()) return refuse(ok.message());
  LoweredOp out;
  out.program = attention_forward_program(s);
  out.hbm_binding = {0, 1, 2, -1};
  return out;
}

} // namespace mstep::neuron
