// nn::Module registration, traversal, modes and state_dict.
#include "mstep/api/nn/Module.h"

#include <unordered_set>

#include "lib/api/DeviceTransfer.h"
#include "lib/api/OpBuilder.h"
#include "mstep/mstep.h"

namespace mstep::nn {

Tensor& Module::register_parameter(const std::string& name, Tensor& member, bool requires_grad) {
  if (!member.defined())
    detail::throw_op_error("Module::register_parameter",
                           "parameter '" + name + "' is undefined", type_name_,
                           "Initialize the tensor before registering it.");
  if (requires_grad) member.requires_grad_();
  parameters_.emplace_back(name, &member);
  return member;
}

Tensor& Module::register_buffer(const std::string& name, Tensor& member) {
  buffers_.emplace_back(name, &member);
  return member;
}

void Module::collect(const std::string& prefix, bool recurse, bool buffers,
                     std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (const auto& [name, slot] : buffers ? buffers_ : parameters_)
    if (slot->defined()) out.emplace_back(prefix + name, slot);
  if (!recurse) return;
  for (const auto& [name, child] : children_)
    if (child) child->collect(prefix + name + ".", true, buffers, out);
}

namespace {
/// Keeps the first name of each distinct tensor (shared parameters).
std::vector<std::pair<std::string, Tensor>> unique_tensors(
    const std::vector<std::pair<std::string, Tensor*>>& slots) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& [name, slot] : slots)
    if (seen.insert(slot->impl()).second) out.emplace_back(name, *slot);
  return out;
}
}  // namespace

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", recurse, false, slots);
  return unique_tensors(slots);
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", recurse, true, slots);
  return unique_tensors(slots);
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const {
  return children_;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_)
    if (child) child->train(on);
}

void Module::zero_grad(bool set_to_none) {
  for (Tensor& p : parameters()) {
    if (set_to_none || !p.grad().defined()) {
      p.set_grad(Tensor());
    } else {
      p.set_grad(zeros_like(p));
    }
  }
}

namespace {
/// Replaces every slot's tensor with `convert(tensor)`, keeping sharing:
/// slots that held one tensor hold one converted tensor afterwards.
template <typename F>
void convert_slots(const std::vector<std::pair<std::string, Tensor*>>& slots, bool parameters,
                   F convert) {
  std::map<const TensorImpl*, Tensor> done;
  for (const auto& [name, slot] : slots) {
    auto it = done.find(slot->impl());
    if (it == done.end()) {
      NoGradGuard no_grad;
      Tensor converted = convert(*slot).detach();
      if (parameters && slot->requires_grad()) converted.requires_grad_();
      it = done.emplace(slot->impl(), converted).first;
    }
    *slot = it->second;
  }
}
}  // namespace

void Module::to(Device device) {
  // In place: parameters keep their identity, so an optimizer built before
  // the move updates the moved tensors (its state follows at step()).
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", true, false, slots);
  collect("", true, true, slots);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, slot] : slots) tensors.emplace_back(name, *slot);
  detail::move_in_place("Module::to", tensors, device);
}

void Module::to(DType dtype) {
  auto cast = [dtype](const Tensor& t) { return is_floating(t.dtype()) ? mstep::to(t, dtype) : t; };
  std::vector<std::pair<std::string, Tensor*>> params, buffers;
  collect("", true, false, params);
  collect("", true, true, buffers);
  convert_slots(params, true, cast);
  convert_slots(buffers, false, cast);
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect("", true, false, slots);
  collect("", true, true, slots);
  for (const auto& [name, slot] : slots) out.emplace(name, *slot);
  return out;
}

}  // namespace mstep::nn
