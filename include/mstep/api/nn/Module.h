// nn::Module: the base of every layer, modelled on the libtorch C++
// frontend. A module registers its parameters, buffers and submodules by
// name, so state_dict() keys match PyTorch's ("fc1.weight",
// "blocks.0.qkv.bias").
//
// Registration stores a pointer to the member handle, not a copy: after
// `b->weight = a->weight` both modules share one parameter, and
// parameters() lists it once, so an optimizer updates it once.
// Modules therefore never move: create them with std::make_shared.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& type_name() const { return type_name_; }

  /// Parameters of this module and (recursively) its children, each once
  /// even when shared, in registration order; names are dotted paths.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;

  /// Training mode (dropout active) for this module and its children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Clears (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);

  /// Moves parameters, their gradients and buffers to `device` in place:
  /// every handle follows (an optimizer built before the move updates the
  /// moved parameters; its state follows at its next step()), and they
  /// keep requires_grad. A copy through the host; pending values are
  /// computed first. Nothing to move: a no-op. Throws, naming the tensor
  /// and both devices, inside a Graph capture or for a device with no
  /// backend built in; a Graph or graphed callable captured before the
  /// move refuses to replay (capture again on the new device).
  void to(Device device);
  /// Converts floating parameters and buffers to `dtype`.
  void to(DType dtype);

  /// Parameters and buffers by dotted name (PyTorch's state_dict).
  std::map<std::string, Tensor> state_dict() const;

 protected:
  /// Registers a member tensor as a parameter (requires_grad set).
  Tensor& register_parameter(const std::string& name, Tensor& member, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor& member);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  /// Every parameter slot, with its dotted name, in registration order.
  void collect(const std::string& prefix, bool recurse, bool buffers,
               std::vector<std::pair<std::string, Tensor*>>& out) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace mstep::nn
