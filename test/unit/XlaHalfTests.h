// What the xla bf16 and f16 tests share: 16-bit inputs and leaves, a run
// on xla (which must call out for nothing) and on another backend, and a
// bit-for-bit comparison of the results (xla_bf16_test, xla_f16_test).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep::testing {

inline constexpr Device kXlaDevice{DeviceType::xla, 0};

/// sin-based values over a few binades (TestUtil.h's spread), scaled.
inline std::vector<float> spread_values(Shape s, int seed, double scale) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(scale * std::sin(0.731 * i + 1.37 * seed) *
                              (1 + 0.5 * std::cos(0.17 * i)));
  return v;
}

/// Values spread over a few binades, rounded to `dtype` on the way in.
inline Tensor half_input(Device d, Shape s, int seed, double scale, DType dtype) {
  return spread(d, s, seed, scale).to(dtype);
}

/// A leaf of `dtype` that requires grad: data (not an op's result, so an
/// optimizer's update of it fuses), the values of half_input rounded once.
inline Tensor half_leaf(Device d, Shape s, int seed, double scale, DType dtype) {
  return from_vector(spread_values(s, seed, scale), s, dtype, d).requires_grad_();
}

/// The optimizers the 16-bit update tests train with: SGD with momentum,
/// Nesterov and weight decay; Adam with amsgrad and weight decay; AdamW.
inline optim::SGD nesterov_sgd(std::vector<Tensor> p) {
  return optim::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
}
inline optim::Adam amsgrad_adam(std::vector<Tensor> p) {
  return optim::Adam(p, {.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
}
inline optim::AdamW decayed_adamw(std::vector<Tensor> p) {
  return optim::AdamW(p, {.lr = 0.01, .weight_decay = 0.1});
}

/// A 16-bit update test's results: `params` and every state of `opt` of
/// `dtype`, as floats (16-bit floats widen exactly), appended to `values`.
template <typename Optimizer>
void append_parameters_and_states(std::vector<std::vector<float>>& values,
                                  const std::vector<Tensor>& params, Optimizer& opt, DType dtype) {
  for (const Tensor& p : params) values.push_back(p.to(DType::f32).to_vector<float>());
  for (const auto& [name, value] : opt.state_dict()) {
    const Tensor state = value;
    if (name.rfind("state.", 0) == 0 && state.dtype() == dtype)
      values.push_back(state.to(DType::f32).to_vector<float>());
  }
}

/// `make(device)`'s results (each of `dtype`) as f32 (16-bit floats widen
/// exactly), on xla (whose step must call out for nothing and fall back
/// for nothing) and on `other`.
template <typename F>
std::pair<std::vector<std::vector<float>>, std::vector<std::vector<float>>>
on_xla_and(Device other, DType dtype, F make) {
  RecordSteps record;
  reset_metrics();
  std::vector<Tensor> xla = make(kXlaDevice);
  mark_step();
  EXPECT_THAT(callouts_of_last_step(), ::testing::IsEmpty());
  std::vector<Tensor> want = make(other);
  mark_step();
  auto values = [&](const std::vector<Tensor>& ts) {
    std::vector<std::vector<float>> out;
    for (const Tensor& t : ts) {
      EXPECT_EQ(t.dtype(), dtype);
      out.push_back(t.to(DType::f32).to_vector<float>());
    }
    return out;
  };
  std::vector<std::vector<float>> got = values(xla);
  EXPECT_EQ(metrics().fallbacks, 0);
  return {got, values(want)};
}

/// Equal bit for bit, a NaN equal to a NaN.
inline void expect_same(const std::vector<std::vector<float>>& got,
                        const std::vector<std::vector<float>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << "result " << i;
    for (size_t j = 0; j < got[i].size(); ++j) {
      if (std::isnan(want[i][j])) {
        EXPECT_TRUE(std::isnan(got[i][j])) << "result " << i << " element " << j;
        continue;
      }
      EXPECT_EQ(got[i][j], want[i][j]) << "result " << i << " element " << j;
    }
  }
}

} // namespace mstep::testing
