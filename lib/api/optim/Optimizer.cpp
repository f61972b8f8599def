// Optimizer base: parameter checks, device-scalar hyperparameters,
// lazily created state, and state_dict save / load.
#include "mstep/api/optim/Optimizer.h"

#include <cmath>
#include <limits>
#include <set>
#include <unordered_set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/api/DeviceTransfer.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/checkpoint/CheckpointInternal.h"
#include "mstep/mstep.h"

namespace mstep::optim {

namespace {
constexpr char kGroupPrefix[] = "param_groups.";
constexpr char kStatePrefix[] = "state.";

std::string range_text(double lo, double hi, bool hi_open) {
  return absl::StrCat("[", lo, ", ", std::isinf(hi) ? "inf" : absl::StrCat(hi),
                      hi_open ? ")" : "]");
}
}  // namespace

Optimizer::Optimizer(std::string name, std::vector<Tensor> params) : name_(std::move(name)) {
  const std::string op = "optim::" + name_;
  if (params.empty())
    detail::throw_op_error(op, "got an empty parameter list", "",
                           "Pass the tensors to optimize, e.g. model->parameters().");
  std::unordered_set<const TensorImpl*> seen;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    if (!p.defined())
      detail::throw_op_error(op, absl::StrCat("parameter ", i, " is undefined"), "",
                             "Initialize every parameter before creating the optimizer.");
    if (!is_floating(p.dtype()))
      detail::throw_op_error(op, absl::StrCat("parameter ", i, " is not floating-point"),
                             detail::describe(p), "Only floating tensors can be optimized.");
    if (!p.is_leaf())
      detail::throw_op_error(op, absl::StrCat("parameter ", i, " is not a leaf tensor"),
                             detail::describe(p) + " from " + p.grad_fn_name(),
                             "Optimize the tensors you created; detach() a computed one and "
                             "call requires_grad_() on it.");
    // Shared weights appear twice in a list; they must be updated once.
    if (seen.insert(p.impl()).second) params_.push_back(p);
  }
  state_.resize(params_.size());
}

Optimizer::~Optimizer() = default;

void Optimizer::define_hyper(const std::string& name, double value, double lo, double hi,
                             bool hi_open) {
  Hyper h{value, Tensor(), lo, hi, hi_open};
  check_hyper(name, h, value);
  h.scalar = Tensor::scalar(value, DType::f64, params_.front().device());
  hypers_[name] = std::move(h);
}

void Optimizer::define_flag(const std::string& name, bool value) { flags_[name] = value; }

void Optimizer::check_hyper(const std::string& name, const Hyper& h, double value) const {
  const bool ok = !std::isnan(value) && value >= h.lo && (h.hi_open ? value < h.hi : value <= h.hi);
  if (!ok)
    detail::throw_op_error(
        "optim::" + name_, absl::StrCat("invalid ", name, " ", value), "",
        absl::StrCat(name, " must lie in ", range_text(h.lo, h.hi, h.hi_open), "."));
}

double Optimizer::hyper(const std::string& name) const {
  auto it = hypers_.find(name);
  if (it == hypers_.end())
    detail::throw_op_error("optim::" + name_ + "::hyper", "no hyperparameter named '" + name + "'",
                           "", "");
  return it->second.value;
}

const Tensor& Optimizer::hyper_scalar(const std::string& name) const {
  hyper(name);  // throws for an unknown name
  return hypers_.at(name).scalar;
}

void Optimizer::set_hyper(const std::string& name, double value) {
  hyper(name);
  Hyper& h = hypers_.at(name);
  check_hyper(name, h, value);
  h.value = value;
  // fill_ writes the device scalar without recording an op: the compiled
  // step graph stays valid. Ops traced before still see the old value.
  h.scalar.fill_(value);
}

bool Optimizer::flag(const std::string& name) const {
  auto it = flags_.find(name);
  if (it == flags_.end())
    detail::throw_op_error("optim::" + name_ + "::flag", "no flag named '" + name + "'", "", "");
  return it->second;
}

