// validate_cuda_definitions: a plan whose step reads bytes no earlier step
// wrote (a read of uninitialized device memory, what compute-sanitizer's
// initcheck reports on a GPU) is refused, naming the step and the value.
// The plans are written by hand here; every compiled plan (conformance
// cases, both examples) passes the same check inside compile_cuda_step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaPlanValidation.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

/// %0 an input f32[4]; %1 .. %(n-1) computed f32[4] values; one kernel.
CudaPlan plan_of_values(int n) {
  CudaPlan plan;
  plan.values.assign(n, TensorType{Shape({4}), DType::f32});
  plan.num_inputs = 1;
  plan.kernels.push_back({.name = "k", .origin = "mstep.exp #0"});
  return plan;
}

TEST(CudaPlanDefinitions, AChainOfWritesThenReadsPasses) {
  CudaPlan plan = plan_of_values(3);
  plan.launches.push_back({.kernel = 0, .args = {0, 1}, .writes = {1}});
  plan.launches.push_back({.kernel = 0, .args = {1, 2}, .writes = {2}});
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);
}

TEST(CudaPlanDefinitions, AReadBeforeTheWriteIsRefusedNamingTheStepAndValue) {
  CudaPlan plan = plan_of_values(3);
  plan.launches.push_back({.kernel = 0, .args = {1, 2}, .writes = {2}});
  plan.launches.push_back({.kernel = 0, .args = {0, 1}, .writes = {1}});
  const absl::Status status = validate_cuda_definitions(plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("launch 0"));
  EXPECT_THAT(status.message(), HasSubstr("mstep.exp #0"));
  EXPECT_THAT(status.message(), HasSubstr("reads %1 (f32[4]) before any step writes it"));
  // validate_cuda_plan (what a plan read from disk passes) includes it.
  EXPECT_THAT(validate_cuda_plan(plan).message(), HasSubstr("uninitialized device memory"));
}

TEST(CudaPlanDefinitions, AKernelsOwnResultsAreNotReads) {
  // A read-modify-write argument (listed in writes) is the kernel's own;
  // the error word is reset before each run.
  CudaPlan plan = plan_of_values(3);
  plan.error_word = 2;
  plan.launches.push_back({.kernel = 0, .args = {0, 2, 1}, .writes = {2, 1}});
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);
}

TEST(CudaPlanDefinitions, AliasesOfOneRootAddUpToItsBytes) {
  // %1 f32[8] is written through its halves %2 (bytes 0..16) and %3
  // (bytes 16..32), then read whole by the last launch.
  CudaPlan plan = plan_of_values(5);
  plan.values[1] = TensorType{Shape({8}), DType::f32};
  plan.aliases = {{.value = 2, .root = 1, .byte_offset = 0},
                  {.value = 3, .root = 1, .byte_offset = 16}};
  plan.launches.push_back({.kernel = 0, .args = {0, 2}, .writes = {2}});
  plan.launches.push_back({.kernel = 0, .args = {0, 3}, .writes = {3}});
  plan.launches.push_back({.kernel = 0, .args = {1, 4}, .writes = {4}});
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);

  // Without the second half's write, byte 16 of the root was never written.
  plan.launches.erase(plan.launches.begin() + 1);
  EXPECT_THAT(validate_cuda_definitions(plan).message(),
              HasSubstr("reads %1 (f32[8]) before any step writes it: byte 16"));

  // A read of the written half alone is fine; of the other half, not.
  plan.launches.back() = {.kernel = 0, .args = {2, 4}, .writes = {4}};
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);
  plan.launches.back() = {.kernel = 0, .args = {3, 4}, .writes = {4}};
  EXPECT_THAT(validate_cuda_definitions(plan).message(), HasSubstr("byte 16 of its root %1"));
}

TEST(CudaPlanDefinitions, LibraryCallsReadEveryArgument) {
  // A cuBLASLt call reads A and B even when one of them is also its C
  // (which a compiled plan never does, and which would read C unwritten).
  CudaPlan plan = plan_of_values(3);
  CudaMatmulInfo matmul{.origin = "mstep.matmul #1"};
  matmul.shape.m = matmul.shape.n = matmul.shape.k = 2;
  plan.matmuls.push_back(matmul);
  plan.launches.push_back({.matmul = 0, .args = {0, 1}, .writes = {1}});
  EXPECT_THAT(validate_cuda_definitions(plan).message(),
              HasSubstr("launch 0 (cublaslt matmul"));
  plan.launches.front().args = {0, 0};
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);
}

TEST(CudaPlanDefinitions, AnEpilogueFallbackReadsAfterItsCall) {
  // The fallback (the bias add over C in place) reads C, which the call
  // wrote, and a bias no step wrote: refused, naming the fallback.
  CudaPlan plan = plan_of_values(4);
  CudaMatmulInfo matmul{.origin = "mstep.matmul #1"};
  matmul.shape.m = matmul.shape.n = matmul.shape.k = 2;
  matmul.shape.bias = true;
  matmul.fallback.push_back({.kernel = 0, .args = {1, 2}, .writes = {1}});
  plan.matmuls.push_back(matmul);
  plan.launches.push_back({.matmul = 0, .args = {0, 0, 3}, .writes = {1}});
  plan.launches.insert(plan.launches.begin(), {.kernel = 0, .args = {0, 3}, .writes = {3}});
  EXPECT_THAT(validate_cuda_definitions(plan).message(),
              HasSubstr("launch 1's fallback (kernel k (mstep.exp #0)"));
  plan.matmuls[0].fallback[0].args = {1, 3};
  EXPECT_TRUE(validate_cuda_definitions(plan).ok()) << validate_cuda_definitions(plan);
}

}  // namespace
}  // namespace mstep::cuda
