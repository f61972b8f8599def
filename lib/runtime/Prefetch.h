// Prefetch hints for replay's hot path. Every address is derived from a
// type (a field's address, the standard library's control-block type),
// never from a hand-counted offset, so a layout change cannot make a hint
// point elsewhere unnoticed (prefetch_test.cpp checks the derivation).
#pragma once

#include <cstddef>
#include <memory>

namespace mstep::internal {

/// The address of the reference counts of an object created by
/// std::make_shared / std::allocate_shared with a stateless allocator, as
/// `p` points to it; nullptr where the standard library's layout is not
/// known. `T` is the object's dynamic type or a base at offset 0 of it
/// with the same alignment.
///
/// libstdc++ puts such an object in one block of type
/// _Sp_counted_ptr_inplace: the counts (its base, _Sp_counted_base) first,
/// the object next, at the base's size rounded up to the object's
/// alignment. An object owned otherwise (shared_ptr(new T)) has its counts
/// elsewhere; the hint is then wasted, never wrong, as a prefetch of any
/// address is harmless.
template <typename T>
const void* shared_counts_address(const T* object) {
#if defined(__GLIBCXX__)
  constexpr size_t kCounts = sizeof(std::_Sp_counted_base<std::__default_lock_policy>);
  constexpr size_t kOffset = (kCounts + alignof(T) - 1) / alignof(T) * alignof(T);
  return reinterpret_cast<const char*>(object) - kOffset;
#else
  (void)object;
  return nullptr;
#endif
}

/// Asks for the cache line of the reference counts of `p`'s object (see
/// shared_counts_address), for writing.
template <typename T>
inline void prefetch_counts(const std::shared_ptr<T>& p) {
  if (!p) return;
  if (const void* counts = shared_counts_address(p.get())) __builtin_prefetch(counts, 1);
}

}  // namespace mstep::internal