Tensor Optimizer::cast_value(const Tensor& value, DType dtype) {
  return detail::cast_to(value, dtype);
}

const Tensor& Optimizer::hyper_as(const std::string& name, DType dtype) {
  return derived_as("hyper:" + name, dtype, [&] { return hyper_scalar(name); });
}

Tensor& Optimizer::state_tensor(size_t index, const std::string& name, const TensorType& type) {
  auto& tensors = state_[index].tensors;
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    it = tensors.emplace(name, detail::materialized_zeros(type, params_[index].device())).first;
    it->second.impl()->set_input_role(InputRole::optimizer_state);
  }
  return it->second;
}

Tensor Optimizer::advance_step(size_t index) {
  Tensor& step = state_tensor(index, "step", TensorType{Shape{}, DType::i64});
  step.copy_(step + 1);
  return to(step, DType::f64);
}

Tensor Optimizer::state(size_t param_index, const std::string& name) const {
  if (param_index >= state_.size()) return Tensor();
  auto it = state_[param_index].tensors.find(name);
  return it == state_[param_index].tensors.end() ? Tensor() : it->second;
}

void Optimizer::follow_parameters() {
  const Device device = params_.front().device();
  bool moved = false;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].device() != device)
      detail::throw_op_error(
          "optim::" + name_ + "::step", "the parameters live on different devices",
          absl::StrCat("parameter 0 on ", device.to_string(), ", parameter ", i, " on ",
                       params_[i].device().to_string()),
          "Move the whole model with Module::to(), or use one optimizer per device.");
    for (const auto& [name, t] : state_[i].tensors) moved |= t.device() != device;
  }
  for (const auto& [name, h] : hypers_) moved |= h.scalar.device() != device;
  if (!moved) return;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < params_.size(); ++i)
    for (const auto& [name, t] : state_[i].tensors)
      tensors.emplace_back(absl::StrCat("state '", name, "' of parameter ", i), t);
  for (const auto& [name, h] : hypers_) tensors.emplace_back("hyperparameter " + name, h.scalar);
  detail::move_in_place("optim::" + name_ + "::step", tensors, device);
}

void Optimizer::step() {
  follow_parameters();
  NoGradGuard no_grad;
  // NaN guard: runs the step graph up to here and throws NanGuardError,
  // before anything of the update is recorded, on a non-finite gradient.
  detail::check_gradients_before_update(*this);
  step_values_.clear();
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor grad = params_[i].grad();
    if (!grad.defined()) continue;  // as PyTorch: no gradient, no update
    update(i, params_[i], grad);
  }
  step_values_.clear();  // the next step re-reads the scalars
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (set_to_none || !p.grad().defined())
      p.set_grad(Tensor());
    else
      p.set_grad(zeros_like(p));
  }
}

std::map<std::string, Tensor> Optimizer::state_dict() const {
  std::map<std::string, Tensor> out;
  const Device device = params_.front().device();
  for (const auto& [name, h] : hypers_)
    out[kGroupPrefix + name] = Tensor::scalar(h.value, DType::f64, device);
  for (const auto& [name, value] : flags_)
    out[kGroupPrefix + name] = from_vector(std::vector<bool>{value}, Shape{}, device);
  for (size_t i = 0; i < state_.size(); ++i)
    for (const auto& [name, t] : state_[i].tensors)
      out[absl::StrCat(kStatePrefix, i, ".", name)] = t;
  return out;
}

