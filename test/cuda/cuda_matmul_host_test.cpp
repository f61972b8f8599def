// cuBLASLt steps on the host (host_matmul, as the call computes them)
// against ref: strided batches whose batch dims broadcast (a stride of 0),
// and a bf16 linear whose bf16 bias and ReLU are the call's epilogue.
#include <gtest/gtest.h>

#include <cmath>

#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

/// `text`'s step, planned as one cuBLASLt step, run on the host against
/// ref on inputs of type T: elements within `tolerance` * (1 + |ref|).
template <typename T> void expect_one_call_matches_ref(const char* text, float tolerance) {
  testing::CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_EQ(plan.launches.size(), 1u);
  ASSERT_GE(plan.launches[0].matmul, 0);
  std::vector<std::vector<T>> inputs;
  for (size_t i = 0; i < plan.num_inputs; ++i) {
    std::vector<float> floats = testing::random_floats(plan.values[i].numel(), 5 + i);
    inputs.emplace_back(floats.begin(), floats.end());
  }
  std::vector<std::vector<char>> values = testing::host_values<T>(plan, inputs);
  ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));
  std::vector<std::vector<char>> input_bytes(values.begin(), values.begin() + plan.num_inputs);
  auto ref = testing::ref_outputs(step.module(), input_bytes);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const T* got = testing::as<T>(values[plan.outputs[0]]);
  const T* want = testing::as<T>((*ref)[0]);
  int wrong = 0;
  for (int64_t k = 0; k < plan.values[plan.outputs[0]].numel(); ++k) {
    const float g = float(got[k]), w = float(want[k]);
    if (!(std::fabs(g - w) <= tolerance * (1 + std::fabs(w))) && wrong++ < 3)
      ADD_FAILURE() << "[" << k << "] = " << g << ", ref " << w;
  }
}

TEST(CudaMatmulHost, BatchDimsThatBroadcastAreOneCallWithAStrideOfZero) {
  // rhs shared ([1, ...]), lhs shared ([1, ...]), a 2-D lhs, two batch dims.
  for (const char* text : {R"(
func.func @step(%a: tensor<4x8x16xf32>, %b: tensor<1x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x8x16xf32>, tensor<1x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
})",
                           R"(
func.func @step(%a: tensor<1x8x16xf32>, %b: tensor<4x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<1x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
})",
                           R"(
func.func @step(%a: tensor<8x16xf32>, %b: tensor<2x3x16x32xf32>) -> tensor<2x3x8x32xf32> {
  %0 = mstep.matmul %a, %b : tensor<8x16xf32>, tensor<2x3x16x32xf32> -> tensor<2x3x8x32xf32>
  return %0 : tensor<2x3x8x32xf32>
})"}) {
    SCOPED_TRACE(text);
    // 16-term dot products of values under 2: a rounding or two apart.
    expect_one_call_matches_ref<float>(text, 2e-6f);
  }
}

TEST(CudaMatmulHost, ABf16LinearWithItsBiasAndReluInTheEpilogueMatchesRef) {
  // cuBLASLt rounds once (f32 accumulation, bias and ReLU, then bf16); ref
  // rounds the product and the sum: at most two bf16 roundings apart
  // (2^-8 each, relative).
  expect_one_call_matches_ref<BFloat16>(R"(
func.func @step(%x: tensor<16x32xbf16>, %w: tensor<32x24xbf16>, %b: tensor<24xbf16>)
    -> tensor<16x24xbf16> {
  %0 = mstep.matmul %x, %w : tensor<16x32xbf16>, tensor<32x24xbf16> -> tensor<16x24xbf16>
  %1 = mstep.add %0, %b : tensor<16x24xbf16>, tensor<24xbf16> -> tensor<16x24xbf16>
  %2 = mstep.relu %1 : tensor<16x24xbf16>
  return %2 : tensor<16x24xbf16>
})",
                                        1.0f / 128);
}

} // namespace
} // namespace mstep::cuda
