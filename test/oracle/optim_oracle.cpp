// Oracle registrations: optimizers (several steps with given gradients and
// a changing learning rate) and clip_grad_norm_. See cases/optim.py.
#include <set>

#include "test/oracle/OracleCase.h"

namespace mstep::oracle {
namespace {

using V = std::vector<Tensor>;

/// A host copy: the parameter handle keeps changing in later steps.
Tensor snapshot(const Tensor& t) {
  return from_vector(t.to_vector<double>(), t.shape(), t.dtype());
}

/// Runs attr "steps" optimizer steps on the case's parameters and returns
/// every parameter after every step.
template <typename MakeOptimizer> V run_optimizer(const OracleCase& c, MakeOptimizer make) {
  const int64_t n = c.attr_int("n_params"), steps = c.attr_int("steps");
  std::vector<Tensor> params;
  for (int64_t i = 0; i < n; ++i) params.push_back(c.in(i).requires_grad_());
  std::vector<double> lrs;
  for (const std::string& s : c.attrs.at("lrs")) lrs.push_back(std::stod(s));
  std::set<int64_t> skip;
  if (c.has("skip"))
    for (int64_t k : c.attr_ints("skip")) skip.insert(k);

  auto optimizer = make(params, lrs.at(0));
  V out;
  for (int64_t k = 0; k < steps; ++k) {
    optimizer->set_lr(lrs.at(k));
    for (int64_t i = 0; i < n; ++i)
      params[i].set_grad(skip.count(k * n + i) ? Tensor() : c.in(n + k * n + i));
    optimizer->step();
    mark_step();
    for (const Tensor& p : params) out.push_back(snapshot(p));
  }
  return out;
}

MSTEP_ORACLE_OP("optim_sgd", [](const OracleCase& c) {
  return run_optimizer(c, [&](std::vector<Tensor> params, double lr) {
    return std::make_unique<optim::SGD>(
        params, optim::SGDOptions{.lr = lr,
                                  .momentum = c.attr_double("momentum", 0),
                                  .dampening = c.attr_double("dampening", 0),
                                  .weight_decay = c.attr_double("weight_decay", 0),
                                  .nesterov = c.attr_int("nesterov", 0) != 0});
  });
});

optim::AdamOptions adam_options(const OracleCase& c, double lr, double default_wd) {
  return {.lr = lr,
          .betas = {c.attr_double("beta1", 0.9), c.attr_double("beta2", 0.999)},
          .eps = c.attr_double("eps", 1e-8),
          .weight_decay = c.attr_double("weight_decay", default_wd),
          .amsgrad = c.attr_int("amsgrad", 0) != 0};
}

MSTEP_ORACLE_OP("optim_adam", [](const OracleCase& c) {
  return run_optimizer(c, [&](std::vector<Tensor> params, double lr) {
    return std::make_unique<optim::Adam>(params, adam_options(c, lr, 0));
  });
});
MSTEP_ORACLE_OP("optim_adamw", [](const OracleCase& c) {
  return run_optimizer(c, [&](std::vector<Tensor> params, double lr) {
    optim::AdamOptions o = adam_options(c, lr, 1e-2);
    return std::make_unique<optim::AdamW>(
        params, optim::AdamWOptions{o.lr, o.betas, o.eps, o.weight_decay, o.amsgrad});
  });
});
MSTEP_ORACLE_OP("optim_adadelta", [](const OracleCase& c) {
  return run_optimizer(c, [&](std::vector<Tensor> params, double lr) {
    return std::make_unique<optim::Adadelta>(
        params, optim::AdadeltaOptions{.lr = lr,
                                       .rho = c.attr_double("rho", 0.9),
                                       .eps = c.attr_double("eps", 1e-6),
                                       .weight_decay = c.attr_double("weight_decay", 0)});
  });
});

MSTEP_ORACLE_OP("clip_grad_norm_", [](const OracleCase& c) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor g = c.in(i);
    Tensor p = zeros_like(g).requires_grad_();
    p.set_grad(g);
    params.push_back(p);
  }
  V out{optim::clip_grad_norm_(params, c.attr_double("max_norm"), c.attr_double("norm_type"))};
  for (const Tensor& p : params) out.push_back(p.grad());
  return out;
});

}  // namespace
}  // namespace mstep::oracle
