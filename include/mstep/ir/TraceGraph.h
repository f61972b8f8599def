// TraceGraph: one cut of the trace DAG, flattened into an owned list of
// nodes in topological order. This is what a backend compiles (and, from
// the compiler issue on, what is imported into MLIR). It holds no
// pointers into the live trace, so it can outlive the tensors it came from.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/InputRole.h"
#include "mstep/ir/Node.h"

namespace mstep {

/// Result `index` of node `node` (a position in TraceGraph::nodes).
struct ValueRef {
  uint32_t node = 0;
  uint32_t index = 0;
  friend bool operator==(const ValueRef&, const ValueRef&) = default;
};

struct TraceGraph;

struct GraphNode {
  OpKind op;
  AttrList attrs;
  absl::InlinedVector<ValueRef, 3> operands;
  ResultTypes results;
  /// For a `fusion` node: the elementwise DAG it computes. Its inputs are
  /// the node's operands, its outputs the node's results.
  std::shared_ptr<const TraceGraph> body;
};

struct TraceGraph {
  /// Topological order. Graph inputs are `parameter` nodes whose `index`
  /// attribute is their position in `input_types`.
  std::vector<GraphNode> nodes;
  std::vector<TensorType> input_types;
  /// Parallel to input_types (empty means every input is `input`).
  std::vector<InputRole> input_roles;
  /// Parallel to input_types: the output that holds this input's new
  /// value when the program replaced the tensor (`w.copy_(w - lr * g)`),
  /// or -1. Such an input may be updated in place (it is donated) when
  /// nothing else holds its buffer.
  std::vector<int32_t> donated_to;
  std::vector<ValueRef> outputs;

  const TensorType& type_of(ValueRef v) const {
    return nodes[v.node].results[v.index];
  }

  /// Human-readable listing, one node per line:
  ///   %3 = add(%1, %2) : f32[2, 3]
  std::string to_text() const;
  /// Graphviz DOT.
  std::string to_dot() const;
};

}  // namespace mstep
