// A fixture holding the GPU's cuda backend; its tests skip without a
// usable GPU (the reason is gpu_driver()'s status).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "lib/backends/cuda/CudaBackend.h"
#include "test/cuda/gpu/GpuDriver.h"

namespace mstep::cuda::testing {

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
