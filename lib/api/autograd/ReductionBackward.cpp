// Backward formulas: reductions. The gradient is broadcast back over the
// reduced dims (first restored as size-1 dims when keepdim was false).
// Formulas follow PyTorch's derivatives.yaml, including its tie rule for
// max/min (amax/amin: the gradient is split evenly among tied extrema).
#include <algorithm>

#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

/// `g` (a reduction's output or its gradient) with the reduced dims of
/// `c` restored as size-1 dims.
Tensor unsqueeze_reduced(const BackwardContext& c, const Tensor& g) {
  if (attr_int(c.attrs, AttrName::keepdim)) return g;
  Shape kept = c.input(0).shape();
  for (int64_t d : attr_ints(c.attrs, AttrName::dims)) kept[d] = 1;
  return reshape(g, kept.dims());
}

/// `g` broadcast back to the input's shape.
Tensor expand_reduced(const BackwardContext& c, const Tensor& g) {
  return expand(unsqueeze_reduced(c, g), c.input(0).shape().dims());
}

/// How many input elements fold into each output element.
int64_t reduced_count(const BackwardContext& c) {
  int64_t n = 1;
  for (int64_t d : attr_ints(c.attrs, AttrName::dims)) n *= c.input(0).shape()[d];
  return n;
}

Grads sum_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!is_floating(x.dtype())) return {Tensor()};
  return {expand_reduced(c, c.grad())};
}

Grads mean_bw(const BackwardContext& c) {
  // An empty reduction leaves an empty input gradient: no division by 0
  // ever reaches an element.
  const double n = static_cast<double>(std::max<int64_t>(reduced_count(c), 1));
  return {expand_reduced(c, c.grad()) / n};
}

/// max/min: the gradient goes to every element equal to the result, split
/// evenly among ties. As PyTorch, grad / count * mask: a NaN result (no
/// element compares equal) gives NaN gradients rather than silent zeros.
Grads extremum_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!is_floating(x.dtype())) return {Tensor()};
  IntList dims = attr_ints(c.attrs, AttrName::dims);
  Tensor mask = to(eq(x, expand_reduced(c, c.output())), x.dtype());
  Tensor count = sum(mask, dims, /*keepdim=*/true);
  return {expand(unsqueeze_reduced(c, c.grad()) / count, x.shape().dims()) * mask};
}

Grads logsumexp_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  return {expand_reduced(c, c.grad()) * exp(x - expand_reduced(c, c.output()))};
}

Grads var_bw(const BackwardContext& c) {
  // d var / dx = 2 (x - mean) / (N - correction), the divisor clamped at 0
  // as in the forward.
  const Tensor& x = c.input(0);
  IntList dims = attr_ints(c.attrs, AttrName::dims);
  const int64_t divisor =
      std::max<int64_t>(reduced_count(c) - attr_int(c.attrs, AttrName::correction), 0);
  Tensor centered = x - mean(x, dims, /*keepdim=*/true);
  return {expand_reduced(c, c.grad()) * centered * (2.0 / static_cast<double>(divisor))};
}

}  // namespace

void register_reduction_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::sum)] = sum_bw;
  t[static_cast<int>(OpKind::mean)] = mean_bw;
  t[static_cast<int>(OpKind::max)] = extremum_bw;
  t[static_cast<int>(OpKind::min)] = extremum_bw;
  t[static_cast<int>(OpKind::logsumexp)] = logsumexp_bw;
  t[static_cast<int>(OpKind::var)] = var_bw;
}

}  // namespace mstep::autograd
