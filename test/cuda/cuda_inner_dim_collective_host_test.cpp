// all_gather and reduce_scatter along an inner dim on cuda (issue 23): the
// API records them as permutes around a collective along dim 0, so the
// cuda plan (whose NCCL calls work along dim 0 only) takes them; compiled
// and run on this CPU in plan order in a world of one (HostStepCheck.h),
// every output against ref's run, including the gradient through them.
// Not GPU-verified.
#include <gtest/gtest.h>

#include "test/cuda/HostStepCheck.h"

namespace mstep::cuda {
namespace {

namespace dist = mstep::distributed;

TEST(CudaInnerDimCollectiveHost, GatherAndScatterAlongDimOneMatchRef) {
  std::vector<float> v(2 * 3 * 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i % 9) - 4.0f;
  Tensor w = from_vector(v, {2, 3, 4}).requires_grad_();
  Tensor gathered = dist::all_gather(w * 2.0, 1);
  Tensor scattered = dist::reduce_scatter(gathered, dist::ReduceOp::sum, 2);
  sum(scattered * scattered).backward();
  Tensor grad = w.grad();
  const TraceGraph graph = pending_graph();
  for (const GraphNode& node : graph.nodes)
    if (node.op == OpKind::all_gather || node.op == OpKind::reduce_scatter)
      EXPECT_EQ(attr_int_or(node.attrs, AttrName::dim, -1), 0) << graph.to_text();
  CompiledCudaStep compiled;
  ASSERT_NO_FATAL_FAILURE(testing::expect_step_on_host_matches_ref(graph, 4, 0.0f, &compiled));
  size_t collectives = 0;
  for (const CudaLaunchStep& launch : compiled.plan.launches) collectives += launch.collective >= 0;
  EXPECT_GE(collectives, 2u) << describe_cuda_plan(compiled.plan);
  mark_step();
}

}  // namespace
}  // namespace mstep::cuda
