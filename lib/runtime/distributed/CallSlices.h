// Collectives larger than one MPI call. MPI counts are `int`, so one call
// moves at most INT_MAX elements (and Open MPI's algorithms are happiest
// well below 2 GiB): a collective's buffer is cut into slices of at most
// RuntimeOptions::dist_max_call_bytes (MSTEP_DIST_MAX_CALL_BYTES, 1 GiB by
// default; at least one element per slice), each its own nonblocking call,
// all outstanding at once. The reductions are elementwise, so the sums of a
// sliced collective are those of the unsliced one, element for element.
//
// reduce_scatter's slices: slice k of every rank's part must be contiguous
// and in rank order for MPI_Ireduce_scatter_block (a derived datatype may
// not carry MPI's builtin reductions), so the send buffer is packed slice
// by slice: [rank 0's slice k | rank 1's slice k | ...] at world * offset(k).
// Pure arithmetic, no MPI: unit-tested without mpirun.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mstep::dist {

struct CallSlices {
  int64_t total = 0;      ///< elements in all
  int64_t per_slice = 1;  ///< elements in each slice but the last

  /// Slices of `total` elements of `element_bytes` each, at most
  /// `max_call_bytes` per slice (clamped to [1, INT32_MAX]; one element at
  /// least).
  static CallSlices of(int64_t total, int64_t element_bytes, int64_t max_call_bytes);

  int64_t count() const { return (total + per_slice - 1) / per_slice; }
  int64_t offset(int64_t k) const { return k * per_slice; }
  int64_t size(int64_t k) const {
    const int64_t left = total - offset(k);
    return left < per_slice ? left : per_slice;
  }

  /// reduce_scatter's packing (total = one rank's part): where element j of
  /// rank w's part goes in the packed send buffer of a world of `world`.
  int64_t packed_index(int world, int w, int64_t j) const;
  /// Copies `n` elements of rank w's part, starting at its element j, from
  /// `src` to their packed places in `packed`.
  void pack(std::byte* packed, const std::byte* src, int64_t element_bytes, int world, int w,
            int64_t j, int64_t n) const;
};

}  // namespace mstep::dist
