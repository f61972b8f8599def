// The data-movement ops (reshape, permute, expand, slice, cat,
// slice_scatter) on the
// NeuronCore: each is a set of strided copies — per result dimension a size
// and the element strides of source and destination (0 for a broadcast
// dimension) — lowered to DMA tile programs: HBM -> SBUF with the source's
// strides, SBUF -> HBM with the destination's, double-buffered. Adjacent
// dimensions that are contiguous on both sides are merged first, one
// dimension (the largest outer one, or a flat run split as [128, n/128])
// goes on the partitions, at most four free dimensions per descriptor (the
// outer rest become separate DMAs). A most-minor stride above 16 B (e.g. a
// transpose of the last two dims) is what the cost model charges at half
// bandwidth. 8-byte elements move as int32 pairs; 1-byte dtypes are
// refused (the tile IR has no 8-bit type).
//
// A copy that keeps every byte where it is (reshape; a permute, expand or
// slice that only moves or adds size-1 dims or takes everything) needs no
// program: layout_alias says so and the backend gives the result the
// operand's bytes.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// reshape, permute, expand, slice, cat, slice_scatter (the input outside
/// the slice and the source inside it: disjoint copies).
bool is_copy_op(OpKind op);

/// True when `node` (a copy op) leaves operand 0's bytes as they are: its
/// result is those bytes read with the result's type.
bool layout_alias(const GraphNode& node, absl::Span<const TensorType> types);

/// The DMA program of copy op `node` (operand types `types`), unvalidated
/// (lower_node validates and costs it), or why it cannot be tiled.
absl::StatusOr<LoweredOp> lower_copy(const GraphNode& node, absl::Span<const TensorType> types);

} // namespace mstep::neuron
