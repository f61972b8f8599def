// Casts to bf16 / f16 in the cpu backend's fusion code (shared by xla)
// round as ref and PyTorch do: an f64 (or an integer) goes to f32 first and
// then to 16 bits (the 16-bit types convert from float), two roundings.
// - A cast of values halfway between two bf16 / f16 numbers after the f32
//   rounding (and just above halfway before it) gives PyTorch 1.13's value
//   (torch.tensor(v, dtype=float64).to(bfloat16); one direct rounding would
//   round up instead).
// - An optimizer update of bf16 / f16 parameters that mstep-fuse-optimizer
//   leaves as separate ops (the parameter is an op's result in that step,
//   not data) casts its f64 hyperparameters (lr, momentum, ...) in a fusion:
//   a direct f64 -> bf16 truncf lowered to `__truncdfbf2`, which does not
//   resolve, and the step failed to load. Each update op rounds once on all
//   three backends (the fusion code widens each op to f32, as ref's
//   kernels), so three steps equal ref bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaHalfTests.h"

namespace mstep {
namespace {

constexpr Device kRef{DeviceType::ref, 0};

/// Three steps of `make_optimizer` on parameters of `dtype` that are an
/// op's result (a cast) when the first step is traced: the parameters and
/// every state of `dtype`, as floats.
template <typename Make>
std::vector<std::vector<float>> train(Device d, DType dtype, Make make_optimizer) {
  std::vector<Tensor> params = {testing::half_input(d, {17, 33}, 1, 1.0, dtype).requires_grad_(),
                                testing::half_input(d, {33}, 2, 0.5, dtype).requires_grad_()};
  auto opt = make_optimizer(params);
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    (sum(params[0] * testing::half_input(d, {17, 33}, 3, 1.0, dtype)) +
     sum(params[1] * params[1]))
        .backward();
    opt.step();
    mark_step();
  }
  std::vector<std::vector<float>> values;
  testing::append_parameters_and_states(values, params, opt, dtype);
  return values;
}

template <typename Make> void expect_equals_ref(Device d, DType dtype, Make make) {
  SCOPED_TRACE(std::string(device_type_name(d.type)) + " " + std::string(dtype_name(dtype)));
  testing::expect_same(train(d, dtype, make), train(kRef, dtype, make));
}

class HalfCastRounding : public ::testing::TestWithParam<DeviceType> {};

TEST_P(HalfCastRounding, RoundsThroughF32AsPyTorch) {
  const Device d{GetParam(), 0};
  // bf16 keeps 8 significant bits, f16 11: f32 drops the 2^-30 of
  // 1 + 2^-8 + 2^-30 (bf16) and 1 + 2^-11 + 2^-30 (f16), which leaves a tie
  // that goes to the even 1; 1 + 3 (that - 1) ties up either way.
  const double above_bf16 = 1 + 0x1p-8 + 0x1p-30, above_f16 = 1 + 0x1p-11 + 0x1p-30;
  // 2^24 + 2^16 + 1: f32 ties it to even, 2^24 + 2^16, then bf16 to 2^24.
  const int64_t big = (int64_t{1} << 24) + (1 << 16) + 1;
  for (DType dtype : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const double above = dtype == DType::bf16 ? above_bf16 : above_f16;
    // PyTorch 1.13's x.to(torch.bfloat16) / x.to(torch.float16) of these.
    const std::vector<float> want_f64 = {1.0f, -1.0f,
                                         dtype == DType::bf16 ? 1 + 0x1p-6f : 1 + 0x1p-9f};
    reset_metrics();
    Tensor x = from_vector(std::vector<double>{above, -above, 1 + 3 * (above - 1)}, {3}, {}, d);
    Tensor y = (x * 1.0).to(dtype);
    std::vector<Tensor> outs = {y};
    Tensor i64 = from_vector(std::vector<int64_t>{big, -big}, {2}, {}, d);
    Tensor i32 = from_vector(std::vector<int32_t>{static_cast<int32_t>(big)}, {1}, {}, d);
    if (dtype == DType::bf16) {
      outs.push_back((i64 + 0).to(dtype));
      outs.push_back((i32 + 0).to(dtype));
    }
    mark_step();
    EXPECT_EQ(metrics().fallbacks, 0);
    EXPECT_EQ(outs[0].to(DType::f32).to_vector<float>(), want_f64);
    if (dtype == DType::bf16) {
      EXPECT_EQ(outs[1].to(DType::f32).to_vector<float>(),
                (std::vector<float>{0x1p24f, -0x1p24f}));
      EXPECT_EQ(outs[2].to(DType::f32).to_vector<float>(), (std::vector<float>{0x1p24f}));
    }
  }
}

class UnfusedHalfUpdate : public ::testing::TestWithParam<DeviceType> {};

TEST_P(UnfusedHalfUpdate, LoadsAndEqualsRefBitForBit) {
  const Device d{GetParam(), 0};
  for (DType dtype : {DType::bf16, DType::f16}) {
    expect_equals_ref(d, dtype, testing::nesterov_sgd);
    expect_equals_ref(d, dtype, testing::amsgrad_adam);
    expect_equals_ref(d, dtype, testing::decayed_adamw);
  }
}

INSTANTIATE_TEST_SUITE_P(RefCpuAndXla, HalfCastRounding,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu, DeviceType::xla),
                         [](const auto& info) {
                           return std::string(device_type_name(info.param));
                         });
INSTANTIATE_TEST_SUITE_P(CpuAndXla, UnfusedHalfUpdate,
                         ::testing::Values(DeviceType::cpu, DeviceType::xla),
                         [](const auto& info) {
                           return std::string(device_type_name(info.param));
                         });

} // namespace
} // namespace mstep
