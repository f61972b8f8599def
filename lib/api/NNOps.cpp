// NN ops: softmax, log_softmax, layer_norm, rms_norm and dropout. Each is
// one primitive node (backends fuse or lower them); this file checks the
// arguments and records the node.
#include <cmath>

#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/Creation.h"
#include "mstep/api/NN.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

void require_floating_input(absl::string_view op, const Tensor& x) {
  if (!x.defined()) throw_op_error(op, "the input is undefined", "", "");
  if (!is_floating(x.dtype()))
    throw_op_error(op, "expects a floating-point input", describe(x),
                   "Convert it first, e.g. mstep::to(x, mstep::DType::f32).");
}

Tensor softmax_like(absl::string_view op, OpKind kind, const Tensor& x,
                    int64_t dim) {
  require_floating_input(op, x);
  const int64_t d = detail::normalize_dim(op, dim, x.dim(), x);
  return detail::record(op, kind, {x}, {{AttrName::dim, d}}, x.type());
}

std::string shape_list(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ", "), "]");
}

/// Checks that `normalized_shape` is non-empty and matches the trailing
/// dims of `x`, as torch.nn.functional.layer_norm does.
void check_normalized_shape(absl::string_view op, const Tensor& x,
                            absl::Span<const int64_t> normalized_shape) {
  const std::string inputs = absl::StrCat(
      describe(x), " with normalized_shape ", shape_list(normalized_shape));
  if (normalized_shape.empty())
    throw_op_error(op, "normalized_shape must name at least one dim", inputs,
                   "Pass the trailing dims to normalize over, e.g. "
                   "{x.size(-1)}.");
  const int64_t n = static_cast<int64_t>(normalized_shape.size());
  bool match = n <= x.dim();
  for (int64_t i = 0; match && i < n; ++i)
    match = x.shape()[x.dim() - n + i] == normalized_shape[i];
  if (!match)
    throw_op_error(op, "normalized_shape must equal the trailing dims of the input",
                   inputs,
                   "normalized_shape lists the last dims of the input, e.g. "
                   "{x.size(-1)} for the hidden dim.");
}

/// An optional affine parameter (weight or bias) must have exactly
/// normalized_shape and the input's dtype.
void check_affine(absl::string_view op, absl::string_view what, const Tensor& p,
                  const Tensor& x, absl::Span<const int64_t> normalized_shape) {
  if (!p.defined()) return;
  if (p.shape() != Shape(normalized_shape))
    throw_op_error(op,
                   absl::StrCat(what, " must have shape normalized_shape ",
                                shape_list(normalized_shape)),
                   absl::StrCat(what, " ", describe(p), ", input ", describe(x)),
                   absl::StrCat("Create the ", what, " with normalized_shape."));
  if (p.dtype() != x.dtype())
    throw_op_error(op, absl::StrCat(what, " must have the input's dtype"),
                   absl::StrCat(what, " ", describe(p), ", input ", describe(x)),
                   absl::StrCat("Convert one of them, e.g. mstep::to(", what,
                                ", x.dtype())."));
}

void check_eps(absl::string_view op, double eps, const Tensor& x) {
  if (!(eps >= 0) || !std::isfinite(eps))
    throw_op_error(op, absl::StrCat("eps must be finite and >= 0, got ", eps),
                   describe(x), "Use a small positive value such as 1e-5.");
}

/// torch.finfo(dtype).eps: the default rms_norm eps.
double machine_epsilon(DType dtype) {
  switch (dtype) {
    case DType::f64: return 2.220446049250313e-16;
    case DType::bf16: return 0.0078125;
    case DType::f16: return 0.0009765625;
    default: return 1.1920928955078125e-07;
  }
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  return softmax_like("softmax", OpKind::softmax, x, dim);
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  return softmax_like("log_softmax", OpKind::log_softmax, x, dim);
}

Tensor layer_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                  const Tensor& weight, const Tensor& bias, double eps) {
  require_floating_input("layer_norm", x);
  check_normalized_shape("layer_norm", x, normalized_shape);
  check_affine("layer_norm", "weight", weight, x, normalized_shape);
  check_affine("layer_norm", "bias", bias, x, normalized_shape);
  check_eps("layer_norm", eps, x);
  std::vector<Tensor> operands = {x};
  if (weight.defined()) operands.push_back(weight);
  if (bias.defined()) operands.push_back(bias);
  AttrList attrs;
  attrs.push_back({AttrName::normalized_ndim,
                   static_cast<int64_t>(normalized_shape.size())});
  attrs.push_back({AttrName::eps, eps});
  attrs.push_back({AttrName::has_weight, int64_t{weight.defined()}});
  attrs.push_back({AttrName::has_bias, int64_t{bias.defined()}});
  return detail::record("layer_norm", OpKind::layer_norm, operands,
                        std::move(attrs), x.type());
}

Tensor rms_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                const Tensor& weight, std::optional<double> eps) {
  require_floating_input("rms_norm", x);
  check_normalized_shape("rms_norm", x, normalized_shape);
  check_affine("rms_norm", "weight", weight, x, normalized_shape);
  const double e = eps.value_or(machine_epsilon(x.dtype()));
  check_eps("rms_norm", e, x);
  std::vector<Tensor> operands = {x};
  if (weight.defined()) operands.push_back(weight);
  AttrList attrs;
  attrs.push_back({AttrName::normalized_ndim,
                   static_cast<int64_t>(normalized_shape.size())});
  attrs.push_back({AttrName::eps, e});
  attrs.push_back({AttrName::has_weight, int64_t{weight.defined()}});
  return detail::record("rms_norm", OpKind::rms_norm, operands, std::move(attrs),
                        x.type());
}

Tensor dropout(const Tensor& x, double p, bool train) {
  if (!x.defined()) throw_op_error("dropout", "the input is undefined", "", "");
  if (!(p >= 0 && p <= 1))
    throw_op_error("dropout",
                   absl::StrCat("probability p must be in [0, 1], got ", p),
                   describe(x), "p is the fraction of elements to zero.");
  if (!train || p == 0) return x;
  require_floating_input("dropout", x);
  if (p == 1) return zeros_like(x);
  // Same RNG protocol as rand(): the node reads the (seed, offset) state
  // as an operand and adds its own offset, so a replayed step draws fresh
  // numbers and manual_seed() reproduces them.
  Tracer::RandomDraw draw = value_or_throw(Tracer::get().draw_random(x.numel(), x.device()));
  return detail::record("dropout", OpKind::dropout, {x, Tensor(draw.state)},
                        {{AttrName::p, p}, {AttrName::offset, draw.offset}}, x.type());
}

}  // namespace mstep
