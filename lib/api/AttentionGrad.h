// The backward primitive of scaled dot-product attention (`sdpa_grad`).
// Library-internal: only the attention backward formula records it.
//
//   operands  grad_out, q, k, v [, mask] [, valid_len] [, rng_state]
//             [, saved probs]
//   attrs     the forward node's attrs, except that return_probs is 0 and
//             return_mask asks for the attn_mask's gradient (below)
//   results   dq, dk, dv [, dmask]
// With recompute = 1 the kernel recomputes the probabilities from q and k
// (FlashAttention style), so the forward saves no [..., L, S] tensor. With
// recompute = 0 the last operand is the forward's saved pre-dropout
// probabilities (its hidden last result), read instead. Either way, with
// dropout the kernel regenerates the keep mask from the saved RNG state
// and the forward's offset, so the gradient is exact. With return_mask = 1
// (a floating mask only) a fourth result is the mask's gradient: the
// gradient of the scores summed over the dims the mask was broadcast
// along, with the mask's own shape and dtype.
#pragma once

#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/ir/Attr.h"

namespace mstep::detail {

struct SdpaGradResult {
  Tensor dq, dk, dv;
  Tensor dmask;  // defined only when asked for
};

/// Records `sdpa_grad` for a forward `sdpa` node with operands
/// `forward_inputs` and attrs `forward_attrs`, given the gradient of its
/// `out`. `mask_grad` also asks for the float attn_mask's gradient.
/// `saved_probs` is the forward's saved-probabilities result when its
/// recompute attr is 0, and undefined otherwise.
SdpaGradResult record_sdpa_grad(const Tensor& grad_out, const std::vector<Tensor>& forward_inputs,
                                const AttrList& forward_attrs, bool mask_grad,
                                const Tensor& saved_probs);

}  // namespace mstep::detail
