// Row groups (CudaRowGroups.h, MSTEP_CUDA_ROW_REDUCTION=fused, the
// default): the reductions over the last dim and the elementwise ops
// between them as one block-per-row kernel. A group's statistics are the
// reductions' own (the same f64 partials and tree, rounded once) and its
// elementwise values the same scalar forms, so a step compiled fused gives
// the bytes of the same step compiled with a kernel per op (block), which
// the block-rows tests check against ref. Here: that equality on the host
// for whole training steps and for steps written to reach the grouping's
// edges (a value that broadcasts another way stays out, a group that
// would have to wait on itself through a matmul is two groups), the
// launch counts, and ref's values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "test/cuda/HostStepCheck.h"
#include "test/cuda/HostStepRun.h"
#include "test/cuda/HostVsRef.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

CudaCompileOptions with_rows(CudaRowReduction form) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = form;
  return options;
}

/// The plan's kernel launches, and those of row groups.
struct Launches {
  int all = 0, groups = 0;
};
Launches launches_of(const CudaPlan& plan) {
  Launches n;
  for (const CudaLaunchStep& launch : plan.launches) {
    if (launch.matmul >= 0 || launch.attention >= 0 || launch.collective >= 0) continue;
    ++n.all;
    if (plan.kernels[launch.kernel].origin.rfind("row group", 0) == 0) ++n.groups;
  }
  return n;
}

/// A training step compiled fused and block, run on the host on the same
/// inputs: every output the same bytes. The two plans.
std::pair<CudaPlan, CudaPlan> expect_fused_is_block(const TraceGraph& graph, int64_t max_integer) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(graph, step);
  EXPECT_TRUE(module);
  if (!module) return {};
  auto fused = compile_cuda_step(*module, with_rows(CudaRowReduction::fused));
  auto block = compile_cuda_step(*module, with_rows(CudaRowReduction::block));
  EXPECT_TRUE(fused.ok()) << fused.status();
  EXPECT_TRUE(block.ok()) << block.status();
  if (!fused.ok() || !block.ok()) return {};
  const std::vector<std::vector<char>> inputs = testing::step_inputs(block->plan, max_integer);
  std::vector<std::vector<char>> outputs[2];
  for (int k = 0; k < 2; ++k) {
    CompiledCudaStep& compiled = k == 0 ? *fused : *block;
    EXPECT_EQ(compiled.plan.num_inputs, inputs.size());
    std::vector<std::vector<char>> values;
    for (const TensorType& type : compiled.plan.values) values.emplace_back(type.bytes(), char{0x7f});
    for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
    testing::run_plan_on_host(step.context(), compiled, values);
    for (int id : compiled.plan.outputs) outputs[k].push_back(values[id]);
  }
  EXPECT_EQ(outputs[0].size(), outputs[1].size());
  for (size_t o = 0; o < outputs[0].size() && o < outputs[1].size(); ++o)
    EXPECT_TRUE(outputs[0][o] == outputs[1][o]) << "output " << o << " differs";
  return {std::move(fused->plan), std::move(block->plan)};
}

TEST(CudaRowGroups, GptStepFusedGivesTheBytesOfAKernelPerOpInFewerLaunches) {
  // GPT-mini's f32 step (its attention composed): each layer_norm's
  // backward (4 means, 4 fusions) is one kernel, and each forward one
  // with its residual add (156 launches a kernel per op, 93 fused).
  auto [fused, block] = expect_fused_is_block(testing::gpt_step_graph(), 16);
  const Launches f = launches_of(fused), b = launches_of(block);
  EXPECT_EQ(b.groups, 0);
  EXPECT_GE(f.groups, 10);  // 5 layer norms (2 layers x 2 + the final one), each way
  EXPECT_LE(3 * f.all, 2 * b.all) << f.all << " fused launches, " << b.all << " block";
}

TEST(CudaRowGroups, GptStepsLayerNormsAndLogSoftmaxJoinTheirFusions) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(testing::gpt_step_graph(), step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  int norms = 0, log_softmax = 0, alone = 0;
  for (const CudaKernelInfo& kernel : compiled->plan.kernels) {
    if (kernel.origin.rfind("row group", 0) == 0) {
      norms += kernel.origin.find("mstep.layer_norm") != std::string::npos;
      log_softmax += kernel.origin.find("mstep.log_softmax") != std::string::npos;
    }
    alone += kernel.origin.rfind("mstep.layer_norm", 0) == 0;
  }
  // Each forward layer_norm with the residual add before it or the cast
  // after it; the loss's log_softmax with its backward.
  EXPECT_GE(norms, 5);
  EXPECT_EQ(log_softmax, 1);
  EXPECT_EQ(alone, 0);
}

