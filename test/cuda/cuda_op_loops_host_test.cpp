// Host numerics of the loop nests built for the ops mstep-lower-to-linalg
// does not lower (CudaOpLoops.h: softmax, log_softmax, layer_norm,
// rms_norm, nll_loss, dropout, arange, reshape, permute, the optimizer
// update): each step is compiled for cuda (its kernels assembled for
// sm_80 and sm_90), its tiled loop nests run on this CPU, and every output
// is compared with the ref backend's on the same inputs.
//
// The nests follow ref's arithmetic op for op (f64 statistics, one
// rounding per output, the optimizer's f32 operations in ref's order, the
// same Philox words), and the host has the same libm, so the outputs are
// expected bit for bit here. (On a GPU, libdevice's exp/log/pow may differ
// from libm in the last bit of a double; that is for the GPU run.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "mstep/core/HalfTypes.h"
#include "mstep/core/Philox.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

template <typename T> std::vector<char> bytes_of(const std::vector<T>& values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T> std::vector<T> values_of(const std::vector<char>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

/// A step's outputs from its cuda loop nests run on the host, and from ref.
struct Outputs {
  std::vector<std::vector<char>> cuda, ref;
  CudaPlan plan;
};

Outputs run_both(const char* text, const std::vector<std::vector<char>>& inputs,
                 const CudaCompileOptions& options = default_cuda_compile_options()) {
  Outputs out;
  testing::CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return out;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values)
    values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(values[i].size(), inputs[i].size()) << "input " << i;
    values[i] = inputs[i];
  }
  testing::run_tiled_on_host(step.context(), *compiled, values);
  for (int id : compiled->plan.outputs) out.cuda.push_back(values[id]);
  auto ref = testing::ref_outputs(step.module(), inputs);
  EXPECT_TRUE(ref.ok()) << ref.status();
  if (ref.ok()) out.ref = std::move(*ref);
  out.plan = std::move(compiled->plan);
  return out;
}

/// Every output equal to ref's, byte for byte (NaNs included).
void expect_same_as_ref(const Outputs& out) {
  ASSERT_EQ(out.cuda.size(), out.ref.size());
  for (size_t o = 0; o < out.cuda.size(); ++o) {
    ASSERT_EQ(out.cuda[o].size(), out.ref[o].size()) << "output " << o;
    EXPECT_TRUE(out.cuda[o] == out.ref[o]) << "output " << o << " differs from ref";
  }
}

std::vector<char> random_bytes(size_t n, uint32_t seed) {
  return bytes_of(testing::random_floats(n, seed));
}

std::vector<char> bf16_bytes(size_t n, uint32_t seed) {
  std::vector<BFloat16> values;
  for (float v : testing::random_floats(n, seed)) values.push_back(BFloat16(v));
  return bytes_of(values);
}

TEST(CudaOpLoopsHost, SoftmaxOverAMiddleDimOneLanePerOuterInnerPair) {
  // dim 1 of [3, 5, 70]: 210 lanes, each 5 elements 70 apart.
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<3x5x70xf32>) -> tensor<3x5x70xf32> {
  %p = mstep.softmax %x {dim = 1 : i64} : tensor<3x5x70xf32>
  return %p : tensor<3x5x70xf32>
})",
                               {random_bytes(3 * 5 * 70, 1)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // Each lane sums to one (not ref's arithmetic: a check of the indexing).
  const std::vector<float> p = values_of<float>(out.cuda[0]);
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 70; ++i) {
      double sum = 0;
      for (int j = 0; j < 5; ++j) sum += p[(o * 5 + j) * 70 + i];
      EXPECT_NEAR(sum, 1.0, 1e-6) << o << "," << i;
    }
}

