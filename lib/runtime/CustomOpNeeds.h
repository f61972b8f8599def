// The custom ops a compiled graph needs, as the disk cache records them: an
// entry's payload starts with the (name, version) of each custom op its
// graph calls, and a process that loads it checks them against its own
// registry before the payload reaches a backend. An entry whose ops this
// process has not registered (or has under another version) is refused
// with an error naming them, and the graph is compiled again instead.
// Library-internal.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

/// `payload` prefixed with the custom ops `graph` calls (fusion bodies
/// included), each once, looked up in the global registry. An empty list
/// when the graph calls none.
std::string with_custom_op_needs(const TraceGraph& graph, absl::string_view payload);

/// The payload behind the list with_custom_op_needs wrote, once every op
/// it lists is registered with that name and version. FailedPrecondition
/// naming each missing op; DataLoss when the list is malformed.
absl::StatusOr<absl::string_view> check_custom_op_needs(absl::string_view entry);

} // namespace mstep
