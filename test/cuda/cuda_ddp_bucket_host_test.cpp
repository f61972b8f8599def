// DDP's gradient buckets in a cuda plan (issue 23): the second training
// step of an MLP wrapped in nn::DistributedDataParallel (a world of one:
// the bucket's mean all_reduce is an NCCL step of one rank), compiled for
// cuda and run on this CPU in plan order (HostStepCheck.h), every output
// (loss, gradients, weights, momentum) against ref's run of the same step.
// The bucket's flattening (mstep.cat of the gradients) is a copy kernel per
// gradient where a gradient's offset in the bucket is not aligned; where
// every offset is, each gradient's op writes straight into the bucket (plan
// aliases) and the cat launches nothing. The split back into gradients
// (slices of the reduced bucket) are aliases at aligned offsets as any
// slice (CudaViews.h). Not GPU-verified.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

size_t count_cat_kernels(const CudaPlan& plan) {
  size_t n = 0;
  for (const CudaKernelInfo& kernel : plan.kernels)
    if (absl::StartsWith(kernel.origin, "mstep.cat ")) ++n;
  return n;
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

// Gradients of 5, 80, 16 and 192 floats: in any order, some offsets in the
// bucket are not multiples of 256 bytes, so the bucket is filled by copy
// kernels (one launch per gradient).
TEST(CudaDdpBucketHost, UnalignedGradientsAreCopiedIntoTheBucket) {
  for (bool as_view : {true, false}) {
    SCOPED_TRACE(as_view ? "gradients as bucket views" : "gradients copied out");
    CompiledCudaStep compiled;
    ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(
        ddp_step_graph(12, 16, 5, as_view), 4, 1e-5f, &compiled));
    ASSERT_GE(reduced_bucket(compiled.plan), 0) << describe_cuda_plan(compiled.plan);
    EXPECT_EQ(count_cat_kernels(compiled.plan), 4u) << describe_cuda_plan(compiled.plan);
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
  EXPECT_EQ(count_cat_kernels(compiled.plan), 0u) << describe_cuda_plan(compiled.plan);
  EXPECT_GE(aliases_into(compiled.plan, bucket), 4u) << describe_cuda_plan(compiled.plan);
}

// gpt_train --ddp's step with the default buckets (one 25 MiB bucket,
// after the rebuild): its gradients, clipped and AdamW-updated weights as
// ref's, within CudaGptHost's bound for the composed attention.
TEST(CudaDdpBucketHost, GptMinisStepWithTheDefaultBucketsMatchesRef) {
  CompiledCudaStep compiled;
  ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(
      mstep::testing::gpt_training_step_graph(3, /*ddp=*/true), 16, 5e-5f, &compiled));
  EXPECT_GE(reduced_bucket(compiled.plan), 0) << describe_cuda_plan(compiled.plan);
}

}  // namespace
}  // namespace mstep::cuda
