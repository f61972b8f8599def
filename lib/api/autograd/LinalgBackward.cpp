// Backward formulas: matmul, conv2d and the 2-D pools, and the cheap
// ones of the conv2d / avg_pool2d gradient primitives (LinalgGrad.h).
//
// The graph ops see rank >= 2 matmul operands and 4-D NCHW conv/pool
// inputs; the API's reshapes around them (1-D matmul operands, unbatched
// conv/pool inputs) carry their own gradients.
#include "lib/api/LinalgGrad.h"
#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

Tensor transpose_last(const Tensor& t) { return transpose(t, -2, -1); }

/// Gradient of a rank-2 operand of a product whose result `g` has batch
/// dims. Folding the batch into the contracted dim gives one matmul of the
/// final size, instead of one [k, p] product per batch entry summed after
/// (what matmul + sum_to would materialize for linear's weight).
///   other_on_left:  grad = sum_batch other^T @ g   ([k, p], other [.., n, k])
///   otherwise:      grad = sum_batch g @ other^T   ([n, k], other [.., k, p])
Tensor folded_rank2_grad(const Tensor& g, const Tensor& other, bool other_on_left) {
  // With one operand of rank 2, g's batch dims are exactly the other's.
  int64_t batch_size = 1;
  for (int64_t d = 0; d < g.dim() - 2; ++d) batch_size *= g.size(d);
  if (other_on_left) {  // [B * n, k]^T @ [B * n, p]
    const int64_t rows = batch_size * g.size(-2);
    return matmul(transpose(reshape(other, {rows, other.size(-1)}), 0, 1),
                  reshape(g, {rows, g.size(-1)}));
  }
  // [n, B * p] @ [B * p, k]: move g's row dim in front of the batch.
  const int64_t rank = g.dim();
  std::vector<int64_t> perm = {rank - 2};
  for (int64_t d = 0; d < rank - 2; ++d) perm.push_back(d);
  perm.push_back(rank - 1);
  const int64_t cols = batch_size * g.size(-1);
  return matmul(reshape(permute(g, perm), {g.size(-2), cols}),
                reshape(transpose_last(other), {cols, other.size(-2)}));
}

/// out = a @ b with a [.., n, k], b [.., k, p]: grad_a = g @ b^T and
/// grad_b = a^T @ g, each summed over the batch dims its operand was
/// broadcast along.
Grads matmul_bw(const BackwardContext& c) {
  const Tensor &a = c.input(0), &b = c.input(1);
  if (!is_floating(a.dtype())) return {Tensor(), Tensor()};
  Tensor g = c.grad();
  const bool batched = g.dim() > 2;
  Grads out(2);
  if (c.needs_grad(0))
    out[0] = batched && a.dim() == 2 ? folded_rank2_grad(g, b, /*other_on_left=*/false)
                                     : sum_to(matmul(g, transpose_last(b)), a.shape());
  if (c.needs_grad(1))
    out[1] = batched && b.dim() == 2 ? folded_rank2_grad(g, a, /*other_on_left=*/true)
                                     : sum_to(matmul(transpose_last(a), g), b.shape());
  return out;
}

struct ConvAttrs {
  const IntList& stride;
  const IntList& padding;
  const IntList& dilation;
  int64_t groups;
};

ConvAttrs conv_attrs(const AttrList& attrs) {
  return {attr_ints(attrs, AttrName::stride), attr_ints(attrs, AttrName::padding),
          attr_ints(attrs, AttrName::dilation), attr_int(attrs, AttrName::groups)};
}

Grads conv2d_bw(const BackwardContext& c) {
  const Tensor &x = c.input(0), &w = c.input(1);
  const ConvAttrs p = conv_attrs(c.attrs);
  Tensor g = c.grad();
  Grads out(c.inputs.size());
  if (c.needs_grad(0))
    out[0] = detail::conv2d_input_grad(g, w, x.shape(), p.stride, p.padding, p.dilation, p.groups);
  if (c.needs_grad(1))
    out[1] = detail::conv2d_weight_grad(x, g, w.shape(), p.stride, p.padding, p.dilation, p.groups);
  if (c.inputs.size() > 2 && c.needs_grad(2)) out[2] = sum(g, {0, 2, 3});
  return out;
}

