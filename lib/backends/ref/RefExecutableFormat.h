// The ref backend's native executable form: its TraceGraph, so a load
// needs no MLIR and no compile.
//   seal("MSTEPREF", kRefFormatVersion, serialize_graph(graph))
// (core/ByteStream.h, ir/GraphSerialize.h). No MLIR headers.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::ref {

inline constexpr uint32_t kRefFormatVersion = 1;

std::string write_ref_executable(const TraceGraph& graph);

/// The graph of a write_ref_executable() blob. Unimplemented when `blob`
/// is not one (no MSTEPREF magic: module text, for load_compiled_module);
/// DataLoss naming the problem when it is corrupt.
absl::StatusOr<TraceGraph> read_ref_executable(absl::string_view blob);

}  // namespace mstep::ref