TEST(CudaOpLoopsHost, LogSoftmaxOfRowsWithAPartialLastTile) {
  // 300 rows: two blocks of 256 lanes, the second partial; a row with
  // -inf and a large value, as ref (max subtracted first).
  std::vector<float> x = testing::random_floats(300 * 10, 2);
  x[10 * 7 + 3] = -INFINITY;
  x[10 * 8 + 1] = 80.f;
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<300x10xf32>) -> tensor<300x10xf32> {
  %p = mstep.log_softmax %x {dim = 1 : i64} : tensor<300x10xf32>
  return %p : tensor<300x10xf32>
})",
                               {bytes_of(x)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  EXPECT_EQ(out.plan.kernels.size(), 1u);
  EXPECT_THAT(out.plan.kernels[0].grid, ::testing::ElementsAre(2u, 1u, 1u));
}

TEST(CudaOpLoopsHost, LayerNormWithWeightAndBiasOverTwoDims) {
  const Outputs out =
      run_both(R"(
func.func @step(%x: tensor<6x4x50xf32>, %w: tensor<4x50xf32>, %b: tensor<4x50xf32>) -> tensor<6x4x50xf32> {
  %y = mstep.layer_norm %x weight(%w : tensor<4x50xf32>) bias(%b : tensor<4x50xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 2 : i64} : tensor<6x4x50xf32>
  return %y : tensor<6x4x50xf32>
})",
               {random_bytes(6 * 200, 3), random_bytes(200, 4), random_bytes(200, 5)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaOpLoopsHost, LayerNormWithoutAffineAndRmsNormWithWeight) {
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<130x64xf32>, %w: tensor<64xf32>) -> (tensor<130x64xf32>, tensor<130x64xf32>) {
  %y = mstep.layer_norm %x {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<130x64xf32>
  %z = mstep.rms_norm %x weight(%w : tensor<64xf32>) {eps = 1.000000e-06 : f64, normalized_ndim = 1 : i64} : tensor<130x64xf32>
  return %y, %z : tensor<130x64xf32>, tensor<130x64xf32>
})",
                               {random_bytes(130 * 64, 6), random_bytes(64, 7)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaOpLoopsHost, NllLossMeanSumAndNoneWithIgnoredTargets) {
  std::vector<int64_t> target(40);
  for (int i = 0; i < 40; ++i) target[i] = (i * 7) % 10;
  target[3] = target[17] = -100; // ignored: neither summed nor counted
  const Outputs out = run_both(R"(
func.func @step(%lp: tensor<40x10xf32>, %t: tensor<40xi64>) -> (tensor<f32>, tensor<f32>, tensor<40xf32>) {
  %m = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<40x10xf32>, tensor<40xi64> -> tensor<f32>
  %s = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<40x10xf32>, tensor<40xi64> -> tensor<f32>
  %n = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<none>} : tensor<40x10xf32>, tensor<40xi64> -> tensor<40xf32>
  return %m, %s, %n : tensor<f32>, tensor<f32>, tensor<40xf32>
})",
                               {random_bytes(400, 8), bytes_of(target)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // The mean and the sum are one block each (40 losses: a block of 64
  // threads, MSTEP_CUDA_ROW_REDUCTION=block).
  for (int k = 0; k < 2; ++k) {
    EXPECT_THAT(out.plan.kernels[k].grid, ::testing::ElementsAre(1u, 1u, 1u));
    EXPECT_THAT(out.plan.kernels[k].block, ::testing::ElementsAre(64u, 1u, 1u));
  }
}

TEST(CudaOpLoopsHost, NllLossTargetOutOfRangeIsNaNNotAnOutOfBoundsRead) {
  // ref rejects it with an error; a kernel cannot, so its row is NaN.
  testing::CudaStepContext step(R"(
func.func @step(%lp: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<4xf32> {
  %n = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<none>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<4xf32>
  return %n : tensor<4xf32>
})");
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> lp = testing::random_floats(40, 9);
  auto values = testing::host_values(compiled->plan, {lp});
  const std::vector<int64_t> target = {2, 10, -1, -100};
  std::memcpy(values[1].data(), target.data(), values[1].size());
  ASSERT_NO_FATAL_FAILURE(testing::run_tiled_on_host(step.context(), *compiled, values));
  const float* loss = testing::as<float>(values[compiled->plan.outputs[0]]);
  EXPECT_EQ(loss[0], -lp[2]);
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isnan(loss[2]));
  EXPECT_EQ(loss[3], 0.f);
}

TEST(CudaOpLoopsHost, DropoutDrawsRefsPhiloxWords) {
  const std::vector<int64_t> rng = {int64_t{0x123456789ab}, 77}; // seed, offset
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<33x70xf32>, %rng: tensor<2xi64>) -> tensor<33x70xf32> {
  %y = mstep.dropout %x, %rng {offset = 16 : i64, p = 2.500000e-01 : f64} : tensor<33x70xf32>
  return %y : tensor<33x70xf32>
})",
                               {random_bytes(33 * 70, 10), bytes_of(rng)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // The mask from mstep::Philox directly: element i kept iff its uniform
  // at counter 77 + 16 + i is >= p.
  const std::vector<float> y = values_of<float>(out.cuda[0]);
  int kept = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const bool keep = Philox::uniform(0x123456789ab, 77 + 16, i) >= 0.25f;
    EXPECT_EQ(y[i] != 0.f, keep) << i;
    kept += keep;
  }
  EXPECT_NEAR(kept / double(y.size()), 0.75, 0.05);
}

