// A test fixture: a CudaBackend over the fake driver, for running compiled
// steps' plans without a GPU (CudaExecutable, the arena).
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda::testing {

class FakeCudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto backend = CudaBackend::create(fake_.driver());
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  /// The fake's kernel launches from call `before` on.
  std::vector<FakeCall> launches_since(size_t before) const {
    std::vector<FakeCall> launches;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel") launches.push_back(fake_.calls[i]);
    return launches;
  }
  /// Makes every kernel of `plan` known to the fake (pointer parameters).
  void add_kernels(const CudaPlan& plan) {
    // In the plan's kernel order (the executable loads them so), each
    // with the argument count of a launch that uses it.
    std::vector<size_t> args(plan.kernels.size(), 0);
    for (const CudaLaunchStep& launch : plan.launches)
      if (launch.matmul < 0 && launch.attention < 0 && launch.collective < 0) args[launch.kernel] = launch.args.size();
    // (A cuBLASLt epilogue's fallback kernels, too.)
    for (const CudaMatmulInfo& matmul : plan.matmuls)
      for (const CudaLaunchStep& launch : matmul.fallback) args[launch.kernel] = launch.args.size();
    for (size_t k = 0; k < plan.kernels.size(); ++k) {
      if (plan.kernels[k].slots.empty()) {
        fake_.add_kernel(plan.kernels[k].name, args[k]);
        continue;
      }
      // A custom op's kernel: pointers and scalars at their natural alignment.
      std::vector<CudaKernelParam> params;
      size_t offset = 0;
      for (const CudaKernelSlot& slot : plan.kernels[k].slots) {
        const size_t size = slot.arg >= 0 ? 8 : slot.bytes;
        offset = (offset + size - 1) / size * size;
        params.push_back({offset, size});
        offset += size;
      }
      fake_.add_kernel(plan.kernels[k].name, std::move(params));
    }
  }
  /// A new device buffer of `type` (null, with a test failure, if refused).
  BufferPtr input(const TensorType& type) {
    auto buffer = backend_->allocate(type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return buffer.ok() ? *buffer : nullptr;
  }
  FakeCudaDriver fake_;
  std::unique_ptr<CudaBackend> backend_;
};

} // namespace mstep::cuda::testing
