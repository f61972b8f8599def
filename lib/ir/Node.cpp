// Node construction: the hashes are computed here, once.
#include "mstep/ir/Node.h"

#include "mstep/core/Hash.h"

namespace mstep {

uint64_t hash_tensor_type(const TensorType& type) {
  uint64_t h = hash_combine(0x5EED, static_cast<uint64_t>(type.dtype));
  h = hash_combine(h, type.shape.rank());
  for (int64_t d : type.shape) h = hash_combine(h, static_cast<uint64_t>(d));
  return h;
}

Node::Node(OpKind op, Operands operands, AttrList attrs, ResultTypes results)
    : op_(op),
      operands_(std::move(operands)),
      attrs_(std::move(attrs)),
      results_(std::move(results)) {
  structural_hash_ = hash_combine(static_cast<uint64_t>(op_) + 1,
                                  hash_attrs_structural(attrs_));
  uint64_t th = results_.size();
  for (const TensorType& t : results_) th = hash_combine(th, hash_tensor_type(t));
  type_hash_ = th;
  constant_hash_ = hash_attrs_constants(attrs_);
}

Node::Node(const TensorType& type, InputRole role) : Node(OpKind::data, {}, {}, {type}) {
  input_role_ = role;
  // The role reaches the compiled program (argument attributes), so it is
  // part of the structure.
  structural_hash_ = hash_combine(structural_hash_, static_cast<uint64_t>(role));
}

Node::~Node() = default;

void destroy_node(Node* node) {
  // Deleting a node releases its operands, which may reach zero and call
  // back in here; queue them instead of recursing.
  // The queue is an intrusive list through Node::free_next_.
  static MSTEP_FAST_TLS Node* queue = nullptr;
  static MSTEP_FAST_TLS bool draining = false;
  node->free_next_ = queue;
  queue = node;
  if (draining) return;
  draining = true;
  while (queue) {
    Node* n = queue;
    queue = n->free_next_;
    delete n;  // virtual: frees the runtime type into its own pool
  }
  draining = false;
}

}  // namespace mstep