TEST(CudaOpLoopsHost, ArangeReshapeAndPermuteAreCopyKernels) {
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<4x5x6xf32>) -> (tensor<6x4x5xf32>, tensor<20x6xf32>, tensor<300xf32>, tensor<7xi64>) {
  %p = mstep.permute %x {perm = array<i64: 2, 0, 1>} : tensor<4x5x6xf32> -> tensor<6x4x5xf32>
  %r = mstep.reshape %x : tensor<4x5x6xf32> -> tensor<20x6xf32>
  %a = mstep.arange {start = -1.500000e+00 : f64, step = 2.500000e-01 : f64} : tensor<300xf32>
  %i = mstep.arange {start = 3.000000e+00 : f64, step = 2.000000e+00 : f64} : tensor<7xi64>
  return %p, %r, %a, %i : tensor<6x4x5xf32>, tensor<20x6xf32>, tensor<300xf32>, tensor<7xi64>
})",
                               {random_bytes(120, 11)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  EXPECT_THAT(values_of<int64_t>(out.cuda[3]), ::testing::ElementsAre(3, 5, 7, 9, 11, 13, 15));
}

/// Inputs of an optimizer step: `tensors` random tensors (parameters,
/// gradients, then from `first_state` on the states, not negative: they
/// hold averages of squares), step counters 4, the f64 hyperparameters.
std::vector<std::vector<char>> optimizer_inputs(int tensors, int first_state,
                                                const std::vector<int64_t>& sizes, int counters,
                                                const std::vector<double>& hypers) {
  std::vector<std::vector<char>> inputs;
  for (int t = 0; t < tensors; ++t) {
    std::vector<float> v = testing::random_floats(sizes[t % sizes.size()], 20 + t);
    if (t >= first_state)
      for (float& x : v) x = std::fabs(x);
    inputs.push_back(bytes_of(v));
  }
  for (int c = 0; c < counters; ++c) inputs.push_back(bytes_of(std::vector<int64_t>{4}));
  for (double h : hypers) inputs.push_back(bytes_of(std::vector<double>{h}));
  return inputs;
}

