// Stochastic gradient descent with momentum, dampening, weight decay and
// Nesterov momentum (torch.optim.SGD, PyTorch 1.13):
//   g = grad + weight_decay * param
//   buf = g at the first step, else momentum * buf + (1 - dampening) * g
//   g = nesterov ? g + momentum * buf : buf       (when momentum != 0)
//   param = param - lr * g
#pragma once

#include "mstep/api/optim/Optimizer.h"

namespace mstep::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  /// SGD(model->parameters(), {.lr = 0.1, .momentum = 0.9}). Throws on a
  /// negative value, or nesterov without momentum or with dampening.
  SGD(std::vector<Tensor> params, SGDOptions options);

 protected:
  std::vector<std::string> state_names(const Flags& flags) const override;
  void update(size_t index, Tensor& param, const Tensor& grad) override;
};

}  // namespace mstep::optim
