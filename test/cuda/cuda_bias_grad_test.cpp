// A linear layer's bias gradient fused into its weight-gradient matmul
// (CudaViews step 4): the sum of dz over its rows is written by the
// cuBLASLt call that computes x^T dz (the BGRADA / BGRADB epilogues), and
// launches nothing. Plans are checked for the step they make, and run on
// the host (host_matmul's bias gradient) against ref.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "test/cuda/BiasGradSteps.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using testing::plan_of;

using testing::kGptForm;
using testing::kMnistForm;
using testing::kWeightAndBiasGrad;

TEST(CudaBiasGrad, TheSumOfTheRhsIsTheCallsBiasGradient) {
  auto plan = plan_of(kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const MatmulShape& s = plan->matmuls[0].shape;
  EXPECT_EQ(s.bias_grad, MatmulBiasGrad::rhs);
  EXPECT_TRUE(s.transpose_a);
  EXPECT_EQ(cublaslt_epilogue(s), CUBLASLT_EPILOGUE_BGRADA); // mstep's B is cuBLASLt's A
  // One step, no kernel: the call reads x (the permute's value, an alias
  // of x read transposed) and dz, and writes both outputs.
  ASSERT_EQ(plan->launches.size(), 1u);
  ASSERT_EQ(plan->launches[0].args.size(), 2u);
  const CudaAlias* xt = plan->alias_of(plan->launches[0].args[0]);
  ASSERT_NE(xt, nullptr);
  EXPECT_EQ(xt->root, 0);
  EXPECT_EQ(plan->launches[0].args[1], 1);
  ASSERT_EQ(plan->launches[0].writes.size(), 2u);
  EXPECT_EQ(plan->launches[0].writes[0], plan->outputs[0]);
  EXPECT_EQ(plan->launches[0].writes[1], plan->outputs[1]);
  // Its kernels are the epilogue's fallback (the column sum's), which
  // runs only where cuBLASLt has no algorithm for it.
  EXPECT_FALSE(plan->matmuls[0].fallback.empty());
  EXPECT_EQ(plan->kernels.size(), plan->matmuls[0].fallback.size());
  EXPECT_THAT(describe_cuda_plan(*plan),
              HasSubstr("[64, 96] x [64, 80] f32, A transposed, bias grad of B"));
}

TEST(CudaBiasGrad, ATransposedResultMakesItTheLhsAndTheSumMayComeFirst) {
  auto plan = plan_of(kMnistForm);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  const MatmulShape& s = plan->matmuls[0].shape;
  // (x^T dz)^T = dz^T x: dz is the lhs, read transposed, summed over k.
  EXPECT_EQ(s.m, 80);
  EXPECT_EQ(s.n, 96);
  EXPECT_EQ(s.k, 64);
  EXPECT_TRUE(s.transpose_a);
  EXPECT_FALSE(s.transpose_b);
  EXPECT_EQ(s.bias_grad, MatmulBiasGrad::lhs);
  EXPECT_EQ(cublaslt_epilogue(s), CUBLASLT_EPILOGUE_BGRADB);
  ASSERT_EQ(plan->launches.size(), 1u);
  // It writes the gradient into output 0's buffer (the sum is an alias of
  // the reshape returned).
  ASSERT_EQ(plan->launches[0].writes.size(), 2u);
  const int grad = plan->launches[0].writes[1];
  const CudaAlias* alias = plan->alias_of(grad);
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->root, plan->outputs[0]);
  EXPECT_EQ(plan->launches[0].writes[0], plan->outputs[1]);
}