/// Both conv gradients are bilinear, so their own gradients are the other
/// two members of the conv2d family (double backward of conv2d):
///   input_grad(g, w):  d/dg = conv2d(gg, w),  d/dw = weight_grad(gg, g)
///   weight_grad(x, g): d/dx = input_grad(g, gg), d/dg = conv2d(x, gg)
Grads conv2d_input_grad_bw(const BackwardContext& c) {
  const Tensor &g = c.input(0), &w = c.input(1);
  const ConvAttrs p = conv_attrs(c.attrs);
  Tensor gg = c.grad();
  Grads out(2);
  if (c.needs_grad(0)) out[0] = conv2d(gg, w, {}, p.stride, p.padding, p.dilation, p.groups);
  if (c.needs_grad(1))
    out[1] =
        detail::conv2d_weight_grad(gg, g, w.shape(), p.stride, p.padding, p.dilation, p.groups);
  return out;
}

Grads conv2d_weight_grad_bw(const BackwardContext& c) {
  const Tensor &x = c.input(0), &g = c.input(1);
  const ConvAttrs p = conv_attrs(c.attrs);
  Tensor gw = c.grad();
  Grads out(2);
  if (c.needs_grad(0))
    out[0] = detail::conv2d_input_grad(g, gw, x.shape(), p.stride, p.padding, p.dilation, p.groups);
  if (c.needs_grad(1)) out[1] = conv2d(x, gw, {}, p.stride, p.padding, p.dilation, p.groups);
  return out;
}

Grads max_pool2d_bw(const BackwardContext& c) {
  const Tensor& x = c.input(0);
  if (!is_floating(x.dtype())) return {Tensor()};
  const AttrList& a = c.attrs;
  return {detail::max_pool2d_grad(c.grad(), x, attr_ints(a, AttrName::kernel),
                                  attr_ints(a, AttrName::stride), attr_ints(a, AttrName::padding),
                                  attr_ints(a, AttrName::dilation),
                                  attr_int(a, AttrName::ceil_mode) != 0)};
}

Grads avg_pool2d_bw(const BackwardContext& c) {
  const AttrList& a = c.attrs;
  return {detail::avg_pool2d_grad(c.grad(), c.input(0).shape(), attr_ints(a, AttrName::kernel),
                                  attr_ints(a, AttrName::stride), attr_ints(a, AttrName::padding),
                                  attr_int(a, AttrName::ceil_mode) != 0,
                                  attr_int(a, AttrName::count_include_pad) != 0)};
}

/// avg_pool2d_grad is linear in g with the forward pool as its adjoint.
Grads avg_pool2d_grad_bw(const BackwardContext& c) {
  const AttrList& a = c.attrs;
  return {avg_pool2d(c.grad(), attr_ints(a, AttrName::kernel), attr_ints(a, AttrName::stride),
                     attr_ints(a, AttrName::padding), attr_int(a, AttrName::ceil_mode) != 0,
                     attr_int(a, AttrName::count_include_pad) != 0)};
}

// max_pool2d_grad has no formula: its gradient in grad_out gathers at each
// window's argmax, which no public op can express without the indices, and
// its gradient in the input is zero almost everywhere. Differentiating it
// (max_pool2d double backward) fails with "no backward formula".

}  // namespace

void register_linalg_formulas(FormulaTable& t) {
#define MSTEP_FORMULA(op) t[static_cast<int>(OpKind::op)] = op##_bw;
  MSTEP_FORMULA(matmul)
  MSTEP_FORMULA(conv2d)
  MSTEP_FORMULA(max_pool2d)
  MSTEP_FORMULA(avg_pool2d)
  MSTEP_FORMULA(conv2d_input_grad)
  MSTEP_FORMULA(conv2d_weight_grad)
  MSTEP_FORMULA(avg_pool2d_grad)
#undef MSTEP_FORMULA
}

}  // namespace mstep::autograd
