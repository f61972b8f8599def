// Backward formulas: softmax, log_softmax, layer_norm, rms_norm, dropout.
// The norms recompute their row statistics (cheaper than saving them, and
// the forward node has one output); in f16/bf16 they do it in f32, since
// the forward kernel accumulates in higher precision too.
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

Grads softmax_bw(const BackwardContext& c) {
  // dx = y * (g - sum(g * y)) along dim.
  const int64_t dim = attr_int(c.attrs, AttrName::dim);
  const Tensor& y = c.output();
  Tensor g = c.grad();
  return {y * (g - sum(g * y, {dim}, /*keepdim=*/true))};
}

Grads log_softmax_bw(const BackwardContext& c) {
  // dx = g - softmax(x) * sum(g) along dim; softmax(x) = exp(y).
  const int64_t dim = attr_int(c.attrs, AttrName::dim);
  Tensor g = c.grad();
  return {g - exp(c.output()) * sum(g, {dim}, /*keepdim=*/true)};
}

/// What both norm backwards start from: the input's dtype (the gradients'
/// too), the dtype they compute in (`acc`), the trailing normalized_ndim
/// dims (`norm`) and the leading ones (`batch`), and the input and the
/// output gradient converted to `acc`.
struct NormInputs {
  DType dtype, acc;
  IntList norm, batch;
  Tensor x, g;
};

NormInputs norm_inputs(const BackwardContext& c) {
  NormInputs n;
  n.dtype = c.input(0).dtype();
  n.acc = n.dtype == DType::f16 || n.dtype == DType::bf16 ? DType::f32 : n.dtype;
  const int64_t rank = c.input(0).dim();
  const int64_t normalized_ndim = attr_int(c.attrs, AttrName::normalized_ndim);
  for (int64_t d = 0; d < rank; ++d) (d < rank - normalized_ndim ? n.batch : n.norm).push_back(d);
  n.x = to(c.input(0), n.acc);
  n.g = to(c.grad(), n.acc);
  return n;
}

/// The gradient of an affine parameter of shape normalized_shape: `g`
/// summed over the batch dims.
Tensor sum_batch(const Tensor& g, const IntList& batch, DType dtype) {
  return to(batch.empty() ? g : sum(g, batch), dtype);
}

Grads layer_norm_bw(const BackwardContext& c) {
  // With xhat = (x - mean) * rstd and dxhat = g * weight, over each row:
  //   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
  //   dweight = sum over rows of g * xhat, dbias = sum over rows of g.
  const bool has_weight = attr_int(c.attrs, AttrName::has_weight) != 0;
  const bool has_bias = attr_int(c.attrs, AttrName::has_bias) != 0;
  const double eps = attr_double(c.attrs, AttrName::eps);
  const auto [dtype, acc, norm, batch, x, g] = norm_inputs(c);
  Tensor centered = x - mean(x, norm, /*keepdim=*/true);
  Tensor rstd = rsqrt(mean(centered * centered, norm, /*keepdim=*/true) + eps);
  Tensor xhat = centered * rstd;

  Grads out(c.inputs.size());
  const size_t weight_nr = 1, bias_nr = has_weight ? 2 : 1;
  if (c.needs_grad(0)) {
    Tensor dxhat = has_weight ? g * to(c.input(weight_nr), acc) : g;
    Tensor dx = rstd * (dxhat - mean(dxhat, norm, /*keepdim=*/true) -
                        xhat * mean(dxhat * xhat, norm, /*keepdim=*/true));
    out[0] = to(dx, dtype);
  }
  if (has_weight && c.needs_grad(weight_nr)) out[weight_nr] = sum_batch(g * xhat, batch, dtype);
  if (has_bias && c.needs_grad(bias_nr)) out[bias_nr] = sum_batch(g, batch, dtype);
  return out;
}

Grads rms_norm_bw(const BackwardContext& c) {
  // With r = rsqrt(mean(x^2) + eps), xhat = x * r and dxhat = g * weight:
  //   dx = r * (dxhat - xhat * mean(dxhat * xhat)), dweight = sum g * xhat.
  const bool has_weight = attr_int(c.attrs, AttrName::has_weight) != 0;
  const double eps = attr_double(c.attrs, AttrName::eps);
  const auto [dtype, acc, norm, batch, x, g] = norm_inputs(c);
  Tensor r = rsqrt(mean(x * x, norm, /*keepdim=*/true) + eps);
  Tensor xhat = x * r;

  Grads out(c.inputs.size());
  if (c.needs_grad(0)) {
    Tensor dxhat = has_weight ? g * to(c.input(1), acc) : g;
    out[0] = to(r * (dxhat - xhat * mean(dxhat * xhat, norm, /*keepdim=*/true)), dtype);
  }
  if (has_weight && c.needs_grad(1)) out[1] = sum_batch(g * xhat, batch, dtype);
  return out;
}

Grads dropout_bw(const BackwardContext& c) {
  // The same node on the gradient, reading the same RNG state and offset,
  // draws the same mask: dropout(g) = g * mask / (1 - p) exactly. The RNG
  // state (input 1) gets no gradient.
  Tensor g = c.grad();
  AttrList attrs;
  attrs.push_back({AttrName::p, attr_double(c.attrs, AttrName::p)});
  attrs.push_back({AttrName::offset, attr_int(c.attrs, AttrName::offset)});
  return {detail::record("dropout", OpKind::dropout, {g, c.input(1)}, std::move(attrs), g.type()),
          Tensor()};
}

}  // namespace

void register_nn_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::softmax)] = softmax_bw;
  t[static_cast<int>(OpKind::log_softmax)] = log_softmax_bw;
  t[static_cast<int>(OpKind::layer_norm)] = layer_norm_bw;
  t[static_cast<int>(OpKind::rms_norm)] = rms_norm_bw;
  t[static_cast<int>(OpKind::dropout)] = dropout_bw;
}

}  // namespace mstep::autograd