TEST(CudaOpLoopsHost, AdadeltaUpdateIsRefsBitForBit) {
  const Outputs out = run_both(R"(
func.func @step(%w: tensor<30x20xf32>, %b: tensor<300xf32>, %gw: tensor<30x20xf32>, %gb: tensor<300xf32>,
                %s0: tensor<30x20xf32>, %s1: tensor<300xf32>, %s2: tensor<30x20xf32>, %s3: tensor<300xf32>,
                %t0: tensor<i64>, %t1: tensor<i64>, %lr: tensor<f64>, %rho: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>)
    -> (tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<i64>, tensor<i64>) {
  %p:2, %s:4, %t:2 = mstep.multi_tensor_update <adadelta> params(%w, %b : tensor<30x20xf32>, tensor<300xf32>) grads(%gw, %gb : tensor<30x20xf32>, tensor<300xf32>) states(%s0, %s1, %s2, %s3 : tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>) steps(%t0, %t1) lr(%lr) rho(%rho) eps(%eps) weight_decay(%wd) {maximize = true}
  return %p#0, %p#1, %s#0, %s#1, %s#2, %s#3, %t#0, %t#1 : tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<30x20xf32>, tensor<300xf32>, tensor<i64>, tensor<i64>
})",
                               optimizer_inputs(8, 4, {600, 300}, 2, {0.1, 0.9, 1e-6, 0.01}));
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // One launch for both parameters (MSTEP_CUDA_OPTIMIZER=multi), then one
  // lane for the step counters.
  EXPECT_EQ(out.plan.launches.size(), 2u);
  EXPECT_THAT(values_of<int64_t>(out.cuda[6]), ::testing::ElementsAre(5));
  // No fused multiply-add in the PTX: ref rounds every product.
  for (const CudaKernelInfo& kernel : out.plan.kernels)
    EXPECT_THAT(kernel.ptx, ::testing::Not(HasSubstr("fma.rn.f32"))) << kernel.name;
}

TEST(CudaOpLoopsHost, OneLaunchForAllParametersIsThePerTensorLaunchesBitForBit) {
  // AdamW over three parameters (sizes not multiples of the block, one
  // under a block): one launch whose blocks each update one tensor, equal
  // byte for byte to a launch per parameter and to ref.
  const char* text = R"(
func.func @step(%w: tensor<300xf32>, %b: tensor<257xf32>, %c: tensor<5x7xf32>, %gw: tensor<300xf32>, %gb: tensor<257xf32>, %gc: tensor<5x7xf32>,
                %m0: tensor<300xf32>, %m1: tensor<257xf32>, %m2: tensor<5x7xf32>, %v0: tensor<300xf32>, %v1: tensor<257xf32>, %v2: tensor<5x7xf32>,
                %t0: tensor<i64>, %t1: tensor<i64>, %t2: tensor<i64>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>)
    -> (tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<i64>, tensor<i64>, tensor<i64>) {
  %p:3, %s:6, %t:3 = mstep.multi_tensor_update <adamw> params(%w, %b, %c : tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>) grads(%gw, %gb, %gc : tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>) states(%m0, %m1, %m2, %v0, %v1, %v2 : tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>) steps(%t0, %t1, %t2) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd)
  return %p#0, %p#1, %p#2, %s#0, %s#1, %s#2, %s#3, %s#4, %s#5, %t#0, %t#1, %t#2 : tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<300xf32>, tensor<257xf32>, tensor<5x7xf32>, tensor<i64>, tensor<i64>, tensor<i64>
})";
  const auto inputs =
      optimizer_inputs(12, 6, {300, 257, 35}, 3, {1e-2, 0.9, 0.999, 1e-8, 0.05});
  const Outputs multi = run_both(text, inputs);
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(multi));
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.multi_tensor_launch = false;
  const Outputs per_tensor = run_both(text, inputs, options);
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(per_tensor));
  EXPECT_EQ(multi.cuda, per_tensor.cuda);
  // The update and the step counters; the update's blocks: 2 + 2 + 1.
  ASSERT_EQ(multi.plan.launches.size(), 2u);
  EXPECT_THAT(multi.plan.kernels[0].grid, ::testing::ElementsAre(5u, 1u, 1u));
  EXPECT_EQ(per_tensor.plan.launches.size(), 4u);
  // Kernel parameters for two tensors a launch (13 shared, the error word
  // among them; 8 a tensor): the first two tensors, then the third alone.
  options.codegen.multi_tensor_launch = true;
  options.codegen.multi_tensor_max_buffers = 13 + 2 * 8;
  const Outputs split = run_both(text, inputs, options);
  EXPECT_EQ(split.cuda, per_tensor.cuda);
  ASSERT_EQ(split.plan.launches.size(), 3u);
  EXPECT_THAT(split.plan.kernels[0].grid, ::testing::ElementsAre(4u, 1u, 1u));
}

