// A trace graph replayed as lazy ops: what runs a module a host handed over
// (the C API's mstep_compiled_graph_from_mlir) and an imported StableHLO
// function (mstep::import_stablehlo). Each node is recorded as the op it is,
// so the tracer cuts, keys and caches it like any traced step, and a capture
// records it for replay. Library-internal.
#pragma once

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/api/Tensor.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::detail {

/// Records `graph`'s nodes on `inputs` (its `parameter` nodes' tensors, by
/// index; already checked against graph.input_types), ops without operands
/// on `device`, with no autograd, and returns its outputs, pending.
/// `api_name` names the call in device-mismatch errors.
std::vector<Tensor> record_trace_graph(absl::string_view api_name, const TraceGraph& graph,
                                       absl::Span<const Tensor> inputs, Device device);

}  // namespace mstep::detail
