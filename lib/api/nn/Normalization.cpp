// nn::LayerNorm and nn::RMSNorm.
#include "mstep/api/nn/Normalization.h"

#include "lib/api/nn/Init.h"
#include "lib/api/nn/ModuleChecks.h"
#include "mstep/api/NN.h"

namespace mstep::nn {
namespace {

/// Throws unless every normalized dim is positive (and there is one).
void check_normalized_shape(const Layer& module, const std::vector<int64_t>& shape) {
  bool ok = !shape.empty();
  for (int64_t d : shape) ok = ok && d > 0;
  if (!ok)
    checks::fail(module, "normalized_shape must list at least one positive dim",
                 absl::StrCat("normalized_shape ", checks::dims(shape)),
                 "Pass the sizes of the trailing dims to normalize, e.g. {hidden}.");
}

/// Throws unless `input`'s trailing dims equal `shape`.
void check_trailing(const Layer& module, const Tensor& input, const std::vector<int64_t>& shape) {
  checks::require_defined(module, input, "input");
  const int64_t n = static_cast<int64_t>(shape.size());
  bool ok = input.dim() >= n;
  for (int64_t i = 1; ok && i <= n; ++i) ok = input.size(-i) == shape[n - i];
  if (!ok) {
    std::string want = checks::dims(shape);
    want.insert(1, "*, ");
    checks::fail(module, absl::StrCat("expected input of shape ", want), checks::describe(input),
                 "The trailing dims of the input must equal normalized_shape.");
  }
}

}  // namespace

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine,
                     bool with_bias)
    : Layer("LayerNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps),
      elementwise_affine_(elementwise_affine) {
  check_normalized_shape(*this, normalized_shape_);
  if (elementwise_affine) {
    weight = ones(Shape(normalized_shape_));
    register_parameter("weight", weight);
    if (with_bias) {
      bias = zeros(Shape(normalized_shape_));
      register_parameter("bias", bias);
    }
  }
}

void LayerNorm::reset_parameters() {
  if (weight.defined()) init::assign(weight, ones_like(weight));
  if (bias.defined()) init::assign(bias, zeros_like(bias));
}

std::string LayerNorm::repr() const {
  return absl::StrCat("LayerNorm(", checks::dims(normalized_shape_), ", eps=", eps_,
                      ", elementwise_affine=", elementwise_affine_ ? "true" : "false", ")");
}

Tensor LayerNorm::forward(const Tensor& input) {
  check_trailing(*this, input, normalized_shape_);
  return layer_norm(input, normalized_shape_, weight, bias, eps_);
}

RMSNorm::RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps,
                 bool elementwise_affine)
    : Layer("RMSNorm"), normalized_shape_(std::move(normalized_shape)), eps_(eps),
      elementwise_affine_(elementwise_affine) {
  check_normalized_shape(*this, normalized_shape_);
  if (elementwise_affine) {
    weight = ones(Shape(normalized_shape_));
    register_parameter("weight", weight);
  }
}

void RMSNorm::reset_parameters() {
  if (weight.defined()) init::assign(weight, ones_like(weight));
}

std::string RMSNorm::repr() const {
  return absl::StrCat("RMSNorm(", checks::dims(normalized_shape_),
                      ", eps=", eps_ ? absl::StrCat(*eps_) : "None",
                      ", elementwise_affine=", elementwise_affine_ ? "true" : "false", ")");
}

Tensor RMSNorm::forward(const Tensor& input) {
  check_trailing(*this, input, normalized_shape_);
  return rms_norm(input, normalized_shape_, weight, eps_);
}

}  // namespace mstep::nn
