// Backward formulas: elementwise ops. Binary ops reduce each gradient back
// to its input's shape (sum_to), undoing broadcasting. Formulas follow
// PyTorch's derivatives.yaml, including its tie and zero conventions.
#include <cmath>

#include "lib/api/autograd/Formulas.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;

Tensor x0(const BackwardContext& c) { return c.input(0); }

Grads neg_bw(const BackwardContext& c) { return {neg(c.grad())}; }
Grads abs_bw(const BackwardContext& c) {
  const Tensor& x = x0(c);
  Tensor sign = to(gt(x, 0), x.dtype()) - to(lt(x, 0), x.dtype());
  return {c.grad() * sign};
}
Grads exp_bw(const BackwardContext& c) { return {c.grad() * c.output()}; }
Grads log_bw(const BackwardContext& c) { return {c.grad() / x0(c)}; }
Grads log1p_bw(const BackwardContext& c) { return {c.grad() / (x0(c) + 1)}; }
Grads sqrt_bw(const BackwardContext& c) { return {c.grad() / (c.output() * 2)}; }
Grads rsqrt_bw(const BackwardContext& c) {
  const Tensor& y = c.output();
  return {c.grad() * (y * y * y) * -0.5};
}
Grads sin_bw(const BackwardContext& c) { return {c.grad() * cos(x0(c))}; }
Grads cos_bw(const BackwardContext& c) { return {neg(c.grad() * sin(x0(c)))}; }
Grads tanh_bw(const BackwardContext& c) {
  const Tensor& y = c.output();
  return {c.grad() * (1 - y * y)};
}
Grads sigmoid_bw(const BackwardContext& c) {
  const Tensor& y = c.output();
  return {c.grad() * y * (1 - y)};
}
Grads relu_bw(const BackwardContext& c) { return {where(gt(c.output(), 0), c.grad(), 0)}; }
Grads gelu_bw(const BackwardContext& c) {
  const Tensor& x = x0(c);
  if (attr_int(c.attrs, AttrName::approximate) == 1) {
    constexpr double kBeta = 0.79788456080286535588;  // sqrt(2/pi)
    constexpr double kKappa = 0.044715;
    Tensor x2 = x * x;
    Tensor t = tanh((x + x2 * x * kKappa) * kBeta);
    Tensor left = (t + 1) * 0.5;
    Tensor right = x * 0.5 * (1 - t * t) * kBeta * (x2 * (3 * kKappa) + 1);
    return {c.grad() * (left + right)};
  }
  constexpr double kAlpha = 0.70710678118654752440;  // 1/sqrt(2)
  constexpr double kPdf = 0.39894228040143267794;    // 1/sqrt(2 pi)
  Tensor cdf = (erf(x * kAlpha) + 1) * 0.5;
  Tensor pdf = exp(x * x * -0.5) * kPdf;
  return {c.grad() * (cdf + x * pdf)};
}
Grads silu_bw(const BackwardContext& c) {
  const Tensor& x = x0(c);
  Tensor s = sigmoid(x);
  return {c.grad() * s * (x * (1 - s) + 1)};
}
Grads erf_bw(const BackwardContext& c) {
  const Tensor& x = x0(c);
  return {c.grad() * exp(neg(x * x)) * (2.0 / std::sqrt(M_PI))};
}
Grads reciprocal_bw(const BackwardContext& c) {
  const Tensor& y = c.output();
  return {neg(c.grad() * y * y)};
}
Grads cast_bw(const BackwardContext& c) {
  if (!is_floating(x0(c).dtype())) return {Tensor()};
  return {to(c.grad(), x0(c).dtype())};
}

