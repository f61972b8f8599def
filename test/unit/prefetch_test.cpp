// The addresses replay's prefetch hints (lib/runtime/Prefetch.h) derive
// from types: the reference counts of a shared object and a tensor's hot
// fields. A library or layout change that moves them fails here instead of
// silently turning the hints into cache misses.
#include <cstring>

#include "lib/runtime/Prefetch.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

/// The use count stored at `counts`, laid out as libstdc++'s
/// _Sp_counted_base: a vtable pointer, then the use count (an int).
int stored_use_count(const void* counts) {
  int n = 0;
  std::memcpy(&n, static_cast<const char*>(counts) + sizeof(void*), sizeof n);
  return n;
}

template <typename T>
void expect_counts_follow_copies(const std::shared_ptr<T>& p) {
  const void* counts = internal::shared_counts_address(p.get());
  ASSERT_NE(counts, nullptr);
  EXPECT_EQ(stored_use_count(counts), 1);
  {
    std::shared_ptr<T> a = p, b = p;
    EXPECT_EQ(stored_use_count(counts), 3);
  }
  EXPECT_EQ(stored_use_count(counts), 1);
}

TEST(Prefetch, CountsAddressHoldsTheUseCountOfTensorsAndBuffers) {
#if !defined(__GLIBCXX__)
  GTEST_SKIP() << "the control block's layout is only known for libstdc++";
#endif
  const TensorType type{Shape{4}, DType::f32};
  // Tensors come from the pool allocator, buffers from make_shared.
  expect_counts_follow_copies(TensorImpl::make(type, Device{DeviceType::ref, 0}));
  Backend& ref = **BackendRegistry::get(DeviceType::ref);
  absl::StatusOr<BufferPtr> buffer = ref.allocate(type);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  expect_counts_follow_copies(*buffer);
}

TEST(Prefetch, ReplayFieldsCoverTheBufferAndPendingValue) {
  auto t = TensorImpl::make(TensorType{Shape{4}, DType::f32}, Device{DeviceType::ref, 0});
  const char* begin = t->replay_fields_begin();
  const char* end = t->replay_fields_end();
  auto inside = [&](const void* field, size_t size) {
    const char* p = static_cast<const char*>(field);
    return p >= begin && p + size <= end;
  };
  EXPECT_TRUE(inside(&t->buffer(), sizeof(BufferPtr)));
  EXPECT_TRUE(inside(&t->pending(), sizeof(Value)));
  // Replay asks for the first and the last cache line of counts + fields:
  // from a 16-byte aligned start (malloc, the pool), 80 bytes touch at most
  // two 64-byte lines.
  const void* counts = internal::shared_counts_address(t.get());
  const char* first = counts ? static_cast<const char*>(counts) : begin;
  EXPECT_LE(end - first, 80);
}

}  // namespace
}  // namespace mstep
