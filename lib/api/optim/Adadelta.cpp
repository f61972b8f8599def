// Adadelta's per-parameter update (PyTorch 1.13's _single_tensor_adadelta).
#include "mstep/api/optim/Adadelta.h"

#include <limits>

#include "mstep/mstep.h"

namespace mstep::optim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

Adadelta::Adadelta(std::vector<Tensor> params, AdadeltaOptions o)
    : Optimizer("Adadelta", std::move(params)) {
  define_hyper("lr", o.lr, 0, kInf);
  define_hyper("rho", o.rho, 0, 1);
  define_hyper("eps", o.eps, 0, kInf);
  define_hyper("weight_decay", o.weight_decay, 0, kInf);
}

std::vector<std::string> Adadelta::state_names(const Flags&) const {
  return {"acc_delta", "square_avg", "step"};
}

void Adadelta::update(size_t index, Tensor& param, const Tensor& grad) {
  const DType dt = param.dtype();
  advance_step(index);  // unused by the rule; kept for PyTorch's state_dict
  Tensor g = grad;
  if (hyper("weight_decay") != 0) g = g + hyper_as("weight_decay", dt) * param;
  const Tensor& rho = hyper_as("rho", dt);
  const Tensor& one_minus_rho = derived_as("1-rho", dt, [&] { return 1.0 - hyper_scalar("rho"); });
  const Tensor& eps = hyper_as("eps", dt);
  Tensor& square_avg = state_tensor(index, "square_avg", param.type());
  Tensor& acc_delta = state_tensor(index, "acc_delta", param.type());
  Tensor sq = square_avg * rho + one_minus_rho * g * g;
  Tensor rms_grad = sqrt(sq + eps);
  Tensor delta = sqrt(acc_delta + eps) / rms_grad * g;
  square_avg.copy_(sq);
  acc_delta.copy_(acc_delta * rho + one_minus_rho * delta * delta);
  param.copy_(param - hyper_as("lr", dt) * delta);
}

}  // namespace mstep::optim