Grads add_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  return {c.needs_grad(0) ? sum_to(g, c.input(0).shape()) : Tensor(),
          c.needs_grad(1) ? sum_to(g, c.input(1).shape()) : Tensor()};
}
Grads sub_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  return {c.needs_grad(0) ? sum_to(g, c.input(0).shape()) : Tensor(),
          c.needs_grad(1) ? sum_to(neg(g), c.input(1).shape()) : Tensor()};
}
Grads mul_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  const Tensor &a = c.input(0), &b = c.input(1);
  return {c.needs_grad(0) ? sum_to(g * b, a.shape()) : Tensor(),
          c.needs_grad(1) ? sum_to(g * a, b.shape()) : Tensor()};
}
Grads div_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  const Tensor &a = c.input(0), &b = c.input(1);
  return {c.needs_grad(0) ? sum_to(g / b, a.shape()) : Tensor(),
          c.needs_grad(1) ? sum_to(neg(g * c.output() / b), b.shape()) : Tensor()};
}
Grads pow_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  const Tensor &a = c.input(0), &b = c.input(1);
  Grads out(2);
  if (c.needs_grad(0))  // 0 where the exponent is 0 (PyTorch), avoiding 0 * inf
    out[0] = sum_to(where(eq(b, 0), zeros_like(g), g * b * pow(a, b - 1)), a.shape());
  if (c.needs_grad(1))  // 0 where the base is 0 and the exponent >= 0
    out[1] = sum_to(where(logical_and(eq(a, 0), ge(b, 0)), zeros_like(g),
                          g * c.output() * log(a)),
                    b.shape());
  return out;
}
/// maximum/minimum: the gradient goes to the winner, split evenly on ties.
Grads extremum_bw(const BackwardContext& c, bool is_max) {
  Tensor g = c.grad();
  const Tensor &a = c.input(0), &b = c.input(1);
  Tensor shared = where(eq(a, b), g / 2, g);
  Tensor a_wins = is_max ? gt(a, b) : lt(a, b);
  Tensor b_wins = is_max ? lt(a, b) : gt(a, b);
  return {c.needs_grad(0) ? sum_to(where(b_wins, zeros_like(shared), shared), a.shape()) : Tensor(),
          c.needs_grad(1) ? sum_to(where(a_wins, zeros_like(shared), shared), b.shape()) : Tensor()};
}
Grads maximum_bw(const BackwardContext& c) { return extremum_bw(c, true); }
Grads minimum_bw(const BackwardContext& c) { return extremum_bw(c, false); }
Grads where_bw(const BackwardContext& c) {
  Tensor g = c.grad();
  const Tensor& cond = c.input(0);
  Tensor zero = zeros_like(g);
  return {Tensor(), c.needs_grad(1) ? sum_to(where(cond, g, zero), c.input(1).shape()) : Tensor(),
          c.needs_grad(2) ? sum_to(where(cond, zero, g), c.input(2).shape()) : Tensor()};
}

}  // namespace

void register_elementwise_formulas(FormulaTable& t) {
#define MSTEP_FORMULA(op) t[static_cast<int>(OpKind::op)] = op##_bw;
  MSTEP_FORMULA(neg) MSTEP_FORMULA(abs) MSTEP_FORMULA(exp) MSTEP_FORMULA(log)
  MSTEP_FORMULA(log1p) MSTEP_FORMULA(sqrt) MSTEP_FORMULA(rsqrt) MSTEP_FORMULA(sin)
  MSTEP_FORMULA(cos) MSTEP_FORMULA(tanh) MSTEP_FORMULA(sigmoid) MSTEP_FORMULA(relu)
  MSTEP_FORMULA(gelu) MSTEP_FORMULA(silu) MSTEP_FORMULA(erf) MSTEP_FORMULA(reciprocal)
  MSTEP_FORMULA(cast) MSTEP_FORMULA(add) MSTEP_FORMULA(sub) MSTEP_FORMULA(mul)
  MSTEP_FORMULA(div) MSTEP_FORMULA(pow) MSTEP_FORMULA(maximum) MSTEP_FORMULA(minimum)
  MSTEP_FORMULA(where)
#undef MSTEP_FORMULA
}

}  // namespace mstep::autograd
