// nn::Layer: a Module with one tensor in and one tensor out, the interface
// Sequential chains. Modules whose forward takes more (MultiheadAttention)
// derive from Module directly.
#pragma once

#include <string>
#include <utility>

#include "mstep/api/nn/Module.h"

namespace mstep::nn {

class Layer : public Module {
 public:
  using Module::Module;

  virtual Tensor forward(const Tensor& input) = 0;
  Tensor operator()(const Tensor& input) { return forward(input); }

  /// The constructor arguments as PyTorch prints them
  /// ("Linear(in_features=4, out_features=3, bias=true)"); error messages
  /// name the layer with it.
  virtual std::string repr() const { return type_name() + "()"; }
};

}  // namespace mstep::nn
