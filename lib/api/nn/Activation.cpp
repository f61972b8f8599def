// nn::ReLU, nn::GELU, nn::SiLU and nn::Dropout: thin layers over the ops.
#include "mstep/api/nn/Activation.h"

#include <cmath>

#include "lib/api/nn/ModuleChecks.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/NN.h"

namespace mstep::nn {

Tensor ReLU::forward(const Tensor& input) {
  checks::require_defined(*this, input, "input");
  return relu(input);
}

GELU::GELU(std::string approximate) : Layer("GELU"), approximate_(std::move(approximate)) {
  // Checked here rather than at the first forward, where the cause is far.
  if (approximate_ != "none" && approximate_ != "tanh")
    checks::fail("GELU", "approximate must be \"none\" or \"tanh\"",
                 absl::StrCat("\"", approximate_, "\""),
                 "Use \"none\" for the exact erf form, \"tanh\" for the approximation.");
}

std::string GELU::repr() const { return absl::StrCat("GELU(approximate='", approximate_, "')"); }

Tensor GELU::forward(const Tensor& input) {
  checks::require_defined(*this, input, "input");
  return gelu(input, approximate_);
}

Tensor SiLU::forward(const Tensor& input) {
  checks::require_defined(*this, input, "input");
  return silu(input);
}

Dropout::Dropout(double p) : Layer("Dropout"), p_(p) {
  if (!(p >= 0.0 && p <= 1.0))
    checks::fail("Dropout", "p must be in [0, 1]", absl::StrCat("p ", p),
                 "Pass the probability of zeroing an element.");
}

std::string Dropout::repr() const { return absl::StrCat("Dropout(p=", p_, ")"); }

Tensor Dropout::forward(const Tensor& input) {
  checks::require_defined(*this, input, "input");
  return dropout(input, p_, is_training());
}

}  // namespace mstep::nn