TEST(CudaBiasGrad, AnIntermediateGradientGetsArenaBytesOfItsOwn) {
  auto plan = plan_of(kGptForm);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls.size(), 1u);
  EXPECT_EQ(plan->matmuls[0].shape.bias_grad, MatmulBiasGrad::rhs);
  EXPECT_EQ(plan->matmuls[0].shape.k, 64);
  // The call, then the add's kernel.
  ASSERT_EQ(plan->launches.size(), 2u);
  ASSERT_EQ(plan->launches[0].writes.size(), 2u);
  const int grad = plan->launches[0].writes[1];
  ASSERT_GE(plan->arena_offsets[grad], 0);
  const int64_t begin = plan->arena_offsets[grad];
  const int64_t end = begin + static_cast<int64_t>(plan->values[grad].bytes());
  for (size_t v = 0; v < plan->values.size(); ++v)
    if (static_cast<int>(v) != grad && plan->arena_offsets[v] >= 0)
      EXPECT_FALSE(plan->arena_offsets[v] < end &&
                   begin < plan->arena_offsets[v] + static_cast<int64_t>(plan->values[v].bytes()))
          << "value %" << v << " shares the gradient's bytes";
  EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << validate_cuda_plan(*plan);
}

TEST(CudaBiasGrad, ASumAKernelReadsBeforeTheMatmulStaysASum) {
  // The sum's value is needed before the matmul could write it.
  auto plan = plan_of(R"(
func.func @step(%x: tensor<64x96xf32>, %dz: tensor<64x80xf32>)
    -> (tensor<96x80xf32>, tensor<80xf32>) {
  %gb = mstep.sum %dz {dims = array<i64: 0>, keepdim = false} : tensor<64x80xf32> -> tensor<80xf32>
  %twice = mstep.add %gb, %gb : tensor<80xf32>, tensor<80xf32> -> tensor<80xf32>
  %xt = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<64x96xf32> -> tensor<96x64xf32>
  %gw = mstep.matmul %xt, %dz : tensor<96x64xf32>, tensor<64x80xf32> -> tensor<96x80xf32>
  return %gw, %twice : tensor<96x80xf32>, tensor<80xf32>
}
)");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->matmuls[0].shape.bias_grad, MatmulBiasGrad::none);
  EXPECT_EQ(plan->launches.back().writes.size(), 1u);
}

TEST(CudaBiasGrad, ASumOverOtherDimsOrOfAnotherValueIsNoBiasGradient) {
  // Summed over the last dim ([64]) it is not the sum over k of [64, 80].
  auto plan = plan_of(R"(
func.func @step(%x: tensor<64x96xf32>, %dz: tensor<64x80xf32>)
    -> (tensor<96x80xf32>, tensor<64xf32>) {
  %xt = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<64x96xf32> -> tensor<96x64xf32>
  %gw = mstep.matmul %xt, %dz : tensor<96x64xf32>, tensor<64x80xf32> -> tensor<96x80xf32>
  %gb = mstep.sum %dz {dims = array<i64: 1>, keepdim = false} : tensor<64x80xf32> -> tensor<64xf32>
  return %gw, %gb : tensor<96x80xf32>, tensor<64xf32>
}
)");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->matmuls[0].shape.bias_grad, MatmulBiasGrad::none);
  EXPECT_FALSE(plan->kernels.empty());
}

TEST(CudaBiasGrad, TheStoredFormKeepsIt) {
  auto plan = plan_of(kMnistForm);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto back = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *plan);
}

TEST(CudaBiasGrad, APlanWithTheGradientButOneWriteIsRefused) {
  auto plan = plan_of(kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  plan->launches[0].writes.pop_back();
  EXPECT_THAT(validate_cuda_plan(*plan).message(),
              HasSubstr("has 2 operands and 1 results; it needs 2 and 2"));
  // A bias gradient in a batched call (cuBLASLt would need a gradient per
  // matrix) is refused too, naming the matmul.
  plan = plan_of(kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok());
  plan->matmuls[0].batch = 2;
  plan->matmuls[0].c_stride = 96 * 80;
  EXPECT_THAT(validate_cuda_plan(*plan).message(),
              HasSubstr("a bias gradient goes with no bias, activation or batch"));
}

TEST(CudaBiasGrad, EachFormOnTheHostMatchesRef) {
  for (const char* text : {kWeightAndBiasGrad, kMnistForm, kGptForm}) {
    SCOPED_TRACE(text);
    testing::expect_host_matches_ref(text);
  }
}

} // namespace
} // namespace mstep::cuda
