// copy_in / copy_out through pinned staging buffers: host memory the
// caller owns (pageable) is copied in chunks through two page-locked
// buffers, so each transfer runs at the bus's speed and the host copy of
// one chunk overlaps the device copy of the other. The host copy of a chunk
// is split across a few threads (HostCopyPool): one thread's memcpy was the
// bottleneck (5.8 GB/s through staging against 55 GB/s pinned, H200 host,
// 16 MiB chunks). All copies go on the
// context's stream, so they are ordered with the kernels queued there.
// Library-internal.
//
// Ownership: must not outlive its CudaContext. Thread-safety: one thread
// at a time (the staging buffers are shared by every copy).
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "lib/backends/cuda/CudaEvent.h"
#include "lib/backends/cuda/CudaMemory.h"
#include "lib/backends/cuda/HostCopyPool.h"

namespace mstep::cuda {

class CudaStaging {
public:
  static constexpr size_t kDefaultChunkBytes = size_t{32} << 20;

  /// Two pinned buffers of `chunk_bytes` each; host copies on
  /// `copy_threads` threads (0: HostCopyPool::default_threads()).
  static absl::StatusOr<std::unique_ptr<CudaStaging>>
  create(const CudaContext& context, size_t chunk_bytes = kDefaultChunkBytes,
         unsigned copy_threads = 0);

  /// Queues the copy of `source` to device address `target`. Returns once
  /// `source` has been read (it may be reused at once); the device copy
  /// may still be running, ordered before later work on the stream.
  absl::Status copy_in(CUdeviceptr target, std::span<const std::byte> source);
  /// Copies `target.size()` bytes from device address `source` after the
  /// work queued before it, and returns when they are in `target`.
  absl::Status copy_out(std::span<std::byte> target, CUdeviceptr source);
  /// A device-to-device copy on the stream (no staging).
  absl::Status copy_device(CUdeviceptr target, CUdeviceptr source, size_t bytes);

  size_t chunk_bytes() const { return chunk_bytes_; }
  unsigned copy_threads() const { return pool_.threads(); }

private:
  /// A pinned buffer and the event recorded after the last copy that used
  /// it; the buffer is free once the event is.
  struct Slot {
    CudaPinnedBuffer pinned;
    CudaEvent done;
    bool in_use = false;
  };
  CudaStaging(const CudaContext& context, size_t chunk_bytes, unsigned copy_threads)
      : context_(context), chunk_bytes_(chunk_bytes), pool_(copy_threads) {}
  /// Waits until `slot`'s last copy has run.
  absl::Status wait(Slot& slot);

  const CudaContext& context_;
  size_t chunk_bytes_;
  std::array<Slot, 2> slots_;
  HostCopyPool pool_;
};

} // namespace mstep::cuda
