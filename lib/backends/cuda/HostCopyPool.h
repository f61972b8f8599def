// A memcpy split across a few threads, for the host side of staging copies:
// one thread copies pageable memory into pinned memory at a fraction of the
// bus's speed (5.8 GB/s through staging against 55 GB/s pinned on an H200
// host), several together approach it. Library-internal.
//
// Thread-safety: copy() may be called from one thread at a time (the
// staging that owns the pool is single-threaded).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace mstep::cuda {

class HostCopyPool {
public:
  /// `threads` in all, the calling thread included (1: a plain memcpy).
  explicit HostCopyPool(unsigned threads);
  ~HostCopyPool();
  HostCopyPool(const HostCopyPool&) = delete;
  HostCopyPool& operator=(const HostCopyPool&) = delete;

  /// memcpy(target, source, bytes): below `min_parallel_bytes` on the
  /// calling thread, else in one slice per thread (cache-line aligned).
  void copy(void* target, const void* source, size_t bytes);
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

  /// The pool size staging uses: the hardware's threads, at most 8.
  static unsigned default_threads();
  static constexpr size_t min_parallel_bytes = size_t{1} << 20;

private:
  void worker(unsigned index);
  /// Slice `index` of the current job.
  void copy_slice(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  // The current job, written under mutex_ before `generation_` moves on.
  std::byte* target_ = nullptr;
  const std::byte* source_ = nullptr;
  size_t bytes_ = 0;
  unsigned long generation_ = 0;
  unsigned remaining_ = 0;
  bool stopping_ = false;
};

} // namespace mstep::cuda
