// Owned driver memory: device buffers (cuMemAlloc) and pinned host
// buffers (cuMemHostAlloc, the staging side of copies). Move-only RAII;
// each frees its memory in its context. Library-internal.
//
// Ownership: a buffer must not outlive the CudaContext it came from.
// Freeing device memory waits for work that uses it (cuMemFree
// synchronizes), so a buffer may be dropped with copies in flight.
#pragma once

#include <cstddef>

#include "lib/backends/cuda/CudaContext.h"

namespace mstep::cuda {

class CudaDeviceBuffer {
public:
  /// `bytes` of device memory (at least 1); out of memory is
  /// ResourceExhausted naming the size and the device.
  static absl::StatusOr<CudaDeviceBuffer> allocate(const CudaContext& context, size_t bytes);

  CudaDeviceBuffer() = default;
  CudaDeviceBuffer(CudaDeviceBuffer&& other) noexcept { *this = std::move(other); }
  CudaDeviceBuffer& operator=(CudaDeviceBuffer&& other) noexcept;
  ~CudaDeviceBuffer() { reset(); }

  CUdeviceptr pointer() const { return pointer_; }
  size_t size() const { return size_; }

private:
  void reset();
  const CudaContext* context_ = nullptr;
  CUdeviceptr pointer_ = 0;
  size_t size_ = 0;
};

class CudaPinnedBuffer {
public:
  /// `bytes` of page-locked host memory the device copies from and to
  /// at full speed.
  static absl::StatusOr<CudaPinnedBuffer> allocate(const CudaContext& context, size_t bytes);

  CudaPinnedBuffer() = default;
  CudaPinnedBuffer(CudaPinnedBuffer&& other) noexcept { *this = std::move(other); }
  CudaPinnedBuffer& operator=(CudaPinnedBuffer&& other) noexcept;
  ~CudaPinnedBuffer() { reset(); }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

private:
  void reset();
  const CudaContext* context_ = nullptr;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

/// "256 MiB", "12 bytes": sizes in errors.
std::string describe_bytes(size_t bytes);

} // namespace mstep::cuda
