// The graph of one segment of an exported step (Graph::save), for the tools
// that compile it ahead of time (mstep-compile, mstep-aot): the step must
// have been exported on ref, whose stored form is the step's graph, with
// fusion off (MSTEP_FUSE=0: the target's pipeline fuses for itself).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefExecutableFormat.h"
#include "mstep/core/Error.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::tools {

/// The graph `blob` (a segment's executable, exported on `backend`) holds;
/// an error says how to export the step instead.
inline absl::StatusOr<TraceGraph> stored_graph(const std::string& backend, absl::string_view blob) {
  if (backend == "ref") {
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, ref::read_ref_executable(blob));
    // The target fuses for itself; a graph fused for ref does not import.
    for (const GraphNode& node : graph.nodes)
      if (node.op == OpKind::fusion)
        return absl::InvalidArgumentError(
            "the step was exported with fusion on (its graph holds fused regions, which do not "
            "import); export it again with MSTEP_FUSE=0: the target's pipeline fuses it");
    return graph;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the step was exported on '", backend,
      "', whose stored form is not ref's graph; export it on ref "
      "(`--device ref`), then compile it for the target"));
}

} // namespace mstep::tools
