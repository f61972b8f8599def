// The memory half of a backend whose buffers are host memory (ref, cpu,
// xla): HostBuffers from the caching host allocator, zero-copy wraps,
// plain copies, nothing to wait for. Each backend adds its name, its
// executables and what it supports.
#pragma once

#include <functional>
#include <memory>

#include "lib/backends/host/HostBuffer.h"
#include "mstep/runtime/Backend.h"

namespace mstep::host {

class HostMemoryBackend : public Backend {
 public:
  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override {
    return std::make_shared<HostBuffer>(type, device());
  }

  absl::StatusOr<BufferPtr> wrap_host(const TensorType& type, void* data,
                                      std::function<void()> release) override {
    return host_wrap(type, device(), data, std::move(release));
  }

  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override {
    return host_copy_in(dst, src, bytes);
  }

  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override {
    return host_copy_out(src, dst, bytes);
  }

  absl::Status synchronize() override { return absl::OkStatus(); }

 private:
  Device device() const { return Device{device_type(), 0}; }
};

}  // namespace mstep::host