TEST(CudaOpLoopsHost, AdamWithAmsgradAndWeightDecayIsRefsBitForBit) {
  const Outputs out = run_both(R"(
func.func @step(%w: tensor<257xf32>, %gw: tensor<257xf32>, %m: tensor<257xf32>, %v: tensor<257xf32>, %vmax: tensor<257xf32>,
                %t0: tensor<i64>, %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>)
    -> (tensor<257xf32>, tensor<257xf32>, tensor<257xf32>, tensor<257xf32>, tensor<i64>) {
  %p, %s:3, %t = mstep.multi_tensor_update <adam> params(%w : tensor<257xf32>) grads(%gw : tensor<257xf32>) states(%m, %v, %vmax : tensor<257xf32>, tensor<257xf32>, tensor<257xf32>) steps(%t0) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd) {amsgrad = true}
  return %p, %s#0, %s#1, %s#2, %t : tensor<257xf32>, tensor<257xf32>, tensor<257xf32>, tensor<257xf32>, tensor<i64>
})",
                               optimizer_inputs(5, 2, {257}, 1, {1e-3, 0.9, 0.999, 1e-8, 0.01}));
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaOpLoopsHost, AdamWAndNesterovSgdAreRefsBitForBit) {
  const Outputs out =
      run_both(R"(
func.func @step(%w: tensor<100xf32>, %gw: tensor<100xf32>, %m: tensor<100xf32>, %v: tensor<100xf32>,
                %u: tensor<100xf32>, %t0: tensor<i64>, %t1: tensor<i64>,
                %lr: tensor<f64>, %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>, %mom: tensor<f64>)
    -> (tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>) {
  %p, %s:2, %t = mstep.multi_tensor_update <adamw> params(%w : tensor<100xf32>) grads(%gw : tensor<100xf32>) states(%m, %v : tensor<100xf32>, tensor<100xf32>) steps(%t0) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd)
  %q, %r, %k = mstep.multi_tensor_update <sgd> params(%w : tensor<100xf32>) grads(%gw : tensor<100xf32>) states(%u : tensor<100xf32>) steps(%t1) lr(%lr) momentum(%mom) weight_decay(%wd) {nesterov = true}
  return %p, %s#0, %s#1, %q, %r : tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>
})",
               optimizer_inputs(5, 2, {100}, 2, {1e-2, 0.9, 0.999, 1e-8, 0.05, 0.9}));
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaOpLoopsHost, ClippedUpdatesL2AndInfNormAreRefsBitForBit) {
  // clip_grad_norm_ over two gradients (a norm per gradient, then the
  // total), the clipped gradients returned; large gradients so that the
  // coefficient is below one.
  std::vector<std::vector<char>> inputs = optimizer_inputs(4, 4, {64, 300}, 0, {0.05});
  for (int g : {2, 3}) {
    std::vector<float> v = values_of<float>(inputs[g]);
    for (float& x : v) x *= 10.f;
    inputs[g] = bytes_of(v);
  }
  for (const char* norm : {"2.0", "0x7FF0000000000000"}) {
    const std::string text =
        std::string(R"(
func.func @step(%w: tensor<64xf32>, %b: tensor<300xf32>, %gw: tensor<64xf32>, %gb: tensor<300xf32>, %lr: tensor<f64>)
    -> (tensor<64xf32>, tensor<300xf32>, tensor<64xf32>, tensor<300xf32>, tensor<f32>) {
  %p:2, %c:2, %n = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<64xf32>, tensor<300xf32>) grads(%gw, %gb : tensor<64xf32>, tensor<300xf32>) lr(%lr) {max_grad_norm = 1.0 : f64, grad_norm_type = )") +
        norm +
        R"( : f64} -> total_grad_norm tensor<f32> clipped_grads(tensor<64xf32>, tensor<300xf32>)
  return %p#0, %p#1, %c#0, %c#1, %n : tensor<64xf32>, tensor<300xf32>, tensor<64xf32>, tensor<300xf32>, tensor<f32>
})";
    const Outputs out = run_both(text.c_str(), inputs);
    ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out)) << norm;
    EXPECT_GT(values_of<float>(out.cuda[4])[0], 1.f) << norm; // it did clip
  }
}

