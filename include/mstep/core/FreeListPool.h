// A thread-local free-list allocator for the small objects the tracer
// makes and frees once per op (trace nodes, tensor handles). glibc malloc
// costs a few hundred instructions per pair and fragments next to large
// kernel buffers; a free list costs a handful. Blocks are recycled, never
// returned to the system, so memory is bounded by the peak live count.
#pragma once

#include <cstddef>
#include <new>

/// Thread-local storage without the __tls_get_addr call a shared library
/// otherwise pays on every access. Only for small, trivially destructible
/// variables (static TLS space is limited when the library is dlopen'ed).
#define MSTEP_FAST_TLS thread_local __attribute__((tls_model("initial-exec")))

namespace mstep {

template <size_t kSize>
class FreeListPool {
 public:
  static void* allocate() {
    Block*& head = free_head();
    if (!head) refill(head);
    Block* b = head;
    head = b->next;
    return b;
  }
  static void deallocate(void* p) {
    Block* b = static_cast<Block*>(p);
    Block*& head = free_head();
    b->next = head;
    head = b;
  }

 private:
  union Block {
    Block* next;
    alignas(std::max_align_t) std::byte storage[kSize];
  };
  static Block*& free_head() {
    static MSTEP_FAST_TLS Block* head = nullptr;
    return head;
  }
  static void refill(Block*& head) {
    constexpr size_t kBlocksPerChunk = 256;
    auto* chunk = static_cast<Block*>(::operator new(sizeof(Block) * kBlocksPerChunk));
    for (size_t i = 0; i < kBlocksPerChunk; ++i) {
      chunk[i].next = head;
      head = &chunk[i];
    }
  }
};

/// std-style allocator over FreeListPool for single objects (as used by
/// std::allocate_shared); arrays fall back to operator new.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}
  T* allocate(size_t n) {
    if (n == 1) return static_cast<T*>(FreeListPool<sizeof(T)>::allocate());
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1) {
      FreeListPool<sizeof(T)>::deallocate(p);
    } else {
      ::operator delete(p);
    }
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

}  // namespace mstep