TEST(CudaRowGroups, MnistStepFusedGivesTheBytesOfAKernelPerOp) {
  // log_softmax's backward: g - exp(y) * sum(g), the sum over 10 classes:
  // rows shorter than a warp stay a kernel per op (block_row_min).
  auto [fused, block] = expect_fused_is_block(testing::mnist_step_graph(), 1);
  EXPECT_EQ(launches_of(fused).all, launches_of(block).all);
}

// layer_norm's backward written out as the autograd formula makes it, with
// a column sum (outside: it reduces the leading dims), an operand that
// broadcasts over the middle dim ([4, 1, 64]: read at strides, in the
// group), a product of higher rank ([2, 4, 8, 64]: not on the group's rows,
// so it stays out) and a per-row result returned.
constexpr const char* kNormBackward = R"(
func.func @step(%x: tensor<4x8x64xf32>, %g: tensor<4x8x64xf32>, %w: tensor<64xf32>,
                %m: tensor<4x1x64xf32>, %big: tensor<2x4x8x64xf32>)
    -> (tensor<4x8x64xbf16>, tensor<64xf32>, tensor<4x8x1xf32>, tensor<4x8x64xf32>,
        tensor<2x4x8x64xf32>) {
  %mean = mstep.mean %x {dims = array<i64: 2>, keepdim = true} : tensor<4x8x64xf32> -> tensor<4x8x1xf32>
  %c:2 = mstep.fusion ins(%x, %mean : tensor<4x8x64xf32>, tensor<4x8x1xf32>) -> tensor<4x8x64xf32>, tensor<4x8x64xf32> {
  ^bb0(%a: tensor<4x8x64xf32>, %b: tensor<4x8x1xf32>):
    %0 = mstep.sub %a, %b : tensor<4x8x64xf32>, tensor<4x8x1xf32> -> tensor<4x8x64xf32>
    %1 = mstep.mul %0, %0 : tensor<4x8x64xf32>, tensor<4x8x64xf32> -> tensor<4x8x64xf32>
    mstep.yield %0, %1 : tensor<4x8x64xf32>, tensor<4x8x64xf32>
  }
  %var = mstep.mean %c#1 {dims = array<i64: 2>, keepdim = true} : tensor<4x8x64xf32> -> tensor<4x8x1xf32>
  %eps = mstep.constant 1.000000e-05 : tensor<f32>
  %ve = mstep.add %var, %eps : tensor<4x8x1xf32>, tensor<f32> -> tensor<4x8x1xf32>
  %r = mstep.rsqrt %ve : tensor<4x8x1xf32>
  %d:3 = mstep.fusion ins(%c#0, %r, %g, %w : tensor<4x8x64xf32>, tensor<4x8x1xf32>, tensor<4x8x64xf32>, tensor<64xf32>) -> tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32> {
  ^bb0(%a: tensor<4x8x64xf32>, %b: tensor<4x8x1xf32>, %gg: tensor<4x8x64xf32>, %ww: tensor<64xf32>):
    %0 = mstep.mul %a, %b : tensor<4x8x64xf32>, tensor<4x8x1xf32> -> tensor<4x8x64xf32>
    %1 = mstep.mul %gg, %ww : tensor<4x8x64xf32>, tensor<64xf32> -> tensor<4x8x64xf32>
    %2 = mstep.mul %1, %0 : tensor<4x8x64xf32>, tensor<4x8x64xf32> -> tensor<4x8x64xf32>
    mstep.yield %0, %1, %2 : tensor<4x8x64xf32>, tensor<4x8x64xf32>, tensor<4x8x64xf32>
  }
  %m1 = mstep.mean %d#1 {dims = array<i64: 2>, keepdim = true} : tensor<4x8x64xf32> -> tensor<4x8x1xf32>
  %m2 = mstep.mean %d#2 {dims = array<i64: 2>, keepdim = true} : tensor<4x8x64xf32> -> tensor<4x8x1xf32>
  %dx = mstep.fusion ins(%d#1, %m1, %d#0, %m2, %r : tensor<4x8x64xf32>, tensor<4x8x1xf32>, tensor<4x8x64xf32>, tensor<4x8x1xf32>, tensor<4x8x1xf32>) -> tensor<4x8x64xbf16> {
  ^bb0(%a: tensor<4x8x64xf32>, %b: tensor<4x8x1xf32>, %h: tensor<4x8x64xf32>, %k: tensor<4x8x1xf32>, %q: tensor<4x8x1xf32>):
    %0 = mstep.sub %a, %b : tensor<4x8x64xf32>, tensor<4x8x1xf32> -> tensor<4x8x64xf32>
    %1 = mstep.mul %h, %k : tensor<4x8x64xf32>, tensor<4x8x1xf32> -> tensor<4x8x64xf32>
    %2 = mstep.sub %0, %1 : tensor<4x8x64xf32>, tensor<4x8x64xf32> -> tensor<4x8x64xf32>
    %3 = mstep.mul %q, %2 : tensor<4x8x1xf32>, tensor<4x8x64xf32> -> tensor<4x8x64xf32>
    %4 = mstep.cast %3 : tensor<4x8x64xf32> -> tensor<4x8x64xbf16>
    mstep.yield %4 : tensor<4x8x64xbf16>
  }
  %dw = mstep.sum %d#2 {dims = array<i64: 0, 1>, keepdim = false} : tensor<4x8x64xf32> -> tensor<64xf32>
  %masked = mstep.mul %d#0, %m : tensor<4x8x64xf32>, tensor<4x1x64xf32> -> tensor<4x8x64xf32>
  %outer = mstep.mul %d#0, %big : tensor<4x8x64xf32>, tensor<2x4x8x64xf32> -> tensor<2x4x8x64xf32>
  return %dx, %dw, %r, %masked, %outer : tensor<4x8x64xbf16>, tensor<64xf32>, tensor<4x8x1xf32>, tensor<4x8x64xf32>, tensor<2x4x8x64xf32>
}
)";

