// The conformance cases of the ops lowered as loop nests in session 28
// (CudaConvLoops.h, CudaPoolLoops.h, CudaCreationLoops.h: conv2d, the
// pools, triu/tril, rand/randn, pad) run whole on this CPU: each case's
// training step (forward and backward, the conformance driver's loss)
// compiled for cuda and run in plan order from its kernels' loop nests,
// against ref on the same inputs (HostStepCheck.h: floats within 1e-5 *
// (1 + |ref|), the rest equal). The checks of the single ops bit for bit
// are cuda_image_loops_host_test.cpp and cuda_creation_loops_host_test.cpp;
// this one runs them inside the fused steps the suite makes. The bf16
// and bool cases are left out (the step inputs are f32 and i64 only).
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "test/cuda/ConformanceStep.h"
#include "test/cuda/HostStepCheck.h"

namespace mstep::cuda::testing {
namespace {

bool in_scope(const std::string& name) {
  static constexpr std::array<const char*, 9> kPrefixes = {
      "conv2d_", "max_pool2d_", "avg_pool2d_", "triu_", "tril_", "rand_", "randn_", "pad_",
      "scatter_add_d1_f32_7x5"};
  if (name.find("bf16") != std::string::npos || name.find("bool") != std::string::npos) return false;
  for (const char* prefix : kPrefixes)
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

TEST(CudaConformanceHost, PoolConvTriangleRandomAndPadCasesRunOnTheHostAsRef) {
  int ran = 0;
  for (const conformance::ConformanceCase& c : conformance::all_cases()) {
    if (!in_scope(c.name)) continue;
    std::optional<TraceGraph> graph = step_graph(c);
    if (!graph || graph->nodes.empty()) continue;
    SCOPED_TRACE(c.name);
    // Integers in [1, 4]: scatter_add's indices stay inside its dim of 5.
    expect_step_on_host_matches_ref(*graph, 4, 1e-5f);
    ++ran;
  }
  std::printf("%d conformance cases ran on the host\n", ran);
  EXPECT_GE(ran, 45);
}

}  // namespace
}  // namespace mstep::cuda::testing
