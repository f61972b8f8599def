// HostBuffer: a ref-backend buffer in host memory, 64-byte aligned, from
// the caching host allocator.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "lib/backends/ref/HostAllocator.h"
#include "mstep/runtime/Buffer.h"

namespace mstep::ref {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(TensorType type, Device device = Device{DeviceType::ref, 0});

  std::byte* bytes() { return data_.get(); }
  const std::byte* bytes() const { return data_.get(); }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T>
  const T* data() const { return reinterpret_cast<const T*>(data_.get()); }
  int64_t numel() const { return type().numel(); }

 private:
  struct Free {
    size_t bytes;
    void operator()(std::byte* p) const { host_free(p, bytes); }
  };
  std::unique_ptr<std::byte[], Free> data_{nullptr, Free{0}};
};

}  // namespace mstep::ref
