// The custom ops a compiled graph needs (CustomOpNeed): collected from its
// trace graph when it is compiled, kept with the module-cache entry and a
// captured graph's segments, and recorded where the compiled graph is
// stored: a disk-cache entry's payload starts with them, an exported graph
// (GraphArchive) lists them. A process that loads either checks them
// against its own registry before anything reaches a backend: an op it has
// not registered (or has under another version) is an error naming them,
// and the graph is compiled again (disk cache) or not loaded (export).
// Library-internal.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// The custom ops `graph` calls (fusion bodies included), each once, in
/// first-use order, looked up in the global registry.
std::vector<CustomOpNeed> custom_op_needs(const TraceGraph& graph);

/// OK when every op of `needs` is registered in this process with that
/// name and version; otherwise FailedPrecondition "needs custom op 'a'
/// version 1, which this process has not registered (it has 'a' version
/// 2)", naming each missing op (the caller says what to do).
absl::Status check_custom_ops_registered(absl::Span<const CustomOpNeed> needs);

/// `payload` prefixed with `needs` (an empty list when there are none).
std::string with_custom_op_needs(absl::Span<const CustomOpNeed> needs, absl::string_view payload);
/// The same for the ops `graph` calls.
std::string with_custom_op_needs(const TraceGraph& graph, absl::string_view payload);

/// The payload behind the list with_custom_op_needs wrote, once every op
/// it lists is registered with that name and version. FailedPrecondition
/// naming each missing op; DataLoss when the list is malformed.
absl::StatusOr<absl::string_view> check_custom_op_needs(absl::string_view entry);

} // namespace mstep
