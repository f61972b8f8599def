// HostCopyPool: workers wait for a new job generation, copy their slice,
// and the last one to finish wakes the caller (who copied slice 0).
#include "lib/backends/cuda/HostCopyPool.h"

#include <algorithm>
#include <cstring>

namespace mstep::cuda {

HostCopyPool::HostCopyPool(unsigned threads) {
  for (unsigned i = 1; i < std::max(threads, 1u); ++i) workers_.emplace_back([this, i] { worker(i); });
}

HostCopyPool::~HostCopyPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

unsigned HostCopyPool::default_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

void HostCopyPool::copy_slice(unsigned index) {
  const size_t n = threads();
  // Slices of whole cache lines; the last takes the rest.
  size_t slice = (bytes_ / n + 63) / 64 * 64;
  size_t begin = std::min(bytes_, slice * index);
  size_t end = index + 1 == n ? bytes_ : std::min(bytes_, begin + slice);
  if (end > begin) std::memcpy(target_ + begin, source_ + begin, end - begin);
}

void HostCopyPool::copy(void* target, const void* source, size_t bytes) {
  if (workers_.empty() || bytes < min_parallel_bytes) {
    std::memcpy(target, source, bytes);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    target_ = static_cast<std::byte*>(target);
    source_ = static_cast<const std::byte*>(source);
    bytes_ = bytes;
    remaining_ = static_cast<unsigned>(workers_.size());
    ++generation_;
  }
  start_.notify_all();
  copy_slice(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return remaining_ == 0; });
}

void HostCopyPool::worker(unsigned index) {
  unsigned long seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    lock.unlock();
    copy_slice(index);
    lock.lock();
    if (--remaining_ == 0) done_.notify_one();
  }
}

} // namespace mstep::cuda
