// dropout (issue 19) with mstep's Philox numbers: the same keep mask as ref
// (RefNN.cpp: element i is kept iff Philox::uniform(seed, offset + node
// offset, i) >= p, scaled by 1/(1-p); dropped elements are x * 0, so NaN
// stays NaN). The tensor is viewed flat as [128, n/128] plus a tail
// (flat_pieces); per chunk: GpSimd philox_uniform draws u at counter
// state offset + node offset + element index (the affine expression
// node offset + c0 + 128-row base + p * row + j), Vector turns u into
// keep * scale (is_ge against the smallest float >= p, which is exactly
// ref's double comparison, then multiply) and multiplies x by it. The
// (seed, offset) RNG state (int64 [2]) is read on chip as four int32
// words, broadcast to every partition. Values: x * float(1/(1-p)) in fp32,
// rounded once to x's dtype (ref rounds the double product: at most one
// unit in the last place apart).
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// The float that u (a float) is compared with: u >= it exactly when u >=
/// p (a double, as ref compares), i.e. the smallest float >= p.
float dropout_keep_threshold(double p);

absl::StatusOr<LoweredOp> lower_dropout(const GraphNode& node,
                                        absl::Span<const TensorType> operand_types);

} // namespace mstep::neuron
