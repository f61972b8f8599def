// SGD's per-parameter update (PyTorch 1.13's _single_tensor_sgd).
#include "mstep/api/optim/SGD.h"

#include <limits>

#include "mstep/mstep.h"

namespace mstep::optim {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer("SGD", std::move(params)) {
  define_hyper("lr", o.lr, 0, kInf);
  define_hyper("momentum", o.momentum, 0, kInf);
  define_hyper("dampening", o.dampening, -kInf, kInf);
  define_hyper("weight_decay", o.weight_decay, 0, kInf);
  define_flag("nesterov", o.nesterov);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
    throw Error(absl::InvalidArgumentError(
        "mstep::optim::SGD: Nesterov momentum requires a momentum and zero dampening. Got "
        "momentum " +
        std::to_string(o.momentum) + ", dampening " + std::to_string(o.dampening) + "."));
}

std::vector<std::string> SGD::state_names(const Flags&) const {
  return {"momentum_buffer", "step"};
}

void SGD::update(size_t index, Tensor& param, const Tensor& grad) {
  const DType dt = param.dtype();
  Tensor d_p = grad;
  // Zero weight decay or momentum skip their ops, as PyTorch's code path.
  if (hyper("weight_decay") != 0) d_p = d_p + hyper_as("weight_decay", dt) * param;
  if (hyper("momentum") != 0) {
    const Tensor& momentum = hyper_as("momentum", dt);
    Tensor step = advance_step(index);
    Tensor& buf = state_tensor(index, "momentum_buffer", param.type());
    Tensor new_buf;
    if (hyper("dampening") != 0) {
      // PyTorch starts the buffer as a copy of the gradient. The buffer
      // starts at zero, so momentum * buf vanishes; only the gradient's
      // coefficient (1, later 1 - dampening) depends on the step.
      Tensor coef = where(eq(step, 1.0), 1.0, derived_as("1-dampening", DType::f64, [&] {
                            return 1.0 - hyper_scalar("dampening");
                          }));
      new_buf = buf * momentum + to(coef, dt) * d_p;
    } else {
      new_buf = buf * momentum + d_p;
    }
    buf.copy_(new_buf);
    d_p = flag("nesterov") ? d_p + momentum * new_buf : new_buf;
  }
  param.copy_(param - hyper_as("lr", dt) * d_p);
}

}  // namespace mstep::optim
