// Loss functions. nll_loss is a primitive node (its out-of-range target
// check needs the data, so the kernel makes it); cross_entropy, mse_loss
// and binary_cross_entropy_with_logits are composites of public ops.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Losses.h"
#include "mstep/api/NN.h"
#include "mstep/api/Reduction.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

std::string both(const Tensor& a, absl::string_view a_name, const Tensor& b,
                 absl::string_view b_name) {
  return absl::StrCat(a_name, " ", describe(a), ", ", b_name, " ", describe(b));
}

void require_defined(absl::string_view op, const Tensor& a,
                     absl::string_view a_name, const Tensor& b,
                     absl::string_view b_name) {
  if (!a.defined() || !b.defined())
    throw_op_error(op, "an operand is undefined", both(a, a_name, b, b_name), "");
}

/// The node's reduction attr: 0 none, 1 mean, 2 sum.
int64_t reduction_code(absl::string_view op, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return 0;
    case Reduction::mean: return 1;
    case Reduction::sum: return 2;
  }
  throw_op_error(op,
                 absl::StrCat("unknown reduction ", static_cast<int>(reduction)),
                 "", "Use Reduction::none, Reduction::mean or Reduction::sum.");
}

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return loss;
    case Reduction::mean: return mean(loss);
    case Reduction::sum: return sum(loss);
  }
  return loss;
}

/// Class-index losses: input [N, C] with target [N], or input [C] with a
/// 0-d target; integer targets. `input_name` is "log_probs" or "logits".
void check_class_target(absl::string_view op, const Tensor& input,
                        absl::string_view input_name, const Tensor& target) {
  require_defined(op, input, input_name, target, "target");
  const std::string got = both(input, input_name, target, "target");
  if (!is_floating(input.dtype()))
    throw_op_error(op, absl::StrCat(input_name, " must be floating-point"), got,
                   "Convert it first, e.g. mstep::to(x, mstep::DType::f32).");
  if (input.dim() != 1 && input.dim() != 2)
    throw_op_error(op,
                   absl::StrCat("expects ", input_name,
                                " of shape [N, C] or [C]"),
                   got,
                   "Extra spatial dims ([N, C, d1, ...]) and class-probability "
                   "targets are not supported; reshape to [N, C] with the "
                   "class dim last.");
  if (!is_integral(target.dtype()))
    throw_op_error(op, "target must hold integer class indices", got,
                   "Pass an i64 (or i32) tensor of class indices; "
                   "probability targets are not supported.");
  const bool batched = input.dim() == 2;
  if (batched ? target.shape() != Shape{input.size(0)} : target.dim() != 0)
    throw_op_error(op,
                   batched ? absl::StrCat("target must have shape [N] = [",
                                          input.size(0), "]")
                           : std::string("target must be 0-d for a 1-D input"),
                   got, "Pass one class index per row of the input.");
}

}  // namespace

Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction, int64_t ignore_index) {
  check_class_target("nll_loss", log_probs, "log_probs", target);
  const int64_t code = reduction_code("nll_loss", reduction);
  Shape shape = reduction == Reduction::none ? target.shape() : Shape{};
  AttrList attrs;
  attrs.push_back({AttrName::ignore_index, ignore_index});
  attrs.push_back({AttrName::reduction, code});
  return detail::record("nll_loss", OpKind::nll_loss,
                        {log_probs, detail::cast_to(target, DType::i64)},
                        std::move(attrs), {std::move(shape), log_probs.dtype()});
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction, int64_t ignore_index,
                     double label_smoothing) {
  check_class_target("cross_entropy", logits, "logits", target);
  reduction_code("cross_entropy", reduction);
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw_op_error("cross_entropy",
                   absl::StrCat("label_smoothing must be in [0, 1], got ",
                                label_smoothing),
                   both(logits, "logits", target, "target"),
                   "0 disables smoothing; 0.1 is a common choice.");
  const int64_t class_dim = logits.dim() - 1;
  Tensor log_probs = log_softmax(logits, class_dim);
  Tensor nll = nll_loss(log_probs, target, reduction, ignore_index);
  if (label_smoothing == 0) return nll;

  // PyTorch's formula: (1 - ls) * nll + ls / C * smooth, where smooth is
  // -sum over classes of log_probs, 0 for ignored targets, and its mean
  // divides by the number of targets that are not ignored.
  const int64_t classes = logits.size(class_dim);
  Tensor keep = ne(target, Scalar(ignore_index));
  Tensor smooth = where(keep, neg(sum(log_probs, {class_dim})), Scalar(0.0));
  switch (reduction) {
    case Reduction::none: break;
    case Reduction::sum: smooth = sum(smooth); break;
    case Reduction::mean: smooth = div(sum(smooth), sum(keep)); break;
  }
  return nll * (1.0 - label_smoothing) +
         smooth * (label_smoothing / static_cast<double>(classes));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  require_defined("mse_loss", input, "input", target, "target");
  reduction_code("mse_loss", reduction);
  if (!is_floating(input.dtype()))
    throw_op_error("mse_loss", "input must be floating-point",
                   both(input, "input", target, "target"),
                   "Convert it first, e.g. mstep::to(x, mstep::DType::f32).");
  // Broadcasting is allowed, as PyTorch (which only warns).
  auto shape = detail::broadcast_shapes(input.shape(), target.shape());
  if (!shape.ok())
    throw_op_error("mse_loss", shape.status().message(),
                   both(input, "input", target, "target"),
                   "Give input and target the same shape.");
  Tensor diff = input - target;
  return reduce(diff * diff, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits,
                                        const Tensor& target,
                                        Reduction reduction) {
  constexpr absl::string_view kOp = "binary_cross_entropy_with_logits";
  require_defined(kOp, logits, "logits", target, "target");
  reduction_code(kOp, reduction);
  const std::string got = both(logits, "logits", target, "target");
  if (!is_floating(logits.dtype()) || !is_floating(target.dtype()))
    throw_op_error(kOp, "logits and target must be floating-point", got,
                   "Targets are probabilities in [0, 1]: convert them, e.g. "
                   "mstep::to(target, logits.dtype()).");
  if (logits.shape() != target.shape())
    throw_op_error(kOp, "target must have the shape of logits", got,
                   "Give one target per logit.");
  // max(x, 0) - x*y + log(1 + exp(-|x|)): the stable form, no overflow
  // for large |x|.
  Tensor loss = relu(logits) - logits * target + log1p(exp(neg(abs(logits))));
  return reduce(loss, reduction);
}

}  // namespace mstep
