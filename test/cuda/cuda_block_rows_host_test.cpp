// Host numerics of the block-wide row reductions (CudaBlockRows.h,
// MSTEP_CUDA_ROW_REDUCTION=block; fused, the default, has the same kernels
// for ops alone on their rows): softmax, log_softmax,
// layer_norm, rms_norm and nll_loss's sum with a block of threads per row.
// Each step's tiled loop nest (the phases of each block, run one after
// the other) runs on this CPU against ref, and the same step compiled with
// one thread per row (=thread) gives the same bytes. The statistics are
// f64 sums in another order than ref's (strided partials, then a tree);
// rounded once to f32 they are expected equal to ref's here (a difference
// needs an f64 sum within an f64 rounding of an f32 tie).
//
// What only a GPU can show (the barriers between phases, the shared
// memory, the timing) is for scripts/gpu_check.sh: its training steps are
// compiled with the default, and --bench times it against block and the
// first forms (thread).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "test/cuda/HostStepRun.h"
#include "test/cuda/RefOracle.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<char> bytes_of(const std::vector<float>& values) {
  std::vector<char> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

CudaCompileOptions with_rows(CudaRowReduction form) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = form;
  return options;
}

using HostRun = testing::HostStepRun;

/// A step compiled with `form`, its tiled nests run on the host.
HostRun run_host(const char* text, const std::vector<std::vector<char>>& inputs,
                 CudaRowReduction form) {
  return testing::run_step_on_host(text, inputs, with_rows(form));
}

/// Block and thread forms against ref, byte for byte; the block form's run.
HostRun expect_both_forms_are_refs(const char* text, const std::vector<std::vector<char>>& inputs) {
  HostRun block = run_host(text, inputs, CudaRowReduction::block);
  HostRun thread = run_host(text, inputs, CudaRowReduction::thread);
  testing::CudaStepContext step(text);
  auto ref = testing::ref_outputs(step.module(), inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (!ref.ok()) return block;
  EXPECT_EQ(block.outputs.size(), ref->size());
  EXPECT_EQ(thread.outputs.size(), ref->size());
  for (size_t o = 0; o < ref->size() && o < block.outputs.size() && o < thread.outputs.size(); ++o) {
    EXPECT_TRUE(block.outputs[o] == (*ref)[o]) << "output " << o << ": block form differs from ref";
    EXPECT_TRUE(thread.outputs[o] == (*ref)[o]) << "output " << o << ": thread form differs from ref";
  }
  return block;
}

TEST(CudaBlockRowsHost, SoftmaxAndLogSoftmaxOfLongRowsAreOneBlockPerRow) {
  // 37 rows of 1000: 4 elements per thread and a partial last stride;
  // a -inf, a large value and a NaN (which ref's max skips and its sum
  // spreads over the row).
  std::vector<float> x = testing::random_floats(37 * 1000, 40);
  x[1000 * 2 + 17] = -INFINITY;
  x[1000 * 5 + 999] = 80.f;
  x[1000 * 9 + 300] = NAN;
  const HostRun run = expect_both_forms_are_refs(R"(
func.func @step(%x: tensor<37x1000xf32>) -> (tensor<37x1000xf32>, tensor<37x1000xf32>) {
  %p = mstep.softmax %x {dim = 1 : i64} : tensor<37x1000xf32>
  %l = mstep.log_softmax %x {dim = 1 : i64} : tensor<37x1000xf32>
  return %p, %l : tensor<37x1000xf32>, tensor<37x1000xf32>
})",
                                                 {bytes_of(x)});
  ASSERT_EQ(run.plan.kernels.size(), 2u);
  for (const CudaKernelInfo& kernel : run.plan.kernels) {
    EXPECT_THAT(kernel.grid, ElementsAre(37u, 1u, 1u)) << kernel.name;
    EXPECT_THAT(kernel.block, ElementsAre(256u, 1u, 1u)) << kernel.name;
  }
  // The tiled nest is in block form: a block-rows loop, shared buffers.
  ASSERT_FALSE(run.tiled.empty());
  EXPECT_THAT(run.tiled[0], HasSubstr("mstep_block_threads = 256"));
  EXPECT_THAT(run.tiled[0], HasSubstr("memref.alloca() : memref<256xf64>"));
}

