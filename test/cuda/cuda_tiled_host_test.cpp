// Host numerics of the cuda kernels without a GPU (issue 21 §3): each op's
// tiled loop nest, taken right before the GPU mapping (the one-dimension
// collapse of its loops, tiles of 256 lanes, the guard of the last partial
// tile, the broadcast index arithmetic), is lowered for this CPU, JIT-run
// on random inputs and compared with the same chain computed directly in
// C++ here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "test/cuda/CudaStepText.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using testing::as;
using testing::host_values;
using testing::random_floats;
using testing::run_tiled_on_host;

TEST(CudaTiledHost, BroadcastFusionWithAPartialLastTile) {
  testing::CudaStepContext step(testing::kFusionStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> a = random_floats(37 * 300, 1), b = random_floats(300, 2);
  auto values = host_values(compiled->plan, {a, b});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* s = as<float>(values[compiled->plan.outputs[0]]);
  const bool* m = as<bool>(values[compiled->plan.outputs[1]]);
  for (int r = 0; r < 37; ++r)
    for (int c = 0; c < 300; ++c) {
      const float expected = a[r * 300 + c] + std::exp(b[c]);
      ASSERT_NEAR(s[r * 300 + c], expected, 1e-6f * (1 + std::fabs(expected))) << r << "," << c;
      ASSERT_EQ(m[r * 300 + c], expected > 0.f) << r << "," << c;
    }
}

TEST(CudaTiledHost, UnfusedChainThroughIntermediateValues) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> x = random_floats(8 * 64, 3), y = random_floats(8 * 64, 4);
  auto values = host_values(compiled->plan, {x, y});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* t = as<float>(values[compiled->plan.outputs[0]]);
  const float* e = as<float>(values[compiled->plan.outputs[1]]);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(e[i], std::exp(x[i]), 1e-6f * std::exp(x[i])) << i;
    const float expected = std::tanh(std::exp(x[i]) * y[i]);
    ASSERT_NEAR(t[i], expected, 2e-6f) << i;
  }
}

/// The first form of row reductions (one thread per row, through
/// mstep-lower-to-linalg), which MSTEP_CUDA_ROW_REDUCTION=thread keeps
/// (the default, block, is cuda_block_rows_host_test.cpp's).
CudaCompileOptions thread_per_row() {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = CudaRowReduction::thread;
  return options;
}

TEST(CudaTiledHost, RowReductionOneThreadPerRow) {
  testing::CudaStepContext step(testing::kRowSumStep);
  auto compiled = compile_cuda_step(step.module(), thread_per_row());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> x = random_floats(300 * 33, 5);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  // A fill then the accumulation: two launches, each row one thread.
  ASSERT_EQ(compiled->plan.launches.size(), 2u);
  const float* sum = as<float>(values[compiled->plan.outputs[0]]);
  for (int r = 0; r < 300; ++r) {
    double expected = 0;
    for (int c = 0; c < 33; ++c) expected += x[r * 33 + c];
    ASSERT_NEAR(sum[r], expected, 1e-5) << r;
  }
}

TEST(CudaTiledHost, ColumnSumOneThreadPerColumn) {
  // The first form (MSTEP_CUDA_COLUMN_REDUCTION=thread; the default,
  // split, is cuda_column_sums_host_test.cpp's).
  testing::CudaStepContext step(testing::kColumnSumStep);
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.column_reduction = CudaColumnReduction::thread;
  auto compiled = compile_cuda_step(step.module(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // The accumulation runs on 300 threads (two blocks), not on one.
  ASSERT_EQ(compiled->plan.launches.size(), 2u);
  EXPECT_THAT(compiled->plan.kernels[1].grid, ::testing::ElementsAre(2u, 1u, 1u));
  const std::vector<float> x = random_floats(33 * 300, 7);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* sum = as<float>(values[compiled->plan.outputs[0]]);
  for (int c = 0; c < 300; ++c) {
    double expected = 0;
    for (int r = 0; r < 33; ++r) expected += x[r * 300 + c];
    ASSERT_NEAR(sum[c], expected, 1e-5) << c;
  }
}

TEST(CudaTiledHost, SumToAScalarOnOneThread) {
  testing::CudaStepContext step(testing::kScalarSumStep);
  auto compiled = compile_cuda_step(step.module(), thread_per_row());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const CudaKernelInfo& kernel : compiled->plan.kernels) {
    EXPECT_THAT(kernel.grid, ::testing::ElementsAre(1u, 1u, 1u));
    EXPECT_THAT(kernel.block, ::testing::ElementsAre(1u, 1u, 1u));
  }
  const std::vector<float> x = random_floats(7 * 45, 6);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  double expected = 0;
  for (float v : x) expected += v;
  EXPECT_NEAR(*as<float>(values[compiled->plan.outputs[0]]), expected, 1e-4);
}

}  // namespace
}  // namespace mstep::cuda
