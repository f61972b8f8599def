// Steps with a linear layer's bias gradient beside its weight gradient
// (CudaViews step 4), in the forms the examples make, and a host run of a
// step's plan against ref. Shared by the bias-gradient and epilogue
// fallback tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda::testing {

// dW = x^T dz and db = sum(dz, 0): the sum after the matmul.
inline constexpr const char* kWeightAndBiasGrad = R"(
func.func @step(%x: tensor<64x96xf32>, %dz: tensor<64x80xf32>)
    -> (tensor<96x80xf32>, tensor<80xf32>) {
  %xt = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<64x96xf32> -> tensor<96x64xf32>
  %gw = mstep.matmul %xt, %dz : tensor<96x64xf32>, tensor<64x80xf32> -> tensor<96x80xf32>
  %gb = mstep.sum %dz {dims = array<i64: 0>, keepdim = false} : tensor<64x80xf32> -> tensor<80xf32>
  return %gw, %gb : tensor<96x80xf32>, tensor<80xf32>
}
)";

// mnist_mlp's form: the sum (keepdim, then a reshape that is the output)
// before the matmul, whose product a permute transposes (W is [out, in]):
// the call computes dz^T x, so dz is its transposed lhs.
inline constexpr const char* kMnistForm = R"(
func.func @step(%x: tensor<64x96xf32>, %dz: tensor<64x80xf32>)
    -> (tensor<80xf32>, tensor<80x96xf32>) {
  %s = mstep.sum %dz {dims = array<i64: 0>, keepdim = true} : tensor<64x80xf32> -> tensor<1x80xf32>
  %gb = mstep.reshape %s : tensor<1x80xf32> -> tensor<80xf32>
  %xt = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<64x96xf32> -> tensor<96x64xf32>
  %p = mstep.matmul %xt, %dz : tensor<96x64xf32>, tensor<64x80xf32> -> tensor<96x80xf32>
  %gw = mstep.permute %p {perm = array<i64: 1, 0>} : tensor<96x80xf32> -> tensor<80x96xf32>
  return %gb, %gw : tensor<80xf32>, tensor<80x96xf32>
}
)";

// GPT-mini's form: dz [4, 16, 80] summed over its first two dims, the
// matmul reading it through a reshape, and the sum an intermediate that a
// kernel reads later (so the call writes an arena value).
inline constexpr const char* kGptForm = R"(
func.func @step(%xt: tensor<96x64xf32>, %dz: tensor<4x16x80xf32>)
    -> (tensor<96x80xf32>, tensor<80xf32>) {
  %d = mstep.reshape %dz : tensor<4x16x80xf32> -> tensor<64x80xf32>
  %gw = mstep.matmul %xt, %d : tensor<96x64xf32>, tensor<64x80xf32> -> tensor<96x80xf32>
  %s = mstep.sum %dz {dims = array<i64: 0, 1>, keepdim = true} : tensor<4x16x80xf32> -> tensor<1x1x80xf32>
  %gb = mstep.reshape %s : tensor<1x1x80xf32> -> tensor<80xf32>
  %twice = mstep.add %gb, %gb : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  return %gw, %twice : tensor<96x80xf32>, tensor<80xf32>
}
)";

/// `text`'s step planned and run on the host against ref: floats within
/// 1e-5 * (1 + |ref|) (the sums accumulate in another order). `load`,
/// when given, changes the plan first (its epilogue fallbacks taken).
inline void expect_host_matches_ref(const char* text,
                                    const std::function<void(CudaPlan&)>& load = nullptr) {
  CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  if (load) ASSERT_NO_FATAL_FAILURE(load(compiled->plan));
  const CudaPlan& plan = compiled->plan;
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < plan.num_inputs; ++i)
    inputs.push_back(random_floats(plan.values[i].numel(), 11 + i));
  std::vector<std::vector<char>> values = host_values(plan, inputs);
  ASSERT_NO_FATAL_FAILURE(run_plan_on_host(step.context(), *compiled, values));
  std::vector<std::vector<char>> input_bytes(values.begin(), values.begin() + plan.num_inputs);
  auto ref = ref_outputs(step.module(), input_bytes);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(ref->size(), plan.outputs.size());
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const float* got = as<float>(values[plan.outputs[o]]);
    const float* want = as<float>((*ref)[o]);
    int wrong = 0;
    for (int64_t k = 0; k < plan.values[plan.outputs[o]].numel(); ++k)
      if (!(std::fabs(got[k] - want[k]) <= 1e-5f * (1 + std::fabs(want[k]))) && wrong++ < 3)
        ADD_FAILURE() << "output " << o << " [" << k << "] = " << got[k] << ", ref " << want[k];
  }
}

}  // namespace mstep::cuda::testing
