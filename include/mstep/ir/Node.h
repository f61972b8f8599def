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
#include "mstep/core/TensorType.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/OpKind.h"

namespace mstep {

class Buffer;  // runtime/Buffer.h: opaque device memory
class Node;

/// One result of a node.
struct Value {
  std::shared_ptr<Node> node;
  uint32_t index = 0;
};

using ResultTypes = absl::InlinedVector<TensorType, 1>;
using Operands = absl::InlinedVector<Value, 3>;

class Node {
 public:
  Node(OpKind op, Operands operands, AttrList attrs, ResultTypes results);
  /// A leaf that stands for an already materialized buffer.
  Node(std::shared_ptr<Buffer> buffer, TensorType type);

  OpKind op() const { return op_; }
  absl::Span<const Value> operands() const { return operands_; }
  const AttrList& attrs() const { return attrs_; }
  absl::Span<const TensorType> results() const { return results_; }
  const TensorType& result(uint32_t i = 0) const { return results_[i]; }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }

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
  OpKind op_;
  Operands operands_;
  AttrList attrs_;
  ResultTypes results_;
  std::shared_ptr<Buffer> buffer_;
  uint64_t structural_hash_ = 0;
  uint64_t type_hash_ = 0;
  uint64_t constant_hash_ = 0;
};

using NodePtr = std::shared_ptr<Node>;

uint64_t hash_tensor_type(const TensorType& type);

}  // namespace mstep
