// Adam's and AdamW's per-parameter update (PyTorch 1.13's
// _single_tensor_adam / _single_tensor_adamw, non-capturable numerics:
// the bias corrections are f64 like the Python floats PyTorch uses).
#include "mstep/api/optim/Adam.h"

#include <limits>

#include "mstep/mstep.h"

namespace mstep::optim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options)
    : Adam("Adam", std::move(params), options, false) {}

Adam::Adam(std::string name, std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(name), std::move(params)), decoupled_(decoupled) {
  define_hyper("lr", o.lr, 0, kInf);
  define_hyper("betas.0", o.betas.first, 0, 1, /*hi_open=*/true);
  define_hyper("betas.1", o.betas.second, 0, 1, /*hi_open=*/true);
  define_hyper("eps", o.eps, 0, kInf);
  define_hyper("weight_decay", o.weight_decay, 0, kInf);
  define_flag("amsgrad", o.amsgrad);
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions o)
    : Adam("AdamW", std::move(params), AdamOptions{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad},
           true) {}

std::vector<std::string> Adam::state_names(const Flags& flags) const {
  std::vector<std::string> names = {"exp_avg", "exp_avg_sq", "step"};
  if (flags.at("amsgrad")) names.push_back("max_exp_avg_sq");
  return names;
}

void Adam::update(size_t index, Tensor& param, const Tensor& grad) {
  const DType dt = param.dtype();
  Tensor step = advance_step(index);  // f64, counts this step
  Tensor g = grad;
  Tensor base = param;
  if (hyper("weight_decay") != 0) {
    if (decoupled_) {
      base = param * derived_as("1-lr*weight_decay", dt, [&] {
               return 1.0 - hyper_scalar("lr") * hyper_scalar("weight_decay");
             });
    } else {
      g = g + hyper_as("weight_decay", dt) * param;
    }
  }
  auto one_minus = [&](const std::string& beta) {
    return derived_as("1-" + beta, dt, [&] { return 1.0 - hyper_scalar(beta); });
  };
  Tensor& exp_avg = state_tensor(index, "exp_avg", param.type());
  Tensor& exp_avg_sq = state_tensor(index, "exp_avg_sq", param.type());
  Tensor m = exp_avg * hyper_as("betas.0", dt) + one_minus("betas.0") * g;
  Tensor v = exp_avg_sq * hyper_as("betas.1", dt) + one_minus("betas.1") * g * g;
  exp_avg.copy_(m);
  exp_avg_sq.copy_(v);
  if (flag("amsgrad")) {
    Tensor& max_sq = state_tensor(index, "max_exp_avg_sq", param.type());
    max_sq.copy_(maximum(max_sq, v));
    v = max_sq;
  }
  // Bias corrections from the device step counter, in f64 as PyTorch's
  // Python floats, then rounded once to the parameter's dtype.
  Tensor bias_correction1 = 1.0 - pow(hyper_scalar("betas.0"), step);
  Tensor bias_correction2 = 1.0 - pow(hyper_scalar("betas.1"), step);
  Tensor step_size = to(hyper_scalar("lr") / bias_correction1, dt);
  Tensor bias_correction2_sqrt = to(sqrt(bias_correction2), dt);
  Tensor denom = sqrt(v) / bias_correction2_sqrt + hyper_as("eps", dt);
  // addcdiv_(m, denom, value=-step_size) evaluates (value * m) / denom.
  param.copy_(base - step_size * m / denom);
}

}  // namespace mstep::optim
