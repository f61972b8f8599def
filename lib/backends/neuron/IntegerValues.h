// Bool and integer values in the elementwise lowerings (issue 19): the
// engines compute in fp32, which holds every integer of magnitude up to
// 2^24 exactly, so bool and integer values within that range are computed
// on chip bit for bit as ref does. A bool is a uint8 tile (0 or 1); an
// int32 an int32 tile; an int64 is read as the low words of its int32
// pairs into an int32 tile, after a range check of its values on the host
// (the run-time guard of that exactness: a value beyond 2^24 is an error
// naming the op, never a wrong answer), and written as int32 pairs
// (store_i64, CreationLowering.h).
#pragma once

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lib/backends/host/HostBuffer.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::neuron {

/// Magnitudes up to this are exact in fp32.
inline constexpr double kExactInFp32 = 16777216.0;

/// The tile dtype of a value of dtype `d`: f32/bf16 as is, bool as uint8
/// (DType::boolean), i32 and i64 as int32; nullopt for the rest.
std::optional<DType> value_tile_dtype(DType d);

/// The value of a 0-d bool or integer constant whose magnitude is at most
/// 2^24, or nullopt.
std::optional<float> exact_int_constant(const GraphNode& n);

/// The value of `n` when it is neg, add, sub, mul, div or cast of 0-d
/// constants (`constant`: the values known so far, by node) evaluated as
/// ref does in fp32 for an f32/bf16 result (rounded to it), or nullopt.
std::optional<float> fold_constant(const GraphNode& n,
                                   const std::vector<std::optional<float>>& constant);

/// The range check of the int32/int64 operands `int_inputs` (operand
/// indices) of `op`: every value's magnitude at most `bound`, else an error
/// naming the op, the operand and the value.
absl::Status check_integer_range(OpKind op, absl::Span<const host::HostBuffer* const> inputs,
                                 const std::vector<int32_t>& int_inputs,
                                 double bound = kExactInFp32);

} // namespace mstep::neuron
