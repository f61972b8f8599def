// The caching host allocator (see HostAllocator.h).
#include "lib/backends/host/HostAllocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace mstep::host {

namespace {

constexpr size_t kMaxCachedBytes = size_t{1} << 30;

size_t rounded(size_t bytes) { return bytes == 0 ? 64 : (bytes + 63) / 64 * 64; }

struct Cache {
  std::mutex mu; // buffers may be released on any thread
  absl::flat_hash_map<size_t, std::vector<std::byte*>> free_blocks;
  size_t cached_bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache(); // never destroyed: buffers may outlive main
  return *c;
}

} // namespace

std::byte* host_allocate(size_t bytes) {
  const size_t size = rounded(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      c.cached_bytes -= size;
      return p;
    }
  }
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, size));
  if (!p) throw std::bad_alloc();
  return p;
}

void host_free(std::byte* p, size_t bytes) {
  if (!p) return;
  const size_t size = rounded(bytes);
  Cache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (c.cached_bytes + size <= kMaxCachedBytes) {
      c.free_blocks[size].push_back(p);
      c.cached_bytes += size;
      return;
    }
  }
  std::free(p);
}

} // namespace mstep::host
