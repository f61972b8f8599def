// Launching a kernel on a context's stream: its arguments packed as the
// kernel lays out its parameters, checked against that layout (count,
// offsets, sizes from cuKernelGetParamInfo) and the launch configuration
// checked against the device's limits before cuLaunchKernel, so a wrong
// launch is an error naming the kernel instead of garbage on the device.
// Library-internal.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "lib/backends/cuda/CudaModule.h"

namespace mstep::cuda {

/// Kernel arguments in a byte buffer at their natural alignment, the way
/// a kernel's parameters are laid out.
class CudaKernelArgs {
public:
  template <typename T> CudaKernelArgs& add(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are plain values");
    size_t offset = (bytes_.size() + alignof(T) - 1) / alignof(T) * alignof(T);
    bytes_.resize(offset + sizeof(T));
    std::memcpy(bytes_.data() + offset, &value, sizeof(T));
    params_.push_back({offset, sizeof(T)});
    return *this;
  }
  const std::vector<CudaKernelParam>& params() const { return params_; }
  const std::byte* data() const { return bytes_.data(); }

private:
  std::vector<std::byte> bytes_;
  std::vector<CudaKernelParam> params_;
};

/// Grid and block sizes (x, y, z) and dynamic shared memory.
struct CudaLaunchConfig {
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  unsigned shared_bytes = 0;
};

/// Queues `kernel` on `context`'s stream. Errors (nothing is queued): a
/// zero grid or block size, more than 1024 threads a block, arguments
/// that do not match the kernel's parameters (each names the kernel and
/// what it expects), or the driver refusing the launch.
absl::Status launch_kernel(const CudaContext& context, const CudaKernel& kernel,
                           const CudaLaunchConfig& config, const CudaKernelArgs& args);

} // namespace mstep::cuda
