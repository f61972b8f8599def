// Creation ops as GpSimd programs (issue 19): arange by `iota`, rand by
// `philox_uniform` (ref's numbers), and the int64 results they write as
// int32 pairs (the low word the value, the high word its sign).
//
// arange: integer start and step whose values stay within +-2^24 (every
// value exact in fp32, the engines' arithmetic, and ref's double `start +
// i * step` an integer), any of f32, bf16, i32, i64: iota writes the
// value at each element of a flat [128, n/128] view (and its tail
// partition). Fractional steps or larger values are refused (host
// fallback): iota's fp32 result would not be ref's double one.
//
// rand (f32): element i is Philox::uniform(seed, state offset + node
// offset, i), the same counter as dropout; ref's 24-bit grid is the
// uniform itself for f32. randn (f32): Philox::normal's Box-Muller step by
// step in fp32 (u1 from word 0, u2 from word 1 of the same block, then
// log, * -2, sqrt, cos(2 pi u2) on the Scalar engine, libm's logf, sqrtf,
// cosf as ref): ref's bits. bf16 (rand's floor to 8 bits) is refused.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_arange(const GraphNode& node,
                                       absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_rand(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types);

/// Word `word` (0 low, 1 high) of the int64 elements that `elements` (a
/// pattern over an int64 HBM tensor declared as int32 [2n], offsets and
/// strides counted in int64 elements) names.
AccessPattern i64_word(AccessPattern elements, int word);

/// Stores the int32 tile `lo` (exact integers) as int64 to `elements`
/// (i64_word's pattern): the low words from `lo`, the high words (0 or -1,
/// the sign) computed into `hi`, an int32 tile of lo's shape.
void store_i64(RowKit& k, const AccessPattern& elements, const AccessPattern& lo,
               const AccessPattern& hi);

} // namespace mstep::neuron
