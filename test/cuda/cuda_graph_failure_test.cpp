// A fault inside a replayed CUDA graph (issue 22, bad input), on the fake
// driver: the launch is accepted (the work runs later), the next sync
// point's error names the graph's captured step and its work and says the
// context is unusable, and from then on every call of the backend (another
// replay, an allocation, a copy, synchronize, health) says the same
// instead of touching the driver.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaGraph.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class CudaGraphFailureTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaGraphFailureTest,
       AFaultInAReplayedGraphNamesTheStepAndEveryLaterCallSaysTheContextIsLost) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = CudaExecutable::create(*backend_, compiled->plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const TensorType type{Shape({8, 64}), DType::f32};
  BufferPtr x = input(type), y = input(type);
  std::vector<BufferPtr> outputs = {input(type), input(type)};
  auto graph = CudaGraph::record(*backend_, [&] {
    return (*exe)->run({x, y}, {.inputs = {}, .outputs = outputs}).status();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  // The step's three kernels, by name and op.
  EXPECT_THAT((*graph)->what(),
              AllOf(HasSubstr("cuda graph of a captured step (3 operations: kernel "),
                    HasSubstr("(mstep.exp #0)"), HasSubstr("(mstep.tanh #2)")));
  ASSERT_TRUE((*graph)->launch().ok()); // a good replay
  std::vector<float> host(type.numel());
  ASSERT_TRUE(backend_->copy_out(*outputs[0], host.data(), type.bytes()).ok());

  fake_.device_fault = CUDA_ERROR_ILLEGAL_ADDRESS;
  ASSERT_TRUE((*graph)->launch().ok()); // accepted: the fault comes when it runs
  absl::Status read = backend_->copy_out(*outputs[0], host.data(), type.bytes());
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.message(),
              AllOf(HasSubstr("cuda graph of a captured step (3 operations"),
                    HasSubstr("failed on the device"), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"),
                    HasSubstr("the CUDA context is unusable")));
  const size_t calls = fake_.calls.size();
  EXPECT_EQ((*graph)->launch().message(), read.message());
  EXPECT_EQ(backend_->allocate(type).status().message(), read.message());
  EXPECT_EQ(backend_->copy_in(*x, host.data(), type.bytes()).message(), read.message());
  EXPECT_EQ(backend_->synchronize().message(), read.message());
  EXPECT_EQ(backend_->health().message(), read.message());
  EXPECT_THAT((*exe)->run({x, y}).status().message(), HasSubstr(read.message()));
  EXPECT_EQ(fake_.calls.size(), calls); // none of them reached the driver
}

} // namespace
} // namespace mstep::cuda