std::vector<std::vector<char>> norm_backward_inputs() {
  return {testing::random_bytes(4 * 8 * 64, 1), testing::random_bytes(4 * 8 * 64, 2),
          testing::random_bytes(64, 3), testing::random_bytes(4 * 64, 4),
          testing::random_bytes(2 * 4 * 8 * 64, 5)};
}

TEST(CudaRowGroups, LayerNormBackwardIsOneKernelWithTheBytesOfOnePerOp) {
  const std::vector<std::vector<char>> inputs = norm_backward_inputs();
  testing::HostStepRun fused =
      testing::run_step_on_host(kNormBackward, inputs, with_rows(CudaRowReduction::fused));
  testing::HostStepRun block =
      testing::run_step_on_host(kNormBackward, inputs, with_rows(CudaRowReduction::block));
  ASSERT_EQ(fused.outputs.size(), 5u);
  ASSERT_EQ(block.outputs.size(), 5u);
  for (size_t o = 0; o < 5; ++o) EXPECT_TRUE(fused.outputs[o] == block.outputs[o]) << "output " << o;
  // One group (4 means, 3 fusions, the add, the rsqrt and the [4, 1, 64]
  // product); the column sum (2 launches: chunks, then their sum) and the
  // [2, 4, 8, 64] product stay.
  const Launches f = launches_of(fused.plan);
  EXPECT_EQ(f.groups, 1);
  EXPECT_EQ(f.all, 4);
  EXPECT_EQ(launches_of(block.plan).all, 4 + 3 + 2 + 1 + 2 + 1)
      << "a kernel per op: 4 means, 3 fusions, add and rsqrt, the [4, 1, 64] product, 2 "
         "column-sum passes, the [2, 4, 8, 64] product";
  for (const CudaKernelInfo& kernel : fused.plan.kernels)
    if (kernel.origin.rfind("row group", 0) == 0)
      EXPECT_THAT(kernel.origin, HasSubstr("over [4, 8, 64] (4 mstep.mean"));
}

TEST(CudaRowGroups, LayerNormBackwardMatchesRef) {
  const std::vector<std::vector<char>> inputs = norm_backward_inputs();
  testing::Outputs out = testing::run_both(kNormBackward, inputs);
  ASSERT_EQ(out.cuda.size(), 5u);
  ASSERT_EQ(out.ref.size(), 5u);
  // dx in bf16 and the per-row rsqrt: ref's bytes (f64 statistics rounded
  // once, then the same f32 operations). The column sum's chunks add in
  // another order than ref's: within 64 ulps of the sum of magnitudes.
  EXPECT_TRUE(out.cuda[0] == out.ref[0]) << "dx";
  EXPECT_TRUE(out.cuda[2] == out.ref[2]) << "rsqrt(var + eps)";
  EXPECT_TRUE(out.cuda[3] == out.ref[3]) << "the [4, 1, 64] product";
  EXPECT_TRUE(out.cuda[4] == out.ref[4]) << "the [2, 4, 8, 64] product";
  const std::vector<float> dw = testing::values_of<float>(out.cuda[1]);
  const std::vector<float> want = testing::values_of<float>(out.ref[1]);
  for (size_t k = 0; k < dw.size(); ++k)
    EXPECT_NEAR(dw[k], want[k], 32 * 4e-7 * (1 + std::fabs(want[k]))) << "dw[" << k << "]";
}

