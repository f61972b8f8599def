// The MLP of the Gaudi HPU-Graphs MNIST example: Linear 784->128, ReLU,
// Dropout(0.5), Linear 128->10, log_softmax. Parameter names match the
// PyTorch module (fc1.weight, fc1.bias, fc2.weight, fc2.bias), so a
// PyTorch state_dict loads as is.
#pragma once

#include <memory>

#include "mstep/mstep.h"

namespace mstep::examples {

class Mlp : public nn::Module {
 public:
  explicit Mlp(int64_t in = 784, int64_t hidden = 128, int64_t classes = 10, double dropout = 0.5)
      : nn::Module("Mlp"),
        fc1(register_module("fc1", std::make_shared<nn::Linear>(in, hidden))),
        drop(register_module("dropout", std::make_shared<nn::Dropout>(dropout))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(hidden, classes))) {}

  /// x [N, in] -> log-probabilities [N, classes].
  Tensor forward(const Tensor& x) {
    return log_softmax((*fc2)((*drop)(relu((*fc1)(x)))), 1);
  }

  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::Linear> fc2;
};

}  // namespace mstep::examples
