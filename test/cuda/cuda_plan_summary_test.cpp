// summarize_cuda_plan (CudaPlanSummary.h): a plan's steps counted by kind,
// the copy kernels and the row-wise ops' kernels told by their origin.
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaPlanSummary.h"

namespace mstep::cuda {
namespace {

TEST(CudaPlanSummary, CountsStepsByKindAndCopiesByOrigin) {
  CudaPlan plan;
  for (const char* origin : {"mstep.permute #1", "mstep.reshape #2", "mstep.fusion #3",
                             "mstep.layer_norm #4", "mstep.slice_scatter #5", "mstep.sum #6",
                             "mstep.summary #7", "row group #8 over [4, 64] (1 mstep.mean)"}) {
    CudaKernelInfo kernel;
    kernel.origin = origin;
    plan.kernels.push_back(kernel);
  }
  plan.kernels[5].grid = {8, 2, 1}; // a column sum's pass 1: 16 blocks of 256
  plan.kernels[5].block = {256, 1, 1};
  plan.matmuls.resize(3);
  plan.matmuls[1].shape.transpose_b = true; // a transpose folded into the call
  plan.matmuls[1].shape.bias = true;        // and a bias epilogue
  plan.matmuls[2].shape.bias_grad = MatmulBiasGrad::rhs; // a bias gradient's epilogue
  plan.aliases.push_back({.value = 3, .root = 1});
  plan.attentions.resize(1);
  for (int k = 0; k < 8; ++k) plan.launches.push_back({.kernel = k});
  plan.launches.push_back({.kernel = 0}); // the permute kernel launched twice
  plan.launches.push_back({.matmul = 0});
  plan.launches.push_back({.matmul = 1});
  plan.launches.push_back({.matmul = 2});
  plan.launches.push_back({.attention = 0});
  plan.arena_bytes = 3 * 1024 * 1024 / 2;
  const CudaPlanSummary s = summarize_cuda_plan(plan);
  EXPECT_EQ(s.steps, 13);
  EXPECT_EQ(s.launches, 9);
  EXPECT_EQ(s.fused_launches, 1);  // the row group (its mean is no mstep.mean launch)
  EXPECT_EQ(s.sum_launches, 1); // not "mstep.summary"
  EXPECT_EQ(s.sum_threads, 16 * 256);
  EXPECT_EQ(s.copies, 3); // the permute twice and the reshape; not slice_scatter
  EXPECT_EQ(s.row_launches, 1);
  EXPECT_EQ(s.cublaslt, 3);
  EXPECT_EQ(s.transposed, 1);
  EXPECT_EQ(s.epilogues, 2);
  EXPECT_EQ(s.cudnn, 1);
  EXPECT_EQ(s.aliases, 1);
  EXPECT_EQ(
      describe_cuda_plan_summary(s),
      "13 steps: 9 kernel launches (3 copies, 1 row-wise, 1 fused), 3 cuBLASLt (1 transposed, 2 "
      "with an epilogue), 1 cuDNN; 1 aliases; arena 1.5 MiB; sum/mean: 1 launches, 4096 threads");
}

} // namespace
} // namespace mstep::cuda
