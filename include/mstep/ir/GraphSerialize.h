// The binary form of a TraceGraph, for executables that load without MLIR
// (the ref and cpu backends' disk-cache and exported forms). Versioned and
// checksummed; little-endian on every host.
//
//   seal("MSTEPGRF", version, the graph)  (the envelope: core/ByteStream.h;
//   lib/ir/GraphSerialize.cpp spells out the graph's layout)
//
// Decoding is for untrusted bytes. It checks the structure, never the
// semantics of an op: every enum (op, dtype, role, attribute name and kind)
// is in range, every operand names an earlier node and one of its results,
// every output a node and result, each parameter node a distinct input of
// the matching type, a fusion's body its node's operand and result types,
// nesting at most kMaxGraphNesting deep, sizes sane. Any failure is a
// DataLoss error that names the problem; it never crashes. That an op's
// attributes and result types fit the op (what the MLIR verifier checks on
// the compile path) is trusted: load only executables this user wrote.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

inline constexpr uint32_t kGraphFormatVersion = 1;
/// Fusion bodies inside fusion bodies: at most this many levels.
inline constexpr int kMaxGraphNesting = 8;

/// The stored form of `graph` (header included).
std::string serialize_graph(const TraceGraph& graph);

/// Rebuilds a graph from serialize_graph()'s bytes; see the file comment
/// for what is checked. The error names the failed check and the offset.
absl::StatusOr<TraceGraph> deserialize_graph(absl::string_view bytes);

}  // namespace mstep
