// A device fault on a real GPU (in cuda_driver_gpu_test's binary, label
// gpu; this file is linked last so it runs last, and run.sh runs it in a
// process of its own): a kernel writing through a null pointer faults with
// an illegal address; the error names the kernel and says the context is
// unusable, and every later call says the same instead of crashing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/TestKernels.h"
#include "test/cuda/gpu/GpuBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(CudaDeviceFaultGpuTest, AnIllegalAddressNamesTheKernelAndTheContextStaysReportedLost) {
  auto& driver = testing::gpu_driver();
  if (!driver.ok()) GTEST_SKIP() << driver.status().message();
  auto backend = CudaBackend::create(*driver);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto module = testing::load_test_kernels((*backend)->context(), {"write_out_of_bounds"});
  ASSERT_TRUE(module.ok()) << module.status();
  const CudaKernel* kernel = *(*module)->kernel("write_out_of_bounds");
  TensorType type{Shape{4}, DType::f32};
  BufferPtr buffer = *(*backend)->allocate(type);
  CudaKernelArgs args;
  args.add(CUdeviceptr{0}); // null
  const Buffer* writes[] = {buffer.get()};
  absl::Status queued = (*backend)->enqueue(
      "kernel write_out_of_bounds",
      [&] {
        return launch_kernel((*backend)->context(), *kernel,
                             {.grid = {4, 1, 1}, .block = {32, 1, 1}}, args);
      },
      {}, writes);
  float host[4];
  // Usually the fault surfaces at copy_out; if the device was quick, at
  // the event recorded right after the launch.
  absl::Status error = queued.ok() ? (*backend)->copy_out(*buffer, host, sizeof(host)) : queued;
  std::printf("device fault: %s\n", std::string(error.message()).c_str());
  ASSERT_FALSE(error.ok());
  EXPECT_THAT(error.message(), HasSubstr("kernel write_out_of_bounds"));
  EXPECT_THAT(error.message(), AnyOf(HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"),
                                     HasSubstr("CUDA_ERROR_LAUNCH_FAILED")));
  EXPECT_THAT(error.message(), HasSubstr("the CUDA context is unusable"));
  EXPECT_EQ((*backend)->health().message(), error.message());
  EXPECT_EQ((*backend)->synchronize().message(), error.message());
  EXPECT_EQ((*backend)->allocate(type).status().message(), error.message());
  EXPECT_EQ((*backend)->copy_in(*buffer, host, sizeof(host)).message(), error.message());
  buffer.reset();
  module->reset();
  backend->reset(); // tears down without crashing on the dead context
}

} // namespace
} // namespace mstep::cuda
