// Backward formulas: reductions. The gradient is broadcast back over the
// reduced dims (first restored as size-1 dims when keepdim was false).
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

/// `g` with the reduced dims of `ctx` restored as size-1 dims.
Tensor unsqueeze_reduced(const BackwardContext& c, const Tensor& g) {
  if (attr_int(c.attrs, AttrName::keepdim)) return g;
  Shape kept = c.input(0).shape();
  for (int64_t d : attr_ints(c.attrs, AttrName::dims)) kept[d] = 1;
  return reshape(g, kept.dims());
}

Grads sum_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!is_floating(x.dtype())) return {Tensor()};
  return {expand(unsqueeze_reduced(c, c.grad()), x.shape().dims())};
}

}  // namespace

void register_reduction_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::sum)] = sum_bw;
}

}  // namespace mstep::autograd