// A residual add, rms_norm, softmax and a cast to bf16 over the same rows:
// one kernel of three statistics, softmax's reading rms_norm's elements
// as rms_norm alone would have stored them.
constexpr const char* kNormSoftmax = R"(
func.func @step(%x: tensor<16x96xf32>, %y: tensor<16x96xf32>, %w: tensor<96xf32>)
    -> (tensor<16x96xf32>, tensor<16x96xbf16>) {
  %h = mstep.add %x, %y : tensor<16x96xf32>, tensor<16x96xf32> -> tensor<16x96xf32>
  %n = mstep.rms_norm %h weight(%w : tensor<96xf32>) {eps = 1.0e-06 : f64, normalized_ndim = 1 : i64} : tensor<16x96xf32>
  %s = mstep.softmax %n {dim = 1 : i64} : tensor<16x96xf32>
  %c = mstep.cast %s : tensor<16x96xf32> -> tensor<16x96xbf16>
  return %h, %c : tensor<16x96xf32>, tensor<16x96xbf16>
}
)";

TEST(CudaRowGroups, NormAndSoftmaxOverTheSameRowsAreOneKernelWithRefsBytes) {
  const std::vector<std::vector<char>> inputs = {
      testing::random_bytes(16 * 96, 7), testing::random_bytes(16 * 96, 8),
      testing::random_bytes(96, 9)};
  testing::Outputs out = testing::run_both(kNormSoftmax, inputs);
  testing::expect_same_as_ref(out);
  const Launches n = launches_of(out.plan);
  EXPECT_EQ(n.groups, 1);
  EXPECT_EQ(n.all, 1);
  testing::HostStepRun block =
      testing::run_step_on_host(kNormSoftmax, inputs, with_rows(CudaRowReduction::block));
  EXPECT_EQ(launches_of(block.plan).all, 4);
}

// mean(x) -> d = x - mean -> p = d . W (a matmul) -> e = d * p -> mean(e):
// d and e are on the same rows, but one group holding both would wait on
// itself through the matmul. Two groups, the matmul between them.
constexpr const char* kThroughMatmul = R"(
func.func @step(%x: tensor<16x64xf32>, %w: tensor<64x64xf32>) -> (tensor<16x1xf32>, tensor<16x64xf32>) {
  %mean = mstep.mean %x {dims = array<i64: 1>, keepdim = true} : tensor<16x64xf32> -> tensor<16x1xf32>
  %d = mstep.sub %x, %mean : tensor<16x64xf32>, tensor<16x1xf32> -> tensor<16x64xf32>
  %p = mstep.matmul %d, %w : tensor<16x64xf32>, tensor<64x64xf32> -> tensor<16x64xf32>
  %e = mstep.mul %d, %p : tensor<16x64xf32>, tensor<16x64xf32> -> tensor<16x64xf32>
  %m2 = mstep.mean %e {dims = array<i64: 1>, keepdim = true} : tensor<16x64xf32> -> tensor<16x1xf32>
  return %m2, %p : tensor<16x1xf32>, tensor<16x64xf32>
}
)";

TEST(CudaRowGroups, AGroupNeverWaitsOnItselfThroughAnotherOp) {
  const std::vector<std::vector<char>> inputs = {testing::random_bytes(16 * 64, 5),
                                                 testing::random_bytes(64 * 64, 6)};
  testing::CudaStepContext step(kThroughMatmul);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  const Launches n = launches_of(plan);
  EXPECT_EQ(n.groups, 2);
  EXPECT_EQ(n.all, 2);
  ASSERT_EQ(plan.launches.size(), 3u);
  EXPECT_GE(plan.launches[1].matmul, 0) << "the matmul runs between the two groups";
  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  testing::run_plan_on_host(step.context(), *compiled, values);
  auto ref = testing::ref_outputs(step.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // The matmul sums in cuBLASLt's order on the GPU (here: the host's
  // loop); the rest follows ref's rounding points.
  const std::vector<float> got = testing::values_of<float>(values[plan.outputs[0]]);
  const std::vector<float> want = testing::values_of<float>((*ref)[0]);
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-5 * (1 + std::fabs(want[k]))) << "mean(d * p)[" << k << "]";
}

