// Containers: Sequential chains Layers; ModuleList holds any Modules for
// the caller to index. Children are named "0", "1", ... so parameter names
// match PyTorch's ("0.weight", "2.bias").
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "mstep/api/nn/Layer.h"

namespace mstep::nn {

/// Applies its layers in order: Sequential(a, b, c)(x) == c(b(a(x))).
/// A Sequential is itself a Layer, so Sequentials nest.
class Sequential : public Layer {
 public:
  Sequential() : Layer("Sequential") {}
  template <std::derived_from<Layer>... L>
  explicit Sequential(std::shared_ptr<L>... layers) : Sequential() {
    (push_back(std::move(layers)), ...);
  }

  /// Appends `layer` as child str(size()).
  void push_back(std::shared_ptr<Layer> layer);
  size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }
  /// Layer i; throws when out of range.
  const std::shared_ptr<Layer>& operator[](size_t i) const;
  /// Layer i as `T`; throws when it is another type.
  template <typename T> std::shared_ptr<T> at(size_t i) const {
    auto typed = std::dynamic_pointer_cast<T>((*this)[i]);
    if (!typed) bad_type(i);
    return typed;
  }
  auto begin() const { return layers_.begin(); }
  auto end() const { return layers_.end(); }

  /// The input unchanged when empty (as PyTorch).
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;

 private:
  [[noreturn]] void bad_type(size_t i) const;
  std::vector<std::shared_ptr<Layer>> layers_;
};

/// An indexable list of modules; it has no forward (the owner decides how
/// to call them), as torch.nn.ModuleList.
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  template <std::derived_from<Module>... M>
  explicit ModuleList(std::shared_ptr<M>... modules) : ModuleList() {
    (push_back(std::move(modules)), ...);
  }

  /// Appends `module` as child str(size()).
  void push_back(std::shared_ptr<Module> module);
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  template <typename T> std::shared_ptr<T> at(size_t i) const {
    auto typed = std::dynamic_pointer_cast<T>((*this)[i]);
    if (!typed) bad_type(i);
    return typed;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  [[noreturn]] void bad_type(size_t i) const;
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace mstep::nn