TEST(CudaBlockRowsHost, SoftmaxOverAMiddleDimAndRowsShorterThanTheBlock) {
  // dim 1 of [3, 40, 7]: 21 rows of 40 elements 7 apart, a block of 64
  // (24 threads without an element); rows of 20 (under block_row_min)
  // stay one thread per row.
  const HostRun run = expect_both_forms_are_refs(R"(
func.func @step(%x: tensor<3x40x7xf32>, %y: tensor<50x20xf32>) -> (tensor<3x40x7xf32>, tensor<50x20xf32>) {
  %p = mstep.softmax %x {dim = 1 : i64} : tensor<3x40x7xf32>
  %q = mstep.log_softmax %y {dim = 1 : i64} : tensor<50x20xf32>
  return %p, %q : tensor<3x40x7xf32>, tensor<50x20xf32>
})",
                                                 {bytes_of(testing::random_floats(3 * 40 * 7, 41)),
                                                  bytes_of(testing::random_floats(50 * 20, 42))});
  ASSERT_EQ(run.plan.kernels.size(), 2u);
  EXPECT_THAT(run.plan.kernels[0].grid, ElementsAre(21u, 1u, 1u));
  EXPECT_THAT(run.plan.kernels[0].block, ElementsAre(64u, 1u, 1u));
  EXPECT_THAT(run.plan.kernels[1].grid, ElementsAre(1u, 1u, 1u)); // 50 lanes of one block
  EXPECT_THAT(run.plan.kernels[1].block, ElementsAre(256u, 1u, 1u));
}

TEST(CudaBlockRowsHost, LayerNormAndRmsNormOfGptRows) {
  // GPT-mini's rows (256 wide) and a width that is not a power of two.
  const HostRun run = expect_both_forms_are_refs(R"(
func.func @step(%x: tensor<24x256xf32>, %w: tensor<256xf32>, %b: tensor<256xf32>, %z: tensor<9x300xf32>, %v: tensor<300xf32>) -> (tensor<24x256xf32>, tensor<9x300xf32>) {
  %y = mstep.layer_norm %x weight(%w : tensor<256xf32>) bias(%b : tensor<256xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<24x256xf32>
  %r = mstep.rms_norm %z weight(%v : tensor<300xf32>) {eps = 1.000000e-06 : f64, normalized_ndim = 1 : i64} : tensor<9x300xf32>
  return %y, %r : tensor<24x256xf32>, tensor<9x300xf32>
})",
                                                 {bytes_of(testing::random_floats(24 * 256, 43)),
                                                  bytes_of(testing::random_floats(256, 44)),
                                                  bytes_of(testing::random_floats(256, 45)),
                                                  bytes_of(testing::random_floats(9 * 300, 46)),
                                                  bytes_of(testing::random_floats(300, 47))});
  ASSERT_EQ(run.plan.kernels.size(), 2u);
  EXPECT_THAT(run.plan.kernels[0].grid, ElementsAre(24u, 1u, 1u));
  EXPECT_THAT(run.plan.kernels[1].grid, ElementsAre(9u, 1u, 1u));
}

TEST(CudaBlockRowsHost, NllLossMeanOverManyTargetsIsOneBlock) {
  std::vector<int64_t> target(1000);
  for (int i = 0; i < 1000; ++i) target[i] = (i * 7) % 12;
  target[5] = target[600] = target[999] = -100; // ignored: not counted
  std::vector<char> target_bytes(target.size() * sizeof(int64_t));
  std::memcpy(target_bytes.data(), target.data(), target_bytes.size());
  const HostRun run = expect_both_forms_are_refs(R"(
func.func @step(%lp: tensor<1000x12xf32>, %t: tensor<1000xi64>) -> tensor<f32> {
  %m = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<1000x12xf32>, tensor<1000xi64> -> tensor<f32>
  return %m : tensor<f32>
})",
                                                 {bytes_of(testing::random_floats(12000, 48)),
                                                  target_bytes});
  ASSERT_EQ(run.plan.kernels.size(), 1u);
  EXPECT_THAT(run.plan.kernels[0].grid, ElementsAre(1u, 1u, 1u));
  EXPECT_THAT(run.plan.kernels[0].block, ElementsAre(256u, 1u, 1u));
}

