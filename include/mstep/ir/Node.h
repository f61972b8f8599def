// Node: one op in the lazy trace DAG.
//
// Nodes own their operands (shared_ptr), never their users, so a dead
// tensor frees its pending subgraph. The structural hash (op + attributes)
// and the type hash (result shapes and dtypes) are computed once here, in
// the constructor; cutting a graph only combines them.
//
// Node is the ir half of a trace node: the op, its operands, attributes and
// result types. It holds no runtime state. The runtime makes the concrete
// nodes (include/mstep/runtime/TraceNode.h): a TraceNode adds the graph
// cutter's scratch, and a DataLeaf the materialized buffer a `data` leaf
// stands for. Node's constructors are protected so that every node of the
// trace DAG is one of those; the virtual destructor lets destroy_node free
// a node without knowing its runtime type.
//
// A node's attributes are its own list, or a SharedAttrs that many nodes
// hold (a custom op's call site records every call with one): attrs() and
// the hashes are the same either way.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "mstep/core/FreeListPool.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/InputRole.h"
#include "mstep/ir/OpKind.h"

namespace mstep {

class Node;
/// Frees `node` and then, without recursion, every node only it kept alive.
void destroy_node(Node* node);

/// An owning reference to a Node. The count is intrusive and not atomic:
/// the trace DAG belongs to the one thread that traces (see Tracer), and
/// a plain increment keeps the tracing hot path cheap. Releasing the last
/// reference frees the node and, iteratively, every operand it owned, so
/// a chain of a million pending ops does not overflow the stack.
class NodeRef {
 public:
  NodeRef() = default;
  NodeRef(std::nullptr_t) {}
  /// Takes a reference to `node` (which may be freshly allocated).
  explicit NodeRef(Node* node);
  NodeRef(const NodeRef& other) : NodeRef(other.node_) {}
  NodeRef(NodeRef&& other) noexcept : node_(other.node_) { other.node_ = nullptr; }
  NodeRef& operator=(NodeRef other) noexcept {
    std::swap(node_, other.node_);
    return *this;
  }
  ~NodeRef() { reset(); }

  void reset();
  Node* get() const { return node_; }
  Node* operator->() const { return node_; }
  Node& operator*() const { return *node_; }
  explicit operator bool() const { return node_ != nullptr; }
  bool operator==(std::nullptr_t) const { return node_ == nullptr; }
  bool operator!=(std::nullptr_t) const { return node_ != nullptr; }
  /// Number of references to the node (0 when empty).
  uint32_t use_count() const;

 private:
  Node* node_ = nullptr;
};

/// One result of a node.
struct Value {
  NodeRef node;
  uint32_t index = 0;
};

using ResultTypes = absl::InlinedVector<TensorType, 1>;
using Operands = absl::InlinedVector<Value, 3>;

class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// Virtual, so that deleting a Node frees the concrete (runtime) type and
  /// returns it to that type's pool (its class operator delete).
  virtual ~Node();

  OpKind op() const { return op_; }
  absl::Span<const Value> operands() const { return operands_; }
  const AttrList& attrs() const { return shared_attrs_ ? shared_attrs_->list() : attrs_; }
  absl::Span<const TensorType> results() const { return results_; }
  const TensorType& result(uint32_t i = 0) const { return results_[i]; }
  /// For a `data` leaf: what its input is to the program.
  InputRole input_role() const { return input_role_; }

  /// op + non-constant attributes. Equal for nodes that compute the same
  /// function of their operands up to host constants.
  uint64_t structural_hash() const { return structural_hash_; }
  /// Result shapes and dtypes.
  uint64_t type_hash() const { return type_hash_; }
  /// Host constants (double attributes); 0 when there are none.
  uint64_t constant_hash() const { return constant_hash_; }

 protected:
  /// An op node.
  Node(OpKind op, Operands operands, AttrList attrs, ResultTypes results);
  /// An op node that holds `attrs` instead of a list of its own (no copy,
  /// and the attribute hashes are taken from it); equal to a node made with
  /// attrs->list(). Operands and result types are moved once.
  Node(OpKind op, Operands&& operands, const std::shared_ptr<const SharedAttrs>& attrs,
       ResultTypes&& results);
  /// A `data` leaf: a graph input of `type`; the subclass says what it reads.
  Node(const TensorType& type, InputRole role);

 private:
  friend class NodeRef;
  friend void destroy_node(Node* node);
  uint32_t refs_ = 0;
  Node* free_next_ = nullptr;  // destroy_node's queue
  OpKind op_;
  InputRole input_role_ = InputRole::input;
  Operands operands_;
  AttrList attrs_;  // empty when shared_attrs_ is set
  std::shared_ptr<const SharedAttrs> shared_attrs_;
  ResultTypes results_;
  uint64_t structural_hash_ = 0;
  uint64_t type_hash_ = 0;
  uint64_t constant_hash_ = 0;
};

using NodePtr = NodeRef;

inline NodeRef::NodeRef(Node* node) : node_(node) {
  if (node_) ++node_->refs_;
}
inline uint32_t NodeRef::use_count() const { return node_ ? node_->refs_ : 0; }
inline void NodeRef::reset() {
  if (node_ && --node_->refs_ == 0) destroy_node(node_);
  node_ = nullptr;
}

uint64_t hash_tensor_type(const TensorType& type);

}  // namespace mstep
