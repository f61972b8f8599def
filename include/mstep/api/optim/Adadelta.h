// Adadelta (torch.optim.Adadelta, PyTorch 1.13):
//   g = grad + weight_decay * param
//   square_avg = rho * square_avg + (1 - rho) * g * g
//   delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
//   acc_delta = rho * acc_delta + (1 - rho) * delta * delta
//   param = param - lr * delta
#pragma once

#include "mstep/api/optim/Optimizer.h"

namespace mstep::optim {

struct AdadeltaOptions {
  double lr = 1.0;
  double rho = 0.9;
  double eps = 1e-6;
  double weight_decay = 0;
};

class Adadelta : public Optimizer {
 public:
  /// Throws on a value out of range (rho in [0, 1], the rest non-negative).
  Adadelta(std::vector<Tensor> params, AdadeltaOptions options = {});

 protected:
  std::vector<std::string> state_names(const Flags& flags) const override;
  void update(size_t index, Tensor& param, const Tensor& grad) override;
};

}  // namespace mstep::optim
