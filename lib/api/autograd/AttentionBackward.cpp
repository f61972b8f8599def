// Backward formulas: attention ops. `sdpa` is differentiated by one
// `sdpa_grad` node (lib/api/AttentionGrad.h), which regenerates the dropout
// mask from the saved RNG state and, in recompute mode (the default), also
// recomputes the probabilities, so the forward keeps nothing but its inputs
// and `out`. With recompute = 0 it reads the forward's hidden last result,
// the saved pre-dropout probabilities, instead.
//
// Gradients flow to q, k, v and to a floating attn_mask that requires
// grad (the scores' gradient summed to the mask's broadcast shape).
// valid_seq_len, a bool mask and the RNG state get none. The extra outputs
// of fused_sdpa (probabilities, dropout mask) are not differentiated.
#include "absl/strings/str_cat.h"
#include "lib/api/AttentionGrad.h"
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

Grads sdpa_bw(const BackwardContext& c) {
  // Outputs after `out` are the probabilities and the (bool) dropout mask
  // (and the hidden saved probabilities, never handed to the user).
  // Differentiating the probabilities would need the score gradient from a
  // second source; the fused kernel does not take one.
  for (size_t i = 1; i < c.grads.size(); ++i)
    if (c.grads[i].defined())
      throw Error(absl::UnimplementedError(absl::StrCat(
          "mstep::backward: fused_sdpa's attention probabilities (return_attn_probs) are not "
          "differentiable; only `out` is. Got a gradient for output ",
          i, " (", c.output(i).type().to_string(),
          "). Use attn_probs.detach() in the loss, or compute attention from matmul and "
          "softmax if you need gradients through the probabilities.")));
  const Tensor& g = c.grads[0];
  if (!g.defined()) return {};  // out unused: every gradient is zero
  const bool has_mask = attr_int(c.attrs, AttrName::has_mask) != 0;
  const bool mask_grad = has_mask && c.needs_grad(3) && is_floating(c.input(3).dtype());
  if (!c.needs_grad(0) && !c.needs_grad(1) && !c.needs_grad(2) && !mask_grad) return {};
  const bool recompute = attr_int(c.attrs, AttrName::recompute) != 0;
  const Tensor saved_probs = recompute ? Tensor() : c.outputs.back();
  detail::SdpaGradResult r = detail::record_sdpa_grad(g, c.inputs, c.attrs, mask_grad, saved_probs);
  Grads out(c.inputs.size());
  if (c.needs_grad(0)) out[0] = r.dq;
  if (c.needs_grad(1)) out[1] = r.dk;
  if (c.needs_grad(2)) out[2] = r.dv;
  if (mask_grad) out[3] = r.dmask;
  return out;
}

}  // namespace

void register_attention_formulas(FormulaTable& t) { t[static_cast<int>(OpKind::sdpa)] = sdpa_bw; }

}  // namespace mstep::autograd
