// An exported step (GraphArchive) as one graph, for mstep-aot: its
// segments merged as replay runs them (LoadedGraph): an input bound to a
// tensor (slot) reads the value the slot holds at that point (an earlier
// segment's result, or the step's argument for it), one bound to an earlier
// segment's result or input reads that value, constants and the RNG state
// become arguments. Each random op's offset moves by its segment's offset
// in the step, so one (seed, offset) argument serves every segment. The
// outputs: one per slot the step writes (its last value), the slot's
// argument donated to it. (Graph::export_stablehlo merges a live capture
// the same way: lib/runtime/GraphStableHlo.cpp.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/runtime/GraphArchive.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::tools {

struct MergedStep {
  TraceGraph graph;
  /// Per argument: its name (the slot's; constant_<k>; rng_state), role
  /// text and value at export.
  std::vector<std::string> input_names, input_roles, input_values;
  /// Per output: the slot's name.
  std::vector<std::string> output_names;
  /// The RNG state argument, or -1; its seed, its offset for the first step
  /// after the export and its advance per step.
  int64_t rng_input = -1;
  uint64_t rng_seed = 0, rng_first_offset = 0, rng_per_step = 0;
};

/// `segment_graphs[s]` is segment s's graph (tools::stored_graph). An
/// error names a segment whose graph does not fit its bindings.
absl::StatusOr<MergedStep> merge_segments(const GraphArchive& archive,
                                          const std::vector<TraceGraph>& segment_graphs);

} // namespace mstep::tools
