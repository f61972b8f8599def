// Inlining one trace graph into a node list: how a captured step's
// segments become one graph (Graph::export_stablehlo, mstep-aot).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

/// Whether `op` reads the RNG state at state offset + its `offset` attribute.
bool draws_random(OpKind op);

/// Appends `g`'s nodes except its parameters to `nodes`: parameter i reads
/// `inputs[i]`, operands are renumbered to the appended nodes (a node's
/// index is its position in `nodes`), and every random op's offset is moved
/// by `rng_offset` so one RNG state serves all segments. Returns the values
/// of g's outputs.
std::vector<ValueRef> append_inlined(const TraceGraph& g, absl::Span<const ValueRef> inputs,
                                     uint64_t rng_offset, std::vector<GraphNode>& nodes);

}  // namespace mstep