TEST(CudaBlockRowsHost, SumAndMeanOverTrailingDimsAreOneLaunchEach) {
  // A layer_norm backward's row means ([4, 50, 256] over the last dim), a
  // sum over the two trailing dims and a sum to a scalar: one block-rows
  // launch each (the first form: a fill and an accumulation, and the
  // mean's division). f64 sums rounded once, as ref's.
  const char* text = R"(
func.func @step(%x: tensor<4x50x256xf32>) -> (tensor<4x50x1xf32>, tensor<4xf32>, tensor<f32>) {
  %m = mstep.mean %x {dims = array<i64: 2>, keepdim = true} : tensor<4x50x256xf32> -> tensor<4x50x1xf32>
  %s = mstep.sum %x {dims = array<i64: 1, 2>, keepdim = false} : tensor<4x50x256xf32> -> tensor<4xf32>
  %t = mstep.sum %x {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<4x50x256xf32> -> tensor<f32>
  return %m, %s, %t : tensor<4x50x1xf32>, tensor<4xf32>, tensor<f32>
})";
  const std::vector<std::vector<char>> inputs = {bytes_of(testing::random_floats(4 * 50 * 256, 49))};
  const HostRun block = run_host(text, inputs, CudaRowReduction::block);
  testing::CudaStepContext step(text);
  auto ref = testing::ref_outputs(step.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(block.outputs.size(), 3u);
  for (size_t o = 0; o < 3; ++o) EXPECT_TRUE(block.outputs[o] == (*ref)[o]) << "output " << o;
  ASSERT_EQ(block.plan.launches.size(), 3u);
  EXPECT_THAT(block.plan.kernels[0].grid, ElementsAre(200u, 1u, 1u));
  EXPECT_THAT(block.plan.kernels[1].grid, ElementsAre(4u, 1u, 1u));
  EXPECT_THAT(block.plan.kernels[2].grid, ElementsAre(1u, 1u, 1u));
  for (const CudaKernelInfo& kernel : block.plan.kernels)
    EXPECT_THAT(kernel.block, ElementsAre(256u, 1u, 1u)) << kernel.name;
  // One thread per row: mstep-lower-to-linalg's loops, more launches.
  const HostRun thread = run_host(text, inputs, CudaRowReduction::thread);
  EXPECT_GT(thread.plan.launches.size(), 3u);
}

TEST(CudaBlockRowsHost, IntegerSumsAreOneBlockPerRowAndExact) {
  // A loss's count of targets (i64[2048] to a scalar: one thread walking
  // 2048 elements before) and i32 rows whose sums leave i32's range (ref:
  // an i64 sum cast to i32, i.e. modulo 2^32): one block-rows launch each,
  // equal to ref in both forms (an integer sum is exact in any order).
  const char* text = R"(
func.func @step(%n: tensor<2048xi64>, %r: tensor<3x1000xi32>) -> (tensor<i64>, tensor<3xi32>) {
  %c = mstep.sum %n {dims = array<i64: 0>, keepdim = false} : tensor<2048xi64> -> tensor<i64>
  %s = mstep.sum %r {dims = array<i64: 1>, keepdim = false} : tensor<3x1000xi32> -> tensor<3xi32>
  return %c, %s : tensor<i64>, tensor<3xi32>
})";
  std::vector<int64_t> counts(2048);
  for (size_t k = 0; k < counts.size(); ++k) counts[k] = static_cast<int64_t>(k % 3 != 0) - 7 * (k % 5 == 0);
  std::vector<int32_t> rows(3000);
  for (size_t k = 0; k < rows.size(); ++k)
    rows[k] = k < 1000 ? static_cast<int32_t>(k) - 500 : 2000000000 + static_cast<int32_t>(k % 7);
  auto bytes = [](const auto& v) {
    std::vector<char> out(v.size() * sizeof(v[0]));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  const HostRun block = expect_both_forms_are_refs(text, {bytes(counts), bytes(rows)});
  ASSERT_EQ(block.plan.launches.size(), 2u);
  EXPECT_THAT(block.plan.kernels[0].block, ElementsAre(256u, 1u, 1u));
  EXPECT_THAT(block.plan.kernels[1].grid, ElementsAre(3u, 1u, 1u));
  int64_t total = 0;
  std::memcpy(&total, block.outputs[0].data(), sizeof total);
  int64_t expected = 0;
  for (int64_t c : counts) expected += c;
  EXPECT_EQ(total, expected);
}

TEST(CudaBlockRowsHost, ColumnSumsAreNotRows) {
  // A bias gradient (sum over the leading dims): not rows, so one thread
  // per column with MSTEP_CUDA_COLUMN_REDUCTION=thread whatever the row
  // option (split: cuda_column_sums_host_test.cpp).
  testing::CudaStepContext step(R"(
func.func @step(%x: tensor<64x300xf32>) -> tensor<300xf32> {
  %s = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<64x300xf32> -> tensor<300xf32>
  return %s : tensor<300xf32>
})");
  CudaCompileOptions options = with_rows(CudaRowReduction::block);
  options.codegen.column_reduction = CudaColumnReduction::thread;
  auto compiled = compile_cuda_step(step.module(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const TiledOp& op : compiled->tiled)
    EXPECT_THAT(op.module, ::testing::Not(HasSubstr("mstep_block_threads")));
}

TEST(CudaBlockRowsHost, KernelsUseSharedMemoryAndBarriersWithoutSpills) {
  // layer_norm: two statistics, 2 x 256 f64 of shared memory per block.
  testing::CudaStepContext step(R"(
func.func @step(%x: tensor<16x512xbf16>) -> tensor<16x512xbf16> {
  %y = mstep.layer_norm %x {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<16x512xbf16>
  return %y : tensor<16x512xbf16>
})");
  auto compiled = compile_cuda_step(step.module(), with_rows(CudaRowReduction::block));
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->plan.kernels.size(), 1u);
  const CudaKernelInfo& kernel = compiled->plan.kernels[0];
  EXPECT_THAT(kernel.ptx, HasSubstr(".shared"));
  EXPECT_THAT(kernel.ptx, HasSubstr("bar.sync"));
  ASSERT_EQ(kernel.reports.size(), 2u); // sm_80, sm_90
  for (const PtxasKernelReport& report : kernel.reports) {
    EXPECT_EQ(report.shared_bytes, 2 * 256 * 8) << report.arch;
    EXPECT_EQ(report.spill_store_bytes, 0) << report.arch;
    EXPECT_EQ(report.spill_load_bytes, 0) << report.arch;
    EXPECT_LE(report.registers, 64) << report.arch;
  }
}

TEST(CudaBlockRowsOption, EnvironmentPicksTheFormAndRejectsOtherValues) {
  ::setenv("MSTEP_CUDA_ROW_REDUCTION", "thread", 1);
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.row_reduction,
            CudaRowReduction::thread);
  // A value that is neither: a warning naming it, and the default.
  ::setenv("MSTEP_CUDA_ROW_REDUCTION", "warp", 1);
  ::testing::internal::CaptureStderr();
  const RuntimeOptions bad = RuntimeOptions::from_env();
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warning, HasSubstr("MSTEP_CUDA_ROW_REDUCTION=warp"));
  EXPECT_EQ(cuda_compile_options(bad).codegen.row_reduction, CudaRowReduction::fused);
  ::setenv("MSTEP_CUDA_ROW_REDUCTION", "block", 1);
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.row_reduction,
            CudaRowReduction::block);
  ::unsetenv("MSTEP_CUDA_ROW_REDUCTION");
  EXPECT_EQ(cuda_compile_options(RuntimeOptions::from_env()).codegen.row_reduction,
            CudaRowReduction::fused);
  // The optimizer's launches likewise (MSTEP_CUDA_OPTIMIZER).
  ::setenv("MSTEP_CUDA_OPTIMIZER", "per_tensor", 1);
  EXPECT_FALSE(cuda_compile_options(RuntimeOptions::from_env()).codegen.multi_tensor_launch);
  ::setenv("MSTEP_CUDA_OPTIMIZER", "fused", 1);
  ::testing::internal::CaptureStderr();
  const RuntimeOptions bad_optimizer = RuntimeOptions::from_env();
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("MSTEP_CUDA_OPTIMIZER=fused"));
  EXPECT_TRUE(cuda_compile_options(bad_optimizer).codegen.multi_tensor_launch);
  ::unsetenv("MSTEP_CUDA_OPTIMIZER");
}

} // namespace
} // namespace mstep::cuda
