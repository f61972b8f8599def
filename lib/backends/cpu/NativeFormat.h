// The cpu backend's native form of an executable (its disk-cache form):
// everything a load needs, so a load runs neither MLIR nor LLVM codegen.
//   seal("MSTEPCPU", kNativeFormatVersion,
//        bytes(graph) | bytes(arena plan) | bytes(fusion object))
// where bytes(x) is a u64 length and x (core/ByteStream.h), the graph is
// serialize_graph()'s (ir/GraphSerialize.h), the plan
// serialize_arena_plan()'s (ArenaPlan.h) and the object FusionJit::object()
// (empty: no compiled fusions). No MLIR headers: this is the loader.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/CpuExecutable.h"

namespace mstep::cpu {

inline constexpr uint32_t kNativeFormatVersion = 2;

std::string write_native_format(const TraceGraph& graph, const ArenaPlan& plan,
                                absl::string_view object);

/// The three sections of a native blob, views into it. Unimplemented when
/// `blob` is not one (no MSTEPCPU magic); DataLoss names what is wrong
/// (version, sizes, checksum).
struct NativeParts {
  absl::string_view graph, plan, object;
};
absl::StatusOr<NativeParts> read_native_format(absl::string_view blob);

/// Rebuilds the executable of a native blob: decodes and checks the graph
/// and the plan against each other, loads the fusion object. Errors as
/// read_native_format(), and DataLoss for a section that does not decode.
absl::StatusOr<std::unique_ptr<CpuExecutable>> load_native_format(
    absl::string_view blob, CpuExecutable::BuildOptions options);

}  // namespace mstep::cpu
