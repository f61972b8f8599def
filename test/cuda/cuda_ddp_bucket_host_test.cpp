// DDP's gradient buckets in a cuda plan (issue 23): the second training
// step of an MLP wrapped in nn::DistributedDataParallel (a world of one:
// the bucket's mean all_reduce is an NCCL step of one rank), compiled for
// cuda and run on this CPU in plan order (HostStepCheck.h), every output
// (loss, gradients, weights, momentum) against ref's run of the same step.
// DDP starts every gradient at a multiple of 256 bytes in its bucket
// (zeros in the gaps), so each gradient's op writes straight into the
// bucket (plan aliases), the zeros are written by the cat in one launch,
// and no copy kernel fills the bucket. The split back into gradients
// (slices of the reduced bucket) are aliases at aligned offsets as any
// slice (CudaViews.h). A cat outside DDP with only some operands at
// aligned offsets copies only the others. Not GPU-verified.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "examples/models/Mlp.h"
#include "test/cuda/HostStepCheck.h"
#include "test/unit/GptTrainingGraph.h"

namespace mstep::cuda {
namespace {

/// The second training step (after the bucket rebuild) of
/// Mlp(in, hidden, out) under DDP with one bucket of every gradient, SGD
/// with momentum.
TraceGraph ddp_step_graph(int64_t in, int64_t hidden, int64_t out, bool as_view) {
  manual_seed(11);
  examples::Mlp model(in, hidden, out, /*dropout=*/0.0);
  nn::DistributedDataParallel ddp(model, {.gradient_as_bucket_view = as_view});
  EXPECT_EQ(ddp.bucket_indices().size(), 1u);
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    opt.zero_grad();
    std::vector<float> x(8 * in);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(((i * 29 + k * 5) % 83) / 83.0 - 0.5);
    std::vector<int64_t> y(8);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i * 3 + k) % out);
    nll_loss(model.forward(from_vector(x, {8, in})), from_vector(y, {8})).backward();
    opt.step();
    if (k == 1) graph = pending_graph();
    mark_step();
  }
  return graph;
}

/// The launches of the plan's cat kernels.
std::vector<CudaLaunchStep> cat_launches(const CudaPlan& plan) {
  std::vector<CudaLaunchStep> launches;
  for (const CudaLaunchStep& launch : plan.launches)
    if (launch.matmul < 0 && launch.attention < 0 && launch.collective < 0 &&
        absl::StartsWith(plan.kernels[launch.kernel].origin, "mstep.cat "))
      launches.push_back(launch);
  return launches;
}

/// The launches that write a 1-D value of `n` elements.
size_t launches_writing(const CudaPlan& plan, int64_t n) {
  size_t count = 0;
  for (const CudaLaunchStep& launch : plan.launches)
    for (int value : launch.writes)
      count += plan.values[value].shape.rank() == 1 && plan.values[value].numel() == n;
  return count;
}

/// The value the plan's bucket all_reduce reads.
int reduced_bucket(const CudaPlan& plan) {
  for (const CudaLaunchStep& launch : plan.launches)
    if (launch.collective >= 0 && plan.values[launch.args[0]].shape.rank() == 1 &&
        plan.values[launch.args[0]].numel() > 1)
      return launch.args[0];
  return -1;
}

size_t aliases_into(const CudaPlan& plan, int root) {
  size_t n = 0;
  for (const CudaAlias& alias : plan.aliases) n += alias.root == root;
  return n;
}

/// `bucket`: the value the plan's bucket all_reduce reads, whose cat is one
/// launch that only writes it (the zeros; every gradient is in place).
void expect_zeros_launch_only(const CudaPlan& plan, int& bucket) {
  bucket = reduced_bucket(plan);
  ASSERT_GE(bucket, 0) << describe_cuda_plan(plan);
  const std::vector<CudaLaunchStep> cats = cat_launches(plan);
  ASSERT_EQ(cats.size(), 1u) << describe_cuda_plan(plan);
  EXPECT_EQ(cats[0].args, std::vector<int>{bucket}) << describe_cuda_plan(plan);
}

// Gradients of 5, 80, 16 and 192 floats: padded to 256-byte slots
// (59, 48 and 48 floats of zeros), each is written where it sits in the
// bucket; the cat's one launch writes the zeros and reads nothing (a copy
// kernel would read its operand), and the zeros' fills launch nothing.
TEST(CudaDdpBucketHost, PaddedGradientsAreWrittenIntoTheBucket) {
  for (bool as_view : {true, false}) {
    SCOPED_TRACE(as_view ? "gradients as bucket views" : "gradients copied out");
    CompiledCudaStep compiled;
    ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(
        ddp_step_graph(12, 16, 5, as_view), 4, 1e-5f, &compiled));
    const CudaPlan& plan = compiled.plan;
    int bucket = -1;
    ASSERT_NO_FATAL_FAILURE(expect_zeros_launch_only(plan, bucket));
    EXPECT_GE(aliases_into(plan, bucket), 4u) << describe_cuda_plan(plan);
    // (No other value of the step has 59 or 48 elements.)
    EXPECT_EQ(launches_writing(plan, 59) + launches_writing(plan, 48), 0u)
        << describe_cuda_plan(plan);
  }
}

