// AccessPattern: the operand of a tile instruction. Dimension 0 is the
// partition dimension (start partition, partition count); up to four free
// dimensions of (size, stride) walk the elements of each partition from
// `offset`. Offsets and strides count elements of `dtype`.
//
// On chip (SBUF, PSUM) `buffer` is an allocation of the program and the
// partition index selects the partition; in HBM `buffer` is an HBM tensor,
// which has no partitions, and `partition_stride` is the distance in
// elements between the rows that land on consecutive partitions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/inlined_vector.h"
#include "lib/backends/neuron/BufferKind.h"
#include "lib/backends/neuron/NeuronCoreSpec.h"
#include "mstep/core/DType.h"

namespace mstep::neuron {

struct FreeDim {
  int64_t size = 1;
  int64_t stride = 1;
};

struct AccessPattern {
  BufferKind kind = BufferKind::sbuf;
  int32_t buffer = -1; ///< allocation id (SBUF/PSUM) or HBM tensor id
  int32_t start_partition = 0;
  int32_t partitions = 1;
  int64_t partition_stride = 0; ///< HBM only
  int64_t offset = 0;
  /// Free dimensions, innermost last; the validator allows kMaxFreeDims.
  absl::InlinedVector<FreeDim, kMaxFreeDims> dims;
  DType dtype = DType::f32;

  /// Elements per partition: the product of the free sizes.
  int64_t free_elements() const;
  /// Elements in all: partitions x free_elements().
  int64_t elements() const { return partitions * free_elements(); }
  /// Lowest and highest element offset (within a partition, or from the
  /// tensor's start in HBM) the pattern touches, for bound checks.
  int64_t min_offset() const;
  int64_t max_offset() const;
  /// "SBUF#2[p0+128, off 0, (512,1)] bf16", for messages.
  std::string to_string() const;
};

/// An on-chip pattern: partitions [start, start + count) of allocation
/// `buffer`, free dims given as (size, stride) pairs, innermost last.
AccessPattern tile_pattern(BufferKind kind, int32_t buffer, DType dtype, int32_t start_partition,
                           int32_t partitions, int64_t offset, std::initializer_list<FreeDim> dims);

/// An HBM pattern over a row-major [rows, cols] tensor: rows [row0, row0 +
/// partitions) land on consecutive partitions, columns [col0, col0 + cols)
/// are the one free dimension.
AccessPattern hbm_rows(int32_t tensor, DType dtype, int64_t row_length, int64_t row0,
                       int32_t partitions, int64_t col0, int64_t cols);

} // namespace mstep::neuron
