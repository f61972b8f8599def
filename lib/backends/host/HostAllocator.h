// A caching allocator for host buffers (the idea of PyTorch's caching
// allocator): a freed block is kept in a list for its size and handed out
// again, so a step that frees last step's buffers and allocates the same
// sizes (every replay, every cache hit) reaches malloc only on the first
// step. At most kMaxCachedBytes stay cached; beyond that blocks are freed.
#pragma once

#include <cstddef>

namespace mstep::host {

/// 64-byte aligned memory of at least `bytes` (rounded up to 64, min 64).
std::byte* host_allocate(size_t bytes);
/// Returns a block from host_allocate(bytes) (the same `bytes`).
void host_free(std::byte* p, size_t bytes);

} // namespace mstep::host