TEST(CudaOpLoopsHost, SliceAndSliceScatterWithAStep) {
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<4x16x9xf32>, %s: tensor<4x5x9xf32>) -> (tensor<4x5x9xf32>, tensor<4x16x9xf32>) {
  %y = mstep.slice %x {dim = 1 : i64, end = 15 : i64, start = 2 : i64, step = 3 : i64} : tensor<4x16x9xf32> -> tensor<4x5x9xf32>
  %z = mstep.slice_scatter %x, %s {dim = 1 : i64, end = 15 : i64, start = 2 : i64, step = 3 : i64} : tensor<4x16x9xf32>, tensor<4x5x9xf32>
  return %y, %z : tensor<4x5x9xf32>, tensor<4x16x9xf32>
})",
                               {random_bytes(4 * 16 * 9, 30), random_bytes(4 * 5 * 9, 31)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

TEST(CudaOpLoopsHost, EmbeddingForwardAndBackwardWithRepeatedTokens) {
  // index_select rows of a [50, 24] table; index_add of the row gradients
  // back, tokens repeated so that rows accumulate (in index order, one
  // lane per column: no atomics).
  std::vector<int64_t> tokens(70);
  for (int i = 0; i < 70; ++i) tokens[i] = (i * 13) % 50 / 2;
  const Outputs out =
      run_both(R"(
func.func @step(%table: tensor<50x24xf32>, %t: tensor<70xi64>, %g: tensor<70x24xf32>) -> (tensor<70x24xf32>, tensor<50x24xf32>, tensor<3x70x8xf32>) {
  %e = mstep.index_select %table, %t {dim = 0 : i64} : tensor<50x24xf32>, tensor<70xi64> -> tensor<70x24xf32>
  %d = mstep.index_add %table, %t, %g {dim = 0 : i64} : tensor<50x24xf32>, tensor<70xi64>, tensor<70x24xf32>
  %r = mstep.reshape %table : tensor<50x24xf32> -> tensor<3x50x8xf32>
  %m = mstep.index_select %r, %t {dim = 1 : i64} : tensor<3x50x8xf32>, tensor<70xi64> -> tensor<3x70x8xf32>
  return %e, %d, %m : tensor<70x24xf32>, tensor<50x24xf32>, tensor<3x70x8xf32>
})",
               {random_bytes(50 * 24, 32), bytes_of(tokens), random_bytes(70 * 24, 33)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
}

/// index_add in its sequential form (a lane per column, a copy first) or
/// its owner form (a lane per output element), forced.
CudaCompileOptions index_add_form(bool owner) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.index_add_owner_max_ratio = owner ? std::numeric_limits<double>::infinity() : 0.0;
  return options;
}

TEST(CudaOpLoopsHost, IndexAddInBothFormsAddsDuplicatesInRefsOrder) {
  // Along dim 0 (an embedding gradient, f32 and bf16) and along a middle
  // dim with an i32 index (outer > 1); tokens repeated so that rows take
  // several additions whose order shows in the rounding.
  std::vector<int64_t> tokens(70);
  for (int i = 0; i < 70; ++i) tokens[i] = (i * 13) % 50 / 2;
  std::vector<int32_t> middle(9);
  for (int i = 0; i < 9; ++i) middle[i] = (i * 5) % 4;
  const char* text = R"(
func.func @step(%table: tensor<50x24xf32>, %t: tensor<70xi64>, %g: tensor<70x24xf32>, %hb: tensor<50x24xbf16>, %gb: tensor<70x24xbf16>, %x: tensor<3x4x5xf32>, %m: tensor<9xi32>, %s: tensor<3x9x5xf32>) -> (tensor<50x24xf32>, tensor<50x24xbf16>, tensor<3x4x5xf32>) {
  %d = mstep.index_add %table, %t, %g {dim = 0 : i64} : tensor<50x24xf32>, tensor<70xi64>, tensor<70x24xf32>
  %b = mstep.index_add %hb, %t, %gb {dim = 0 : i64} : tensor<50x24xbf16>, tensor<70xi64>, tensor<70x24xbf16>
  %y = mstep.index_add %x, %m, %s {dim = 1 : i64} : tensor<3x4x5xf32>, tensor<9xi32>, tensor<3x9x5xf32>
  return %d, %b, %y : tensor<50x24xf32>, tensor<50x24xbf16>, tensor<3x4x5xf32>
})";
  const std::vector<std::vector<char>> inputs = {
      random_bytes(50 * 24, 50), bytes_of(tokens), random_bytes(70 * 24, 51),
      bf16_bytes(50 * 24, 52), bf16_bytes(70 * 24, 53), random_bytes(3 * 4 * 5, 54),
      bytes_of(middle), random_bytes(3 * 9 * 5, 55)};
  for (bool owner : {false, true}) {
    const Outputs out = run_both(text, inputs, index_add_form(owner));
    ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out)) << (owner ? "owner" : "sequential");
    // The sequential form copies the input first (2 launches per op), the
    // owner form starts each lane from its input element (1 launch).
    EXPECT_EQ(out.plan.launches.size(), owner ? 3u : 6u);
  }
}

