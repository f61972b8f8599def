// Records the `sdpa_grad` node (see AttentionGrad.h for its contract).
#include <string>
#include <vector>

#include "lib/api/AttentionGrad.h"
#include "lib/api/OpBuilder.h"

namespace mstep::detail {

namespace {

constexpr absl::string_view kOp = "scaled_dot_product_attention_backward";

/// Reports a broken internal invariant: the formula, not the user, passed
/// something the forward node could not have produced.
[[noreturn]] void throw_internal(absl::string_view problem, absl::string_view got) {
  throw_op_error(kOp, problem, got,
                 "This is a bug in mstep; please report it with the op and shapes.");
}

}  // namespace

SdpaGradResult record_sdpa_grad(const Tensor& grad_out, const std::vector<Tensor>& forward_inputs,
                                const AttrList& forward_attrs, bool mask_grad,
                                const Tensor& saved_probs) {
  const bool has_mask = attr_int(forward_attrs, AttrName::has_mask) != 0;
  const bool has_len = attr_int(forward_attrs, AttrName::has_valid_len) != 0;
  const bool has_rng = attr_int(forward_attrs, AttrName::offset) >= 0;
  const size_t expected = 3 + has_mask + has_len + has_rng;
  if (forward_inputs.size() != expected)
    throw_internal(absl::StrCat("expected ", expected, " forward operands"),
                   absl::StrCat(forward_inputs.size()));
  const Tensor &q = forward_inputs[0], &k = forward_inputs[1], &v = forward_inputs[2];
  Shape out_shape(q.shape().dims());
  out_shape[out_shape.rank() - 1] = v.size(-1);
  if (!grad_out.defined() || grad_out.shape() != out_shape || grad_out.dtype() != q.dtype())
    throw_internal(absl::StrCat("grad_out must be ", TensorType{out_shape, q.dtype()}.to_string()),
                   describe(grad_out));
  if (mask_grad && (!has_mask || !is_floating(forward_inputs[3].dtype())))
    throw_internal("a mask gradient needs a floating attn_mask",
                   has_mask ? describe(forward_inputs[3]) : "no mask");

  Shape scores(q.shape().dims());
  scores[scores.rank() - 1] = k.size(-2);
  const bool recompute = attr_int(forward_attrs, AttrName::recompute) != 0;
  if (recompute == saved_probs.defined() ||
      (!recompute && saved_probs.type() != TensorType{scores, q.dtype()}))
    throw_internal(absl::StrCat("recompute=", recompute, " needs ",
                                recompute ? "no saved probabilities"
                                          : TensorType{scores, q.dtype()}.to_string()),
                   describe(saved_probs));

  AttrList attrs;
  for (const Attr& a : forward_attrs) {
    if (a.name == AttrName::return_probs)
      attrs.push_back({a.name, int64_t{0}});
    else if (a.name == AttrName::return_mask)
      attrs.push_back({a.name, int64_t{mask_grad}});
    else
      attrs.push_back(a);
  }

  std::vector<Tensor> operands = {grad_out};
  operands.insert(operands.end(), forward_inputs.begin(), forward_inputs.end());
  if (!recompute) operands.push_back(saved_probs);
  ResultTypes types = {q.type(), k.type(), v.type()};
  if (mask_grad) types.push_back(forward_inputs[3].type());
  std::vector<Tensor> results =
      record_multi(kOp, OpKind::sdpa_grad, operands, std::move(attrs), std::move(types));
  SdpaGradResult r{results[0], results[1], results[2], Tensor()};
  if (mask_grad) r.dmask = results[3];
  return r;
}

}  // namespace mstep::detail
