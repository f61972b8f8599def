// Adam and AdamW (torch.optim.Adam / AdamW, PyTorch 1.13), optionally
// AMSGrad. With t the parameter's step count:
//   Adam:  g = grad + weight_decay * param
//   AdamW: param = param * (1 - lr * weight_decay)       (decoupled)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   vmax = max(vmax, v)                                  (amsgrad)
//   denom = sqrt(v or vmax) / sqrt(1 - beta2^t) + eps
//   param = param - lr / (1 - beta1^t) * m / denom
// The bias corrections come from the device step counter, so they change
// every step without changing the graph.
#pragma once

#include <utility>

#include "mstep/api/optim/Optimizer.h"

namespace mstep::optim {

struct AdamOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};

struct AdamWOptions {
  double lr = 1e-3;
  std::pair<double, double> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  /// Adam(params, {.lr = 1e-3, .betas = {0.9, 0.99}}). Throws on a value
  /// out of range (betas in [0, 1), the rest non-negative).
  Adam(std::vector<Tensor> params, AdamOptions options = {});

 protected:
  /// `decoupled` selects AdamW's weight decay.
  Adam(std::string name, std::vector<Tensor> params, AdamOptions options, bool decoupled);
  std::vector<std::string> state_names(const Flags& flags) const override;
  void update(size_t index, Tensor& param, const Tensor& grad) override;

 private:
  bool decoupled_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
};

}  // namespace mstep::optim