// q, k and v's gradients put back into their packed projection's shape:
// slice_scatters into zeros added by a fusion (the last dim, in thirds),
// one more along the middle dim with a step of 2, and one read twice
// (which stays a kernel of its own).
constexpr const char* kScatters = R"(
func.func @step(%z: tensor<2x6x12xf32>, %a: tensor<2x6x4xf32>, %b: tensor<2x6x4xf32>,
                %c: tensor<2x6x4xf32>, %d: tensor<2x3x12xf32>, %s: tensor<f32>)
    -> (tensor<2x6x12xf32>, tensor<2x6x12xf32>) {
  %0 = mstep.slice_scatter %z, %a {dim = 2 : i64, end = 4 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x6x12xf32>, tensor<2x6x4xf32>
  %1 = mstep.slice_scatter %z, %b {dim = 2 : i64, end = 8 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x6x12xf32>, tensor<2x6x4xf32>
  %2 = mstep.slice_scatter %z, %c {dim = 2 : i64, end = 12 : i64, start = 8 : i64, step = 1 : i64} : tensor<2x6x12xf32>, tensor<2x6x4xf32>
  %3 = mstep.slice_scatter %z, %d {dim = 1 : i64, end = 6 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6x12xf32>, tensor<2x3x12xf32>
  %4 = mstep.fusion ins(%0, %1, %2, %3, %s : tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<2x6x12xf32>, tensor<f32>) -> tensor<2x6x12xf32> {
  ^bb0(%x0: tensor<2x6x12xf32>, %x1: tensor<2x6x12xf32>, %x2: tensor<2x6x12xf32>, %x3: tensor<2x6x12xf32>, %k: tensor<f32>):
    %5 = mstep.add %x0, %x1 : tensor<2x6x12xf32>, tensor<2x6x12xf32> -> tensor<2x6x12xf32>
    %6 = mstep.add %5, %x2 : tensor<2x6x12xf32>, tensor<2x6x12xf32> -> tensor<2x6x12xf32>
    %7 = mstep.mul %x3, %k : tensor<2x6x12xf32>, tensor<f32> -> tensor<2x6x12xf32>
    %8 = mstep.sub %6, %7 : tensor<2x6x12xf32>, tensor<2x6x12xf32> -> tensor<2x6x12xf32>
    mstep.yield %8 : tensor<2x6x12xf32>
  }
  return %4, %3 : tensor<2x6x12xf32>, tensor<2x6x12xf32>
}
)";

TEST(CudaRowGroups, AFusionTakesTheSliceScattersOnlyItReadsWithRefsBytes) {
  std::vector<std::vector<char>> inputs = {
      testing::random_bytes(2 * 6 * 12, 11), testing::random_bytes(2 * 6 * 4, 12),
      testing::random_bytes(2 * 6 * 4, 13), testing::random_bytes(2 * 6 * 4, 14),
      testing::random_bytes(2 * 3 * 12, 15), testing::random_bytes(1, 16)};
  // A -0.0 in a source: the sum with the other scatters' +0.0 makes it
  // +0.0, which the fused kernel keeps too.
  const float negative_zero = -0.0f;
  std::memcpy(inputs[1].data(), &negative_zero, sizeof negative_zero);
  testing::Outputs out = testing::run_both(kScatters, inputs);
  testing::expect_same_as_ref(out);
  const Launches n = launches_of(out.plan);
  EXPECT_EQ(n.all, 3) << "the fusion with 3 scatters, and the one read twice: a copy and a scatter";
  int with_scatters = 0;
  for (const CudaKernelInfo& kernel : out.plan.kernels)
    with_scatters += kernel.origin.find("3 mstep.slice_scatter, 1 mstep.fusion") != std::string::npos;
  EXPECT_EQ(with_scatters, 1);
  testing::HostStepRun block =
      testing::run_step_on_host(kScatters, inputs, with_rows(CudaRowReduction::block));
  EXPECT_EQ(launches_of(block.plan).all, 9);
}

TEST(CudaRowGroups, TheBlockFormKeepsAKernelPerOp) {
  const std::vector<std::vector<char>> inputs = {testing::random_bytes(16 * 64, 5),
                                                 testing::random_bytes(64 * 64, 6)};
  testing::HostStepRun block =
      testing::run_step_on_host(kThroughMatmul, inputs, with_rows(CudaRowReduction::block));
  EXPECT_EQ(launches_of(block.plan).groups, 0);
  EXPECT_EQ(launches_of(block.plan).all, 4);
}

} // namespace
} // namespace mstep::cuda