LoadReport Optimizer::load_state_dict(const std::map<std::string, Tensor>& dict, bool strict) {
  // 1. Check every entry against the optimizer (with the flags the dict
  //    brings, since they decide the state names) without changing it.
  // 2. Strict: throw on any problem. Then apply what is valid.
  LoadReport report;
  auto mismatch = [&](const std::string& key, const std::string& expected, const Tensor& got) {
    report.mismatched.push_back({key, expected, got.type().to_string()});
  };
  Flags new_flags = flags_;
  std::map<std::string, double> new_hypers;
  for (const auto& [name, value] : flags_) {
    const std::string key = kGroupPrefix + name;
    auto it = dict.find(key);
    if (it == dict.end()) {
      report.missing.push_back(key);
    } else if (!it->second.defined() || it->second.dim() != 0) {
      mismatch(key, "bool[]", it->second);
    } else {
      new_flags[name] = it->second.item() != 0;
    }
  }
  for (const auto& [name, h] : hypers_) {
    const std::string key = kGroupPrefix + name;
    auto it = dict.find(key);
    if (it == dict.end()) {
      report.missing.push_back(key);
      continue;
    }
    if (!it->second.defined() || it->second.dim() != 0) {
      mismatch(key, "f64[]", it->second);
      continue;
    }
    const double v = it->second.item();
    const bool ok = !std::isnan(v) && v >= h.lo && (h.hi_open ? v < h.hi : v <= h.hi);
    if (!ok) {
      report.mismatched.push_back(
          {key, "f64[] in " + range_text(h.lo, h.hi, h.hi_open), absl::StrCat("value ", v)});
      continue;
    }
    new_hypers[name] = v;
  }

  const std::vector<std::string> names = state_names(new_flags);
  const std::set<std::string> name_set(names.begin(), names.end());
  // Per parameter: the entries found, and whether all of them are valid.
  std::vector<std::map<std::string, Tensor>> found(params_.size());
  std::vector<std::set<std::string>> present(params_.size());  // found or mismatched
  std::vector<bool> valid(params_.size(), true);
  for (const auto& [key, t] : dict) {
    if (key.rfind(kGroupPrefix, 0) == 0) {
      const std::string name = key.substr(sizeof(kGroupPrefix) - 1);
      if (!flags_.count(name) && !hypers_.count(name)) report.unexpected.push_back(key);
      continue;
    }
    // "state.<i>.<name>"
    size_t index = 0;
    std::string name;
    bool parsed = false;
    if (key.rfind(kStatePrefix, 0) == 0) {
      const std::string rest = key.substr(sizeof(kStatePrefix) - 1);
      const size_t dot = rest.find('.');
      if (dot != std::string::npos && absl::SimpleAtoi(rest.substr(0, dot), &index) &&
          index < params_.size()) {
        name = rest.substr(dot + 1);
        parsed = name_set.count(name) > 0;
      }
    }
    if (!parsed) {
      report.unexpected.push_back(key);
      continue;
    }
    present[index].insert(name);
    const TensorType want =
        name == "step" ? TensorType{Shape{}, DType::i64} : params_[index].type();
    if (!t.defined() || t.shape() != want.shape) {
      if (t.defined())
        mismatch(key, want.to_string(), t);
      else
        report.mismatched.push_back({key, want.to_string(), "undefined"});
      valid[index] = false;
      continue;
    }
    found[index][name] = t;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    if (present[i].empty()) continue;
    for (const std::string& name : names) {
      if (present[i].count(name)) continue;
      report.missing.push_back(absl::StrCat(kStatePrefix, i, ".", name));
      valid[i] = false;
    }
  }
  if (strict && !report.ok())
    checkpoint::throw_load_error(absl::StrCat("optim::", name_, "::load_state_dict"),
                                 "the state dict does not match the optimizer", report);

  NoGradGuard no_grad;
  for (const auto& [name, value] : new_flags) flags_[name] = value;
  for (const auto& [name, value] : new_hypers) set_hyper(name, value);
  for (size_t i = 0; i < params_.size(); ++i) {
    if (found[i].empty() && valid[i]) {
      state_[i].tensors.clear();  // not stepped when saved: start afresh
      continue;
    }
    if (!valid[i]) continue;  // non-strict: keep the parameter's own state
    std::map<std::string, Tensor> tensors;
    for (const auto& [name, t] : found[i]) {
      const DType dtype = name == "step" ? DType::i64 : params_[i].dtype();
      // A new handle: later in-place updates must not write into the
      // caller's tensors.
      tensors[name] = detail::cast_to(t.detach(), dtype);
      tensors[name].impl()->set_input_role(InputRole::optimizer_state);
    }
    state_[i].tensors = std::move(tensors);
  }
  return report;
}

}  // namespace mstep::optim
