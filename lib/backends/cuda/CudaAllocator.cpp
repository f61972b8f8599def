// CudaAllocator: free lists by size class, cuMemAlloc on a miss, one retry
// after emptying the cache when the device is out of memory.
#include "lib/backends/cuda/CudaAllocator.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaMemory.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {
constexpr size_t kSmallLimit = size_t{1} << 20; // up to here: 512-byte steps
constexpr size_t kSmallStep = 512;
constexpr size_t kLargeStep = size_t{2} << 20;

size_t round_up(size_t bytes, size_t step) { return (bytes + step - 1) / step * step; }
} // namespace

size_t CudaAllocator::size_class(size_t bytes) {
  if (bytes == 0) return 0;
  return bytes <= kSmallLimit ? round_up(bytes, kSmallStep) : round_up(bytes, kLargeStep);
}

CudaAllocator::~CudaAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  (void)empty_cache_locked();
  if (context_->make_current().ok())
    for (const auto& [pointer, size] : in_use_) (void)context_->api().cuMemFree(pointer);
}

absl::StatusOr<CudaAllocator::Block> CudaAllocator::allocate(size_t bytes) {
  const size_t size = size_class(bytes);
  if (size == 0) return Block{};
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;
  auto record = [&](CUdeviceptr pointer) {
    in_use_[pointer] = size;
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return Block{pointer, size};
  };
  if (auto it = free_.find(size); it != free_.end() && !it->second.empty()) {
    CUdeviceptr pointer = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    ++stats_.cache_hits;
    return record(pointer);
  }
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  const CudaDriverApi& api = context_->api();
  const size_t cached_before = stats_.bytes_cached;
  CUdeviceptr pointer = 0;
  CUresult result = api.cuMemAlloc(&pointer, size);
  if (result == CUDA_ERROR_OUT_OF_MEMORY && stats_.bytes_cached > 0) {
    // The cache holds memory of other classes: give it back and retry.
    MSTEP_RETURN_IF_ERROR(empty_cache_locked());
    result = api.cuMemAlloc(&pointer, size);
  }
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    return absl::ResourceExhaustedError(absl::StrCat(
        "cuda: out of device memory allocating ", describe_bytes(bytes), " (size class ",
        describe_bytes(size), ") on ", context_->device().name, " (",
        describe_bytes(context_->device().total_memory), "): ",
        describe_bytes(stats_.bytes_in_use), " in use by mstep, ", describe_bytes(cached_before),
        " cached (freed and retried); free tensors or use smaller shapes"));
  MSTEP_RETURN_IF_ERROR(check_cuda(api, result, "cuMemAlloc",
                                   absl::StrCat("allocating ", describe_bytes(size))));
  ++stats_.device_allocations;
  return record(pointer);
}

void CudaAllocator::release(Block block) {
  if (block.pointer == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = in_use_.find(block.pointer);
  if (it == in_use_.end() || it->second != block.size) {
    ++bad_releases_;
    return;
  }
  in_use_.erase(it);
  stats_.bytes_in_use -= block.size;
  stats_.bytes_cached += block.size;
  free_[block.size].push_back(block.pointer);
}

absl::Status CudaAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  return empty_cache_locked();
}

absl::Status CudaAllocator::empty_cache_locked() {
  if (stats_.bytes_cached == 0) return absl::OkStatus();
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  const CudaDriverApi& api = context_->api();
  absl::Status first;
  for (auto& [size, pointers] : free_) {
    for (CUdeviceptr pointer : pointers) {
      // cuMemFree waits for work still using the block.
      absl::Status freed = MSTEP_CUDA_CALL(api, cuMemFree, pointer);
      if (!freed.ok() && first.ok()) first = freed;
      ++stats_.device_frees;
      stats_.bytes_cached -= size;
    }
    pointers.clear();
  }
  free_.clear();
  return first;
}

CudaAllocatorStats CudaAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t CudaAllocator::bad_releases() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bad_releases_;
}

} // namespace mstep::cuda
