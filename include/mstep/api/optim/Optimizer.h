// optim::Optimizer: the base of SGD, Adam, AdamW and Adadelta, with
// PyTorch 1.13's update rules.
//
// step() records each parameter's update as ordinary lazy ops (under
// NoGradGuard) and writes it back with Tensor::copy_, so forward, backward
// and the update land in one graph that runs at mark_step().
//
// Nothing in that graph changes from step to step, so it compiles once:
//  - every floating hyperparameter (lr, momentum, betas, eps, ...) is an
//    f64 device scalar, changed with fill_ (set_lr, set_hyper), never a
//    host constant;
//  - the per-parameter step counter is a device tensor incremented in the
//    graph, and what depends on it (Adam's bias corrections 1 - beta^t,
//    SGD's first momentum step) is computed on the device from it;
//  - state tensors are created at a parameter's first step as
//    materialized zeros, so the first step's graph is every step's graph.
// Only structural options (nesterov, amsgrad, whether momentum or weight
// decay is zero) shape the graph, as they shape PyTorch's code path.
//
// state_dict() entries (every tensor a safetensors checkpoint can hold):
//   "param_groups.<hyper>"  0-d f64: lr, momentum, dampening, weight_decay,
//                           betas.0, betas.1, eps, rho (per optimizer)
//   "param_groups.<flag>"   0-d bool: nesterov, amsgrad
//   "state.<i>.step"        0-d i64: the steps parameter i has taken
//   "state.<i>.<name>"      parameter i's state, same type as the
//                           parameter: momentum_buffer (SGD), exp_avg,
//                           exp_avg_sq, max_exp_avg_sq (Adam, AdamW),
//                           square_avg, acc_delta (Adadelta)
// <i> is the parameter's index in parameters(). A parameter that never had
// a gradient has no "state.<i>" entries, as in PyTorch.
//
// Not thread-safe: one thread drives an optimizer.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "mstep/api/Checkpoint.h"
#include "mstep/api/Tensor.h"

namespace mstep::optim {

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Records one update of every parameter that has a gradient (the
  /// others are skipped, as in PyTorch). Lazy: it runs at mark_step().
  /// With the NaN guard on (mstep/api/NanGuard.h), step() first runs the
  /// forward, backward and one gradient check through mark_step() and may
  /// throw NanGuardError; the update then runs as its own graph at the
  /// next mark_step(). After Module::to moved the parameters, their state
  /// and the hyperparameters move after them first (a copy through the
  /// host, so not inside a capture: step once after the move, then capture).
  void step();
  /// Clears every gradient (set_to_none) or replaces it with zeros.
  void zero_grad(bool set_to_none = true);

  /// "SGD", "Adam", "AdamW", "Adadelta".
  const std::string& name() const { return name_; }
  /// The parameters, each once (a tensor passed twice is kept once).
  const std::vector<Tensor>& parameters() const { return params_; }

  /// The learning rate. set_lr fills its device scalar: no recompile.
  double lr() const { return hyper("lr"); }
  void set_lr(double lr) { set_hyper("lr", lr); }
  /// Any floating hyperparameter by its state_dict name ("momentum",
  /// "betas.0", ...); setting one checks its range like the constructor.
  double hyper(const std::string& name) const;
  void set_hyper(const std::string& name, double value);
  bool flag(const std::string& name) const;

  /// Parameter i's state tensor `name` ("step", "exp_avg", ...), or an
  /// undefined tensor before its first step.
  Tensor state(size_t param_index, const std::string& name) const;

  /// The entries listed at the top of this file. State tensors are the
  /// live handles; hyperparameters are fresh 0-d tensors.
  std::map<std::string, Tensor> state_dict() const;

  /// Loads a state_dict(): hyperparameters, flags and the state of every
  /// parameter listed (parameters absent from `dict` start afresh, as
  /// after construction). Floating state is converted to the parameter's
  /// dtype, as in PyTorch. With `strict`, any missing, unexpected or
  /// mismatched entry throws one mstep::Error listing every problem and
  /// nothing changes; without it the valid entries load and the report
  /// lists the rest (a parameter with incomplete state keeps its own).
  LoadReport load_state_dict(const std::map<std::string, Tensor>& dict, bool strict = true);

 protected:
  struct ParamState {
    std::map<std::string, Tensor> tensors;  // "step", "exp_avg", ...
  };
  using Flags = std::map<std::string, bool>;

  /// Checks and dedupes `params` (throws on none, or on a non-floating or
  /// non-leaf tensor, naming `name`).
  Optimizer(std::string name, std::vector<Tensor> params);

  /// Declares a hyperparameter held in a device scalar; `value` must lie
  /// in [lo, hi] (or [lo, hi) when `hi_open`). Every optimizer defines
  /// "lr" in its constructor.
  void define_hyper(const std::string& name, double value, double lo, double hi,
                    bool hi_open = false);
  void define_flag(const std::string& name, bool value);

  /// The state tensors a parameter holds under `flags` (with "step").
  virtual std::vector<std::string> state_names(const Flags& flags) const = 0;
  /// Records the update of parameter `index`, writing `param` and its
  /// state with copy_. Runs under NoGradGuard.
  virtual void update(size_t index, Tensor& param, const Tensor& grad) = 0;

  /// This step's value of hyperparameter `name` as a 0-d tensor of
  /// `dtype`: the f64 device scalar, cast once per step and dtype so a
  /// hundred parameters share one cast node.
  const Tensor& hyper_as(const std::string& name, DType dtype);
  /// A 0-d f64 value computed once per step from the hyperparameters
  /// (e.g. 1 - beta1), cast once per step to `dtype`.
  template <typename Make>
  const Tensor& derived_as(const std::string& key, DType dtype, Make make) {
    auto it = step_values_.find({key, dtype});
    if (it != step_values_.end()) return it->second;
    auto f64 = step_values_.find({key, DType::f64});
    if (f64 == step_values_.end())
      f64 = step_values_.emplace(std::make_pair(key, DType::f64), make()).first;
    return step_values_.emplace(std::make_pair(key, dtype), cast_value(f64->second, dtype))
        .first->second;
  }
  /// The f64 device scalar of hyperparameter `name`.
  const Tensor& hyper_scalar(const std::string& name) const;

  /// Parameter `index`'s state tensor `name`, created as materialized
  /// zeros of `type` on first use.
  Tensor& state_tensor(size_t index, const std::string& name, const TensorType& type);
  /// Increments parameter `index`'s step counter in the graph and returns
  /// the new count as a 0-d f64 tensor.
  Tensor advance_step(size_t index);

 private:
  struct Hyper {
    double value;
    Tensor scalar;  // f64 device scalar
    double lo, hi;
    bool hi_open;
  };
  static Tensor cast_value(const Tensor& value, DType dtype);
  /// Moves the hyperparameter scalars and the state to the parameters'
  /// device when Module::to moved them (throws when the parameters live on
  /// different devices, or inside a capture).
  void follow_parameters();
  void check_hyper(const std::string& name, const Hyper& h, double value) const;

  std::string name_;
  std::vector<Tensor> params_;
  std::map<std::string, Hyper> hypers_;
  Flags flags_;
  std::vector<ParamState> state_;
  // Lazy values shared by every parameter within one step().
  std::map<std::pair<std::string, DType>, Tensor> step_values_;
};

}  // namespace mstep::optim
