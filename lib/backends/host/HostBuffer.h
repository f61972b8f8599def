// HostBuffer: a host-memory buffer, 64-byte aligned, from the caching host
// allocator. Every host-memory backend (ref, cpu) uses it, so a cpu step can
// run a ref kernel on its buffers. A view (HostBuffer::view) points into memory
// someone else owns, such as the cpu backend's arena, and frees nothing.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backends/host/HostAllocator.h"
#include "mstep/runtime/Buffer.h"

namespace mstep::host {

class HostBuffer : public Buffer {
public:
  /// A new block of type.bytes(); `device` is the backend's (ref by default).
  explicit HostBuffer(TensorType type, Device device = Device{DeviceType::ref, 0});
  /// A buffer over `data` (owned elsewhere, at least type.bytes() long).
  static HostBuffer view(TensorType type, Device device, std::byte* data);
  /// Points a view at other memory; views only.
  void rebind(std::byte* data);
  /// A buffer over host memory the embedding host owns (the C API's
  /// mstep_tensor_wrap_host): `release` runs when the buffer is destroyed.
  static std::shared_ptr<HostBuffer> external(TensorType type, Device device, std::byte* data,
                                              std::function<void()> release);
  ~HostBuffer() override;
  HostBuffer(HostBuffer&&) = default;
  HostBuffer& operator=(HostBuffer&&) = default;

  std::byte* bytes() { return data_.get(); }
  const std::byte* bytes() const { return data_.get(); }
  template <typename T> T* data() { return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* data() const { return reinterpret_cast<const T*>(data_.get()); }
  int64_t numel() const { return type().numel(); }

private:
  HostBuffer(TensorType type, Device device, std::byte* view_of);

  struct Free {
    size_t bytes;
    bool owned = true;
    void operator()(std::byte* p) const {
      if (owned) host_free(p, bytes);
    }
  };
  std::unique_ptr<std::byte[], Free> data_{nullptr, Free{0}};
  std::function<void()> release_; // external memory only
};

/// Backend::wrap_host for host buffers (every host-memory backend): zero-copy
/// when `data` is 64-byte aligned (what the kernels may assume), else
/// Unimplemented so that the caller copies.
absl::StatusOr<std::shared_ptr<Buffer>> host_wrap(const TensorType& type, Device device, void* data,
                                                  std::function<void()> release);

/// Backend::copy_in / copy_out for host buffers (every host-memory backend):
/// `bytes` must be the buffer's whole size.
absl::Status host_copy_in(Buffer& dst, const void* src, size_t bytes);
absl::Status host_copy_out(const Buffer& src, void* dst, size_t bytes);

} // namespace mstep::host
