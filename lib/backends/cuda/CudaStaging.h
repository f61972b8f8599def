// copy_in / copy_out through pinned staging buffers: host memory the
// caller owns (pageable) is copied in chunks through two page-locked
// buffers, so each transfer runs at the bus's speed and the host copy of
// one chunk overlaps the device copy of the other. The host copy of a chunk
// is split across a few threads (HostCopyPool): one thread's memcpy was the
// bottleneck (5.8 GB/s through staging against 55 GB/s pinned, H200 host,
// 16 MiB chunks). All copies go on the
// context's stream, so they are ordered with the kernels queued there.
// A copy_in of at most kRingCopyBytes (a learning rate, a replay's RNG
// state, a batch of token ids) goes through a ring of pinned memory
// instead of a chunk buffer: reusing one chunk buffer would wait for the
// copy before it, which runs only once all the work queued before that
// copy has run, so every such copy would hold the host to about one step
// ahead of the device. The ring is cut into groups; a group's event is
// recorded when the ring leaves it, and waited for only when the ring
// comes round to it again.
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
  /// The ring: kRingGroups groups of kRingGroupBytes. A copy_in of at
  /// most kRingCopyBytes (and at most a chunk) goes through it, at the
  /// next multiple of kRingAlignment.
  static constexpr size_t kRingGroups = 16, kRingGroupBytes = size_t{256} << 10;
  static constexpr size_t kRingCopyBytes = kRingGroupBytes, kRingAlignment = 64;

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
  /// A copy_in through the ring (allocated on first use).
  absl::Status copy_in_ring(CUdeviceptr target, std::span<const std::byte> source);
  /// Leaves the ring's group `group` (its event recorded) for the start of
  /// the next one.
  absl::Status close_ring_group(size_t group);

  const CudaContext& context_;
  size_t chunk_bytes_;
  std::array<Slot, 2> slots_;
  /// The ring's memory; each group's `done` is recorded after the last
  /// copy from it.
  CudaPinnedBuffer ring_;
  std::array<Slot, kRingGroups> ring_groups_;
  /// The byte offset the next copy takes.
  size_t ring_next_ = 0;
  HostCopyPool pool_;
};

} // namespace mstep::cuda
