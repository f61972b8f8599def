// Node: one op in the lazy trace DAG.
//
// Nodes own their operands (shared_ptr), never their users, so a dead
// tensor frees its pending subgraph. The structural hash (op + attributes)
// and the type hash (result shapes and dtypes) are computed once here, in
// the constructor; cutting a graph only combines them.
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

class Buffer;  // runtime/Buffer.h: opaque device memory
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
  Node(OpKind op, Operands operands, AttrList attrs, ResultTypes results);
  /// A leaf that stands for an already materialized buffer.
  Node(std::shared_ptr<Buffer> buffer, TensorType type, InputRole role = InputRole::input);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Nodes are made and freed once per traced op: use the free-list pool.
  static void* operator new(size_t size) { return FreeListPool<sizeof(Node)>::allocate(); }
  static void operator delete(void* p) { FreeListPool<sizeof(Node)>::deallocate(p); }

  OpKind op() const { return op_; }
  absl::Span<const Value> operands() const { return operands_; }
  const AttrList& attrs() const { return attrs_; }
  absl::Span<const TensorType> results() const { return results_; }
  const TensorType& result(uint32_t i = 0) const { return results_[i]; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  /// For a `data` leaf: what the buffer is to the program.
  InputRole input_role() const { return input_role_; }
  /// For a `data` leaf: the tensor whose buffer it read (a TensorImpl, held
  /// weakly). Graph capture uses it to re-read that tensor at replay.
  const std::weak_ptr<void>& owner() const { return owner_; }
  void set_owner(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  /// op + non-constant attributes. Equal for nodes that compute the same
  /// function of their operands up to host constants.
  uint64_t structural_hash() const { return structural_hash_; }
  /// Result shapes and dtypes.
  uint64_t type_hash() const { return type_hash_; }
  /// Host constants (double attributes); 0 when there are none.
  uint64_t constant_hash() const { return constant_hash_; }

  /// Scratch used by the graph cutter: the traversal epoch that last
  /// visited this node and the node's position in that traversal.
  mutable uint64_t visit_epoch = 0;
  mutable uint32_t visit_index = 0;

 private:
  friend class NodeRef;
  friend void destroy_node(Node* node);
  uint32_t refs_ = 0;
  Node* free_next_ = nullptr;  // destroy_node's queue
  OpKind op_;
  InputRole input_role_ = InputRole::input;
  Operands operands_;
  AttrList attrs_;
  ResultTypes results_;
  std::shared_ptr<Buffer> buffer_;
  std::weak_ptr<void> owner_;
  uint64_t structural_hash_ = 0;
  uint64_t type_hash_ = 0;
  uint64_t constant_hash_ = 0;
};

using NodePtr = NodeRef;

/// Allocates a node and returns the first reference to it.
template <typename... Args>
NodeRef make_node(Args&&... args) {
  return NodeRef(new Node(std::forward<Args>(args)...));
}

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
