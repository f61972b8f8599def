// CallSlices (lib/runtime/distributed/CallSlices.h): how a collective is
// cut into MPI calls under the per-call byte limit, and reduce_scatter's
// packing, checked against hand-counted layouts (the collectives
// themselves are tested under mpirun: test/mpi/sliced_collectives_test).
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/runtime/distributed/CallSlices.h"

namespace mstep::dist {
namespace {

TEST(CallSlices, SlicesHoldWholeElementsUnderTheLimit) {
  // 12 bytes of f64: 8 does not divide 12, so one element (8 bytes) a call.
  CallSlices f64 = CallSlices::of(5, 8, 12);
  EXPECT_EQ(f64.per_slice, 1);
  EXPECT_EQ(f64.count(), 5);
  // f32 [10] at 12 bytes: 3, 3, 3, 1.
  CallSlices f32 = CallSlices::of(10, 4, 12);
  ASSERT_EQ(f32.count(), 4);
  EXPECT_EQ(f32.offset(3), 9);
  EXPECT_EQ(f32.size(0), 3);
  EXPECT_EQ(f32.size(3), 1);
  // An element larger than the limit still moves, one a call.
  EXPECT_EQ(CallSlices::of(4, 8, 3).per_slice, 1);
  // Nothing to move: no call.
  EXPECT_EQ(CallSlices::of(0, 4, 12).count(), 0);
}

TEST(CallSlices, TheLimitIsClampedToWhatAnIntCounts) {
  // 3 GiB of bytes under a limit above INT32_MAX: calls of INT32_MAX bytes.
  const int64_t total = int64_t{3} << 30;
  CallSlices bytes = CallSlices::of(total, 1, int64_t{1} << 40);
  EXPECT_EQ(bytes.per_slice, INT32_MAX);
  EXPECT_EQ(bytes.count(), 2);
  EXPECT_EQ(bytes.size(1), total - INT32_MAX);
  // The default (1 GiB) on 12 GiB of f32: 12 calls of 2^28 elements.
  CallSlices f32 = CallSlices::of(int64_t{3} << 30, 4, int64_t{1} << 30);
  EXPECT_EQ(f32.per_slice, int64_t{1} << 28);
  EXPECT_EQ(f32.count(), 12);
}

TEST(CallSlices, ReduceScatterPacksEachSliceInRankOrder) {
  // Parts of 5 elements, 2 ranks, 2 elements a call: slices [0,2) [2,4)
  // [4,5). Packed: r0[0..2) r1[0..2) | r0[2..4) r1[2..4) | r0[4] r1[4].
  CallSlices s = CallSlices::of(5, 1, 2);
  const std::vector<int64_t> want_r0 = {0, 1, 4, 5, 8};
  const std::vector<int64_t> want_r1 = {2, 3, 6, 7, 9};
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(s.packed_index(2, 0, j), want_r0[j]) << j;
    EXPECT_EQ(s.packed_index(2, 1, j), want_r1[j]) << j;
  }
  // pack() across slice bounds: rank 1's elements 1..4 (values 11..14).
  std::vector<std::byte> packed(10, std::byte{0});
  const std::vector<std::byte> src = {std::byte{11}, std::byte{12}, std::byte{13}, std::byte{14}};
  s.pack(packed.data(), src.data(), 1, 2, 1, 1, 4);
  const std::vector<int> want = {0, 0, 0, 11, 0, 0, 12, 13, 0, 14};
  for (size_t i = 0; i < packed.size(); ++i) EXPECT_EQ(static_cast<int>(packed[i]), want[i]) << i;
}

}  // namespace
}  // namespace mstep::dist
