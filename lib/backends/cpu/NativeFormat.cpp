// The cpu executable <-> its native form (see NativeFormat.h).
#include "lib/backends/cpu/NativeFormat.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FusionJit.h"
#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"
#include "mstep/ir/GraphSerialize.h"

namespace mstep::cpu {

namespace {
constexpr absl::string_view kMagic = "MSTEPCPU";
constexpr absl::string_view kWhat = "cpu executable";
}  // namespace

std::string write_native_format(const TraceGraph& graph, const ArenaPlan& plan,
                                absl::string_view object) {
  ByteWriter body;
  body.bytes(serialize_graph(graph));
  body.bytes(serialize_arena_plan(plan));
  body.bytes(object);
  return seal(kMagic, kNativeFormatVersion, body.data());
}

absl::StatusOr<NativeParts> read_native_format(absl::string_view blob) {
  MSTEP_ASSIGN_OR_RETURN(absl::string_view body,
                         unseal(blob, kMagic, kNativeFormatVersion, kWhat));
  ByteReader r(body, kWhat);
  NativeParts parts;
  parts.graph = r.bytes("the graph section");
  parts.plan = r.bytes("the arena plan section");
  parts.object = r.bytes("the fusion object section");
  r.expect_end();
  MSTEP_RETURN_IF_ERROR(r.status());
  return parts;
}

absl::StatusOr<std::unique_ptr<CpuExecutable>> load_native_format(
    absl::string_view blob, CpuExecutable::BuildOptions options) {
  MSTEP_ASSIGN_OR_RETURN(NativeParts parts, read_native_format(blob));
  absl::StatusOr<TraceGraph> graph = deserialize_graph(parts.graph);
  if (!graph.ok())
    return absl::DataLossError(absl::StrCat(kWhat, ": ", graph.status().message()));
  MSTEP_ASSIGN_OR_RETURN(ArenaPlan plan, deserialize_arena_plan(parts.plan, *graph));
  std::shared_ptr<FusionJit> jit;
  if (!parts.object.empty()) {
    absl::StatusOr<std::shared_ptr<FusionJit>> loaded = FusionJit::load(parts.object);
    if (!loaded.ok())
      return absl::DataLossError(absl::StrCat(kWhat, ": its fusion object does not load: ",
                                              loaded.status().message()));
    jit = std::move(*loaded);
  }
  absl::StatusOr<std::unique_ptr<CpuExecutable>> exe =
      CpuExecutable::create(std::move(*graph), std::move(plan), std::move(jit), std::move(options));
  // An inconsistency create() finds in stored bytes is corruption.
  if (absl::IsInternal(exe.status()))
    return absl::DataLossError(absl::StrCat(kWhat, ": ", exe.status().message()));
  return exe;
}

}  // namespace mstep::cpu
