// The data-movement ops (reshape, permute, expand, slice, cat,
// slice_scatter) on the
// NeuronCore: each is a set of strided copies — per result dimension a size
// and the element strides of source and destination (0 for a broadcast
// dimension) — lowered to DMA tile programs of HBM -> HBM DMAs (the
// source's strides on one side, the destination's on the other; the pieces
// are independent and spread over the DMA engines). Adjacent dimensions
// that are contiguous on both sides are merged first, one dimension (the
// largest outer one, or a flat run split as [128, n/128]) goes on the
// partitions, at most four free dimensions per descriptor (the outer rest
// become separate DMAs). A DMA pays a descriptor per contiguous run (the
// cost model: at least 64 B each), so a transpose of the two minor dims is
// also lowered on chip (TransposeCopy.h: bit-exact byte planes through the
// Tensor engine) and the program the cost model times faster is kept.
// 8-byte elements move as int32 pairs; other 1-byte copies are refused
// (the DMA path has no 8-bit type; the on-chip transpose moves bytes).
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
