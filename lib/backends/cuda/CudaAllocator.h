// A caching, stream-ordered device allocator (PyTorch's CUDA caching
// allocator, reduced to one stream): a released block goes to a free list
// of its size class instead of cuMemFree, and the next request of that
// class takes it back without calling the driver. cuMemAlloc runs only on
// a miss. Library-internal.
//
// Why reuse needs no event: every piece of work that touches device memory
// is queued on the one stream of the allocator's context (CudaContext), so
// work queued after a block is handed out again runs after every earlier
// use of it has finished. A block released while a kernel still writes it
// is therefore safe to give out at once. (A second stream would need an
// event per block; there is none.)
//
// Size classes: a request is rounded up to a multiple of 512 bytes up to
// 1 MiB, and of 2 MiB above, and only a block of exactly that class is
// reused (no splitting). Out of memory on a miss frees the whole cache
// and tries once more; then ResourceExhausted names the request, the
// bytes in use and the bytes that were cached.
//
// Ownership: keeps its context alive; the memory of blocks still handed
// out when it is destroyed is freed with it. Thread-safety: every member
// may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "lib/backends/cuda/CudaContext.h"

namespace mstep::cuda {

/// What the allocator has done so far.
struct CudaAllocatorStats {
  size_t bytes_in_use = 0;     ///< handed out, by size class
  size_t peak_bytes_in_use = 0;
  size_t bytes_cached = 0;     ///< on free lists
  size_t device_allocations = 0; ///< cuMemAlloc calls that succeeded
  size_t device_frees = 0;     ///< cuMemFree calls
  size_t cache_hits = 0;       ///< requests served from a free list
  size_t requests = 0;         ///< allocate() calls of at least one byte
};

class CudaAllocator {
public:
  /// A block of device memory: `pointer` is 0 for a 0-byte request.
  struct Block {
    CUdeviceptr pointer = 0;
    size_t size = 0; ///< the size class (what is reserved)
  };

  explicit CudaAllocator(std::shared_ptr<const CudaContext> context)
      : context_(std::move(context)) {}
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator&) = delete;
  CudaAllocator& operator=(const CudaAllocator&) = delete;

  /// The size class of a request of `bytes` (0 stays 0).
  static size_t size_class(size_t bytes);

  /// A block of at least `bytes` (see the size classes above).
  absl::StatusOr<Block> allocate(size_t bytes);
  /// Returns `block` to the cache (stream-ordered, see above). A block
  /// this allocator did not hand out, or one released twice, is ignored
  /// and counted in bad_releases().
  void release(Block block);
  /// cuMemFree of every cached block; blocks in use stay.
  absl::Status empty_cache();

  CudaAllocatorStats stats() const;
  size_t bad_releases() const;
  const CudaContext& context() const { return *context_; }

private:
  /// Frees the cached blocks; call with mutex_ held.
  absl::Status empty_cache_locked();

  std::shared_ptr<const CudaContext> context_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<CUdeviceptr>> free_; // by size class
  absl::flat_hash_map<CUdeviceptr, size_t> in_use_; // pointer -> size class
  CudaAllocatorStats stats_;
  size_t bad_releases_ = 0;
};

} // namespace mstep::cuda
