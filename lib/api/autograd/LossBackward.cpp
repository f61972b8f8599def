// Backward formulas: loss primitives (nll_loss). The composite losses
// (cross_entropy, mse_loss, binary_cross_entropy_with_logits) get their
// gradients through the ops they are built from.
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

Grads nll_loss_bw(const BackwardContext& c) {
  // d loss_i / d log_probs[i, j] = -1 where j = target[i] and the target is
  // not ignored, else 0; the mean divides by the count of kept targets. The
  // count can be 0 (every target ignored): the where() keeps the resulting
  // inf/NaN out of the gradient, which is then all zeros (PyTorch). The
  // target (input 1, integer) gets no gradient.
  const Tensor& log_probs = c.input(0);
  const Tensor& target = c.input(1);  // [N] (or 0-d for [C] log_probs), i64
  const int64_t reduction = attr_int(c.attrs, AttrName::reduction);  // 0 none, 1 mean, 2 sum
  const int64_t classes = log_probs.size(-1);
  const DType dtype = log_probs.dtype();

  Tensor keep = ne(target, attr_int(c.attrs, AttrName::ignore_index));
  Tensor row_grad = neg(c.grad());  // [N] for none, 0-d otherwise
  if (reduction == 1) row_grad = row_grad / to(sum(keep), dtype);
  Tensor classes_range = arange(classes, DType::i64, log_probs.device());
  Tensor hit = logical_and(eq(classes_range, unsqueeze(target, -1)), unsqueeze(keep, -1));
  Tensor per_row = row_grad.dim() == 0 ? row_grad : unsqueeze(row_grad, -1);
  return {where(hit, expand(per_row, log_probs.shape().dims()), 0.0), Tensor()};
}

}  // namespace

void register_loss_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::nll_loss)] = nll_loss_bw;
}

}  // namespace mstep::autograd
