// Parameter-free layers: ReLU, GELU, SiLU and Dropout.
#pragma once

#include <string>

#include "mstep/api/nn/Layer.h"

namespace mstep::nn {

class ReLU : public Layer {
 public:
  ReLU() : Layer("ReLU") {}
  Tensor forward(const Tensor& input) override;
};

/// approximate: "none" (erf) or "tanh", as torch.nn.GELU.
class GELU : public Layer {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  const std::string& approximate() const { return approximate_; }

 private:
  std::string approximate_;
};

class SiLU : public Layer {
 public:
  SiLU() : Layer("SiLU") {}
  Tensor forward(const Tensor& input) override;
};

/// Zeroes elements with probability p and scales the rest by 1/(1-p) while
/// the module is training; the identity after eval().
class Dropout : public Layer {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace mstep::nn
