// Which output tiles of a tiled matmul leave PSUM together. Each PSUM ->
// SBUF copy pays the ~60-cycle access cost once, so with 256 or 512
// columns per tile (572 cycles on Scalar for a 512-wide bank) that fixed
// cost is 5-20% of the copy. Consecutive tiles with the same rows are laid
// side by side, `pitch` columns apart, in one PSUM buffer of a few banks
// and in one SBUF output buffer, and one copy empties them all: PSUM only
// forbids a matmul to write across a bank boundary (the pitch divides the
// 512-column bank), and a copy may read up to 4K free elements of PSUM.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/backends/neuron/AccessPattern.h"

namespace mstep::neuron {

struct CopyGroup {
  int64_t first = 0, count = 0; ///< tiles [first, first + count)
  int64_t rows = 0;             ///< partitions of every tile in it
  /// The copy's free dims over the group's buffers (the same in PSUM and
  /// SBUF): one contiguous run, or `count` runs of a width `pitch` apart.
  absl::InlinedVector<FreeDim, 2> dims;
};

struct CopyGroups {
  /// Columns between consecutive tiles' starts (a power of two that holds
  /// the widest tile, so it divides the bank), tiles per group buffer.
  int64_t pitch = 0, capacity = 0;
  std::vector<CopyGroup> groups;
  /// Per tile: its group and its position in the group's buffers.
  std::vector<int64_t> group_of, position;
};

/// Groups tiles (their rows and widths, in program order; each width at
/// most `max_width` <= 512) into copies of up to `banks` PSUM banks and
/// `max_tiles` tiles (1: a copy per tile, the pipeline before groups). A
/// group's tiles have the same rows and either one width, or the pitch as
/// width but for the last. With `last_alone`, the last tile is a group of
/// its own: the program copies and stores it in halves (its tail).
CopyGroups plan_copy_groups(const std::vector<int64_t>& rows, const std::vector<int64_t>& widths,
                            int64_t max_width, int64_t banks, int64_t max_tiles, bool last_alone);

} // namespace mstep::neuron
