// Finite-difference gradient checks in f64 (torch.autograd.gradcheck
// style) for the autograd unit tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "mstep/mstep.h"

namespace mstep::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Checks the gradient of L = sum(f(inputs) * w) with respect to every
/// f64 input, w a fixed pseudo-random weight, against central differences.
/// Non-f64 inputs (indices, masks) are passed through unchanged.
inline ::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                            double eps = 1e-6, double atol = 1e-5,
                                            double rtol = 1e-4) {
  std::vector<std::vector<double>> values;
  for (const Tensor& t : inputs) values.push_back(t.to_vector<double>());
  auto make = [&](size_t i, const std::vector<double>& v, bool grad) {
    Tensor t = inputs[i].dtype() == DType::f64 ? from_vector(v, inputs[i].shape()) : inputs[i];
    if (grad && inputs[i].dtype() == DType::f64) t.requires_grad_();
    return t;
  };
  // Analytic gradients.
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) leaves.push_back(make(i, values[i], true));
  Tensor y = f(leaves);
  std::vector<double> w(y.numel());
  for (size_t j = 0; j < w.size(); ++j) w[j] = std::sin(1.0 + 0.7 * j);
  Tensor wt = from_vector(w, y.shape(), y.dtype());
  sum(y * wt).backward();
  mark_step();
  auto loss_at = [&](size_t i, const std::vector<double>& v) {
    NoGradGuard no_grad;
    std::vector<Tensor> in;
    for (size_t k = 0; k < inputs.size(); ++k) in.push_back(make(k, k == i ? v : values[k], false));
    return sum(f(in) * wt).item();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DType::f64) continue;
    Tensor g = leaves[i].grad();
    std::vector<double> analytic =
        g.defined() ? g.to_vector<double>() : std::vector<double>(values[i].size(), 0.0);
    for (size_t j = 0; j < values[i].size(); ++j) {
      std::vector<double> v = values[i];
      v[j] += eps;
      const double up = loss_at(i, v);
      v[j] -= 2 * eps;
      const double down = loss_at(i, v);
      const double numeric = (up - down) / (2 * eps);
      if (std::fabs(numeric - analytic[j]) > atol + rtol * std::fabs(numeric))
        return ::testing::AssertionFailure()
               << "input " << i << " element " << j << ": analytic " << analytic[j]
               << ", numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace mstep::testing
