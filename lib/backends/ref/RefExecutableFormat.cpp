// The ref executable <-> bytes (see RefExecutableFormat.h).
#include "lib/backends/ref/RefExecutableFormat.h"

#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"
#include "mstep/ir/GraphSerialize.h"

namespace mstep::ref {

namespace {
constexpr absl::string_view kMagic = "MSTEPREF";
}  // namespace

std::string write_ref_executable(const TraceGraph& graph) {
  return seal(kMagic, kRefFormatVersion, serialize_graph(graph));
}

absl::StatusOr<TraceGraph> read_ref_executable(absl::string_view blob) {
  MSTEP_ASSIGN_OR_RETURN(absl::string_view body,
                         unseal(blob, kMagic, kRefFormatVersion, "ref executable"));
  return deserialize_graph(body);
}

}  // namespace mstep::ref
