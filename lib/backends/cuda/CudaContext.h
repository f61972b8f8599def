// One device as one backend instance sees it: the device's primary
// context (retained) and a stream of its own, plus what the device is
// (name, compute capability, SM count). Everything the instance does runs
// on that stream, in order. Library-internal.
//
// Ownership: a CudaContext keeps its driver alive; buffers, events,
// modules and staging buffers made from it must not outlive it.
// Thread-safety: each call makes the context current on the calling
// thread first, so any thread may use it; calls on one stream are ordered
// by the order the host makes them, which is the caller's to keep.
#pragma once

#include <memory>
#include <string>

#include "lib/backends/cuda/CudaDriverApi.h"

namespace mstep::cuda {

/// What a device is, read once at context creation.
struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;             ///< "NVIDIA H100 80GB HBM3"
  int compute_major = 0;        ///< 9 for sm_90
  int compute_minor = 0;        ///< 0 for sm_90
  int multiprocessor_count = 0; ///< SMs
  size_t total_memory = 0;      ///< bytes
  /// "sm_90".
  std::string arch() const;
};

class CudaContext {
public:
  /// Retains device `ordinal`'s primary context and creates a
  /// non-blocking stream on it. An ordinal out of range is an error that
  /// names the device count.
  static absl::StatusOr<std::unique_ptr<CudaContext>>
  create(std::shared_ptr<const CudaDriver> driver, int ordinal = 0);

  /// Waits for the stream, destroys it and releases the primary context.
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const CudaDriverApi& api() const { return driver_->api; }
  const CudaDeviceInfo& device() const { return device_; }
  CUstream stream() const { return stream_; }
  /// The primary context (for driver calls that name one).
  CUcontext cu_context() const { return context_; }

  /// cuCtxSetCurrent on the calling thread.
  absl::Status make_current() const;
  /// Waits until everything queued on the stream has run; a deferred
  /// device error (an illegal address) surfaces here.
  absl::Status synchronize() const;

private:
  CudaContext(std::shared_ptr<const CudaDriver> driver, CudaDeviceInfo device, CUdevice handle)
      : driver_(std::move(driver)), device_(std::move(device)), handle_(handle) {}

  std::shared_ptr<const CudaDriver> driver_;
  CudaDeviceInfo device_;
  CUdevice handle_;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
};

} // namespace mstep::cuda
