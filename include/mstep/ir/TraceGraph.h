// TraceGraph: one cut of the trace DAG, flattened into an owned list of
// nodes in topological order. This is what a backend compiles (and, from
// the compiler issue on, what is imported into MLIR). It holds no
// pointers into the live trace, so it can outlive the tensors it came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "mstep/ir/Node.h"

namespace mstep {

/// Result `index` of node `node` (a position in TraceGraph::nodes).
struct ValueRef {
  uint32_t node = 0;
  uint32_t index = 0;
  friend bool operator==(const ValueRef&, const ValueRef&) = default;
};

struct GraphNode {
  OpKind op;
  AttrList attrs;
  absl::InlinedVector<ValueRef, 3> operands;
  ResultTypes results;
};

struct TraceGraph {
  /// Topological order. Graph inputs are `parameter` nodes whose `index`
  /// attribute is their position in `input_types`.
  std::vector<GraphNode> nodes;
  std::vector<TensorType> input_types;
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
