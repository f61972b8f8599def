// The runtime's trace nodes: the concrete types of the lazy trace DAG.
//
// lib/ir's Node is the graph (op, operands, attributes, result types). The
// state the runtime keeps per node lives here, next to TensorImpl:
//   - TraceNode: every node the tracer records, with the graph cutter's
//     scratch (Tracer::cut numbers the nodes of a cut in place, which costs
//     no lookup on the tracing hot path).
//   - DataLeaf: a `data` leaf, which stands for a materialized buffer, and
//     the tensor it read that buffer from.
// make_op_node() and make_data_leaf() are the only ways to make a node
// (Node's constructors are protected), so the runtime may treat every node
// of the DAG as a TraceNode and every `data` node as a DataLeaf.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>

#include "mstep/core/FreeListPool.h"
#include "mstep/ir/Node.h"
#include "mstep/runtime/Buffer.h"

namespace mstep {

class TensorImpl;

class TraceNode : public Node {
 public:
  /// An op node: Node's arguments, forwarded (operands, attributes and
  /// result types are moved once, as in a Node).
  template <typename... Args>
  explicit TraceNode(OpKind op, Args&&... args) : Node(op, std::forward<Args>(args)...) {}

  // Nodes are made and freed once per traced op: use the free-list pool.
  static void* operator new(size_t) { return FreeListPool<sizeof(TraceNode)>::allocate(); }
  static void operator delete(void* p) { FreeListPool<sizeof(TraceNode)>::deallocate(p); }

  /// The graph cutter's scratch (Tracer::cut, on the tracing thread): the
  /// cut (epoch) that last visited this node and the node's position in
  /// that cut's post-order.
  mutable uint64_t visit_epoch = 0;
  mutable uint32_t visit_index = 0;

 protected:
  TraceNode(const TensorType& type, InputRole role) : Node(type, role) {}
};

class DataLeaf final : public TraceNode {
 public:
  DataLeaf(std::shared_ptr<Buffer>&& buffer, const TensorType& type, InputRole role,
           std::weak_ptr<TensorImpl>&& owner)
      : TraceNode(type, role), buffer_(std::move(buffer)), owner_(std::move(owner)) {}

  static void* operator new(size_t) { return FreeListPool<sizeof(DataLeaf)>::allocate(); }
  static void operator delete(void* p) { FreeListPool<sizeof(DataLeaf)>::deallocate(p); }

  /// The materialized value this leaf reads.
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  /// The tensor whose buffer it read, held weakly: graph capture re-reads
  /// that tensor at replay.
  const std::weak_ptr<TensorImpl>& owner() const { return owner_; }

 private:
  std::shared_ptr<Buffer> buffer_;
  std::weak_ptr<TensorImpl> owner_;
};

/// The runtime type of a node of the trace DAG (see the top of this file).
inline const TraceNode& trace_node(const Node& node) { return static_cast<const TraceNode&>(node); }
/// The DataLeaf of a `data` node.
inline const DataLeaf& data_leaf(const Node& node) { return static_cast<const DataLeaf&>(node); }

/// Records an op node (operands, attributes, result types: see Node) and
/// returns the first reference to it.
template <typename... Args>
NodeRef make_op_node(OpKind op, Args&&... args) {
  assert(op != OpKind::data && "a data leaf is a DataLeaf: make_data_leaf()");
  return NodeRef(new TraceNode(op, std::forward<Args>(args)...));
}
/// A `data` leaf for `buffer`, which `owner` holds.
inline NodeRef make_data_leaf(std::shared_ptr<Buffer> buffer, const TensorType& type,
                              InputRole role, std::weak_ptr<TensorImpl> owner) {
  return NodeRef(new DataLeaf(std::move(buffer), type, role, std::move(owner)));
}

}  // namespace mstep