// Every gradient a multiple of 64 floats (256 bytes): each is written
// where it sits in the bucket, so no copy kernel fills it, and the plan
// has an alias into the bucket per gradient.
TEST(CudaDdpBucketHost, AlignedGradientsAreWrittenIntoTheBucket) {
  CompiledCudaStep compiled;
  ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(
      ddp_step_graph(64, 64, 64, /*as_view=*/true), 4, 1e-5f, &compiled));
  const int bucket = reduced_bucket(compiled.plan);
  ASSERT_GE(bucket, 0) << describe_cuda_plan(compiled.plan);
  EXPECT_TRUE(cat_launches(compiled.plan).empty()) << describe_cuda_plan(compiled.plan);
  EXPECT_GE(aliases_into(compiled.plan, bucket), 4u) << describe_cuda_plan(compiled.plan);
}

// gpt_train --ddp's step with the default buckets (one 25 MiB bucket,
// after the rebuild): its gradients, clipped and AdamW-updated weights as
// ref's, within CudaGptHost's bound for the composed attention. Its
// gradients of 32 floats (biases, norms) are padded, so every gradient is
// written in place and the cat is the zeros' one launch.
TEST(CudaDdpBucketHost, GptMinisStepWithTheDefaultBucketsMatchesRef) {
  CompiledCudaStep compiled;
  ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(
      mstep::testing::gpt_training_step_graph(3, /*ddp=*/true), 16, 5e-5f, &compiled));
  const CudaPlan& plan = compiled.plan;
  int bucket = -1;
  ASSERT_NO_FATAL_FAILURE(expect_zeros_launch_only(plan, bucket));
  std::printf("GPT-mini DDP step on cuda: %zu launches, %zu plan aliases into the bucket, "
              "%zu cat launch(es)\n",
              plan.launches.size(), aliases_into(plan, bucket), cat_launches(plan).size());
}

/// The pending step (one returned cat) compiled for cuda and run on the
/// host, equal to ref (the cat only moves bytes); `result` is the cat's
/// output, `cats` its one launch.
void compile_pending_cat(CompiledCudaStep& compiled, int& result,
                         std::vector<CudaLaunchStep>& cats) {
  const TraceGraph graph = pending_graph();
  ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(graph, 4, 0.0f, &compiled));
  ASSERT_EQ(compiled.plan.outputs.size(), 1u);
  result = compiled.plan.outputs[0];
  cats = cat_launches(compiled.plan);
  ASSERT_EQ(cats.size(), 1u) << describe_cuda_plan(compiled.plan);
}

// A cat of 64, 5, 59 and 64 floats, each computed by a kernel: those at
// byte offsets 0, 256 and 512 are written in place, the one at 276 is
// copied by the cat's one launch (which reads it); equal to ref.
TEST(CudaDdpBucketHost, CatCopiesOnlyTheOperandsAtUnalignedOffsets) {
  std::vector<Tensor> inputs;
  for (int64_t n : {64, 5, 59, 64}) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = float(i % 7) - 3.0f;
    inputs.push_back(from_vector(v, {n}));
  }
  // The parts are intermediates (not step outputs, which get buffers of
  // their own).
  auto doubled = [&](size_t k) { return inputs[k] * 2.0; };
  Tensor y = cat({doubled(0), doubled(1), doubled(2), doubled(3)}, 0);
  CompiledCudaStep compiled;
  int result = -1;
  std::vector<CudaLaunchStep> cats;
  ASSERT_NO_FATAL_FAILURE(compile_pending_cat(compiled, result, cats));
  const CudaPlan& plan = compiled.plan;
  ASSERT_EQ(cats[0].args.size(), 2u) << describe_cuda_plan(plan);  // one operand read
  EXPECT_EQ(cats[0].args[1], result) << describe_cuda_plan(plan);
  EXPECT_EQ(plan.values[cats[0].args[0]].numel(), 59) << describe_cuda_plan(plan);
  EXPECT_EQ(aliases_into(plan, result), 3u) << describe_cuda_plan(plan);
  mark_step();
}

// A cat of 5 floats, 59 zeros, 64 floats and 3 of 1.5 (a DDP bucket's
// form): the computed parts, at byte offsets 0 and 256, are written in
// place; the fills are written by the cat's one launch, which reads
// nothing, and the fills' own ops launch nothing; the result, zeros and
// 1.5 included, equals ref's.
TEST(CudaDdpBucketHost, CatWritesItsConstantFillsInOneLaunch) {
  std::vector<float> a(5), b(64);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(i) + 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) - 2.0f;
  Tensor xa = from_vector(a, {5}), xb = from_vector(b, {64});
  Tensor y = cat({xa * 2.0, zeros({59}), xb * 2.0, full({3}, 1.5)}, 0);
  CompiledCudaStep compiled;
  int result = -1;
  std::vector<CudaLaunchStep> cats;
  ASSERT_NO_FATAL_FAILURE(compile_pending_cat(compiled, result, cats));
  const CudaPlan& plan = compiled.plan;
  EXPECT_EQ(cats[0].args, std::vector<int>{result}) << describe_cuda_plan(plan);
  EXPECT_EQ(aliases_into(plan, result), 2u) << describe_cuda_plan(plan);
  EXPECT_EQ(launches_writing(plan, 59) + launches_writing(plan, 3), 0u) << describe_cuda_plan(plan);
  mark_step();
}

}  // namespace
}  // namespace mstep::cuda
