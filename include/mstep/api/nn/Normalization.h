// nn::LayerNorm and nn::RMSNorm over the trailing `normalized_shape` dims,
// with PyTorch's parameter names and initial values (weight ones, bias
// zeros).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mstep/api/nn/Layer.h"

namespace mstep::nn {

class LayerNorm : public Layer {
 public:
  /// weight and bias have shape normalized_shape; without
  /// elementwise_affine there are no parameters. `bias` = false keeps only
  /// the weight (PyTorch >= 2.1).
  LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
            bool elementwise_affine = true, bool bias = true);

  /// x [*, normalized_shape...] -> the same shape.
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  void reset_parameters();

  const std::vector<int64_t>& normalized_shape() const { return normalized_shape_; }
  double eps() const { return eps_; }

  Tensor weight;  // undefined without elementwise_affine
  Tensor bias;    // undefined without elementwise_affine or bias

 private:
  std::vector<int64_t> normalized_shape_;
  double eps_;
  bool elementwise_affine_;
};

/// x / sqrt(mean(x^2) + eps) * weight (torch.nn.RMSNorm, PyTorch >= 2.4).
/// Without eps, the input dtype's machine epsilon.
class RMSNorm : public Layer {
 public:
  RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
          bool elementwise_affine = true);

  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  void reset_parameters();

  const std::vector<int64_t>& normalized_shape() const { return normalized_shape_; }
  std::optional<double> eps() const { return eps_; }

  Tensor weight;  // undefined without elementwise_affine

 private:
  std::vector<int64_t> normalized_shape_;
  std::optional<double> eps_;
  bool elementwise_affine_;
};

}  // namespace mstep::nn
