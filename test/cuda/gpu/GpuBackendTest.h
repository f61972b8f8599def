// A fixture holding the GPU's cuda backend; its tests skip without a
// usable GPU (the reason is gpu_driver()'s status).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/TestKernels.h"
#include "test/cuda/gpu/GpuDriver.h"

namespace mstep::cuda::testing {

/// The test kernels `names` for `context`'s GPU: its architecture's cubin,
/// with the PTX for the driver's JIT to fall back on (TestKernels.h).
inline absl::StatusOr<std::unique_ptr<CudaKernelModule>> load_test_kernels(
    const CudaContext& context, const std::vector<std::string>& names) {
  const std::string arch = std::to_string(context.device().compute_major) + "0";
  return CudaKernelModule::load(context, read_test_kernel("test_kernels.sm_" + arch + ".cubin"),
                                read_test_kernel("test_kernels.compute_80.ptx"), names);
}

class GpuBackendTest : public ::testing::Test {
protected:
  /// Subclasses call this first and return if IsSkipped() or
  /// HasFatalFailure().
  void SetUp() override {
    auto& driver = gpu_driver();
    if (!driver.ok()) GTEST_SKIP() << driver.status().message();
    auto backend = CudaBackend::create(*driver);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }

  std::unique_ptr<CudaBackend> backend_;
};

} // namespace mstep::cuda::testing