TEST(CudaOpLoopsHost, IndexAddChoosesTheOwnerFormForAnEmbeddingOfGptMinisSize) {
  // GPT-mini's token embedding gradient (1024 x 256 from 2048 tokens):
  // the owner form (one launch); a 50257 x 768 vocabulary from 8192
  // tokens: the sequential form (the owner lanes' index walks cost more).
  auto launches = [](const std::string& rows, const std::string& n) {
    const std::string table = "tensor<" + rows + "xf32>", index = "tensor<" + n + "xi64>",
                      grads = "tensor<" + n + rows.substr(rows.find('x')) + "xf32>";
    const std::string text = "func.func @step(%w: " + table + ", %t: " + index + ", %g: " + grads +
                             ") -> " + table + " {\n  %d = mstep.index_add %w, %t, %g {dim = 0 : i64} : " +
                             table + ", " + index + ", " + grads + "\n  return %d : " + table + "\n}";
    testing::CudaStepContext step(text.c_str());
    auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    return compiled.ok() ? compiled->plan.launches.size() : size_t{0};
  };
  EXPECT_EQ(launches("1024x256", "2048"), 1u);
  EXPECT_EQ(launches("50257x768", "8192"), 2u);
}

TEST(CudaOpLoopsHost, ABatchedMatmulWhoseBatchDimsBroadcastPartly) {
  // [2, 1, 4, 5] x [3, 5, 2] -> [2, 3, 4, 2]: each operand is expanded to
  // the result's batch dims (a kernel), then one strided cuBLASLt call
  // (a host GEMM here).
  testing::CudaStepContext step(R"(
func.func @step(%a: tensor<2x1x4x5xf32>, %b: tensor<3x5x2xf32>) -> tensor<2x3x4x2xf32> {
  %c = mstep.matmul %a, %b : tensor<2x1x4x5xf32>, tensor<3x5x2xf32> -> tensor<2x3x4x2xf32>
  return %c : tensor<2x3x4x2xf32>
})");
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_EQ(compiled->plan.matmuls.size(), 1u);
  EXPECT_EQ(compiled->plan.matmuls[0].batch, 6);
  const std::vector<std::vector<char>> inputs = {random_bytes(2 * 4 * 5, 60),
                                                 random_bytes(3 * 5 * 2, 61)};
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  testing::run_plan_on_host(step.context(), *compiled, values);
  auto ref = testing::ref_outputs(step.module(), inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  // Both sum 5 products in double and round once: the same floats.
  EXPECT_TRUE(values[compiled->plan.outputs[0]] == (*ref)[0]);
}

TEST(CudaOpLoopsHost, GatherAndScatterAddAlongEachDimWithRepeatedIndices) {
  // Index smaller than the input off the indexed dim (and than src),
  // indices repeated so that scatter_add adds duplicates (in index order,
  // one lane per position off the dim: no atomics); an i32 index too.
  auto indices = [](size_t n, int64_t size, int64_t seed) {
    std::vector<int64_t> v(n);
    for (size_t k = 0; k < n; ++k) v[k] = static_cast<int64_t>((k * 7 + seed) % size);
    return v;
  };
  std::vector<int32_t> narrow(3 * 4 * 2);
  for (size_t k = 0; k < narrow.size(); ++k) narrow[k] = static_cast<int32_t>((k * 5) % 3);
  const Outputs out = run_both(R"(
func.func @step(%x: tensor<4x6x3xf32>, %i0: tensor<7x5x2xi64>, %i1: tensor<3x4x2xi32>, %i2: tensor<4x6x9xi64>, %s: tensor<8x6x9xf32>) -> (tensor<7x5x2xf32>, tensor<3x4x2xf32>, tensor<4x6x9xf32>, tensor<4x6x3xf32>, tensor<4x6x3xf32>, tensor<4x6x3xf32>) {
  %g0 = mstep.gather %x, %i0 {dim = 0 : i64} : tensor<4x6x3xf32>, tensor<7x5x2xi64> -> tensor<7x5x2xf32>
  %g1 = mstep.gather %x, %i1 {dim = 1 : i64} : tensor<4x6x3xf32>, tensor<3x4x2xi32> -> tensor<3x4x2xf32>
  %g2 = mstep.gather %x, %i2 {dim = 2 : i64} : tensor<4x6x3xf32>, tensor<4x6x9xi64> -> tensor<4x6x9xf32>
  %a0 = mstep.scatter_add %x, %i0, %s {dim = 0 : i64} : tensor<4x6x3xf32>, tensor<7x5x2xi64>, tensor<8x6x9xf32>
  %a1 = mstep.scatter_add %x, %i1, %s {dim = 1 : i64} : tensor<4x6x3xf32>, tensor<3x4x2xi32>, tensor<8x6x9xf32>
  %a2 = mstep.scatter_add %x, %i2, %s {dim = 2 : i64} : tensor<4x6x3xf32>, tensor<4x6x9xi64>, tensor<8x6x9xf32>
  return %g0, %g1, %g2, %a0, %a1, %a2 : tensor<7x5x2xf32>, tensor<3x4x2xf32>, tensor<4x6x9xf32>, tensor<4x6x3xf32>, tensor<4x6x3xf32>, tensor<4x6x3xf32>
})",
                               {random_bytes(4 * 6 * 3, 40), bytes_of(indices(7 * 5 * 2, 4, 1)),
                                bytes_of(narrow), bytes_of(indices(4 * 6 * 9, 3, 2)),
                                random_bytes(8 * 6 * 9, 41)});
  ASSERT_NO_FATAL_FAILURE(expect_same_as_ref(out));
  // gather's first element, by hand: x[i0[0, 0, 0] = 1][0][0].
  EXPECT_EQ(values_of<float>(out.cuda[0])[0], testing::random_floats(4 * 6 * 3, 40)[1 * 18]);
}

} // namespace
} // namespace mstep::cuda
