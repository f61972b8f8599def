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

namespace {
/// A node's structural hash from its op and its attributes' structural hash.
uint64_t op_structural_hash(OpKind op, uint64_t attrs_structural) {
  return hash_combine(static_cast<uint64_t>(op) + 1, attrs_structural);
}
/// The type hash of a node's result types.
uint64_t results_hash(const ResultTypes& results) {
  uint64_t th = results.size();
  for (const TensorType& t : results) th = hash_combine(th, hash_tensor_type(t));
  return th;
}
}  // namespace

Node::Node(OpKind op, Operands operands, AttrList attrs, ResultTypes results)
    : op_(op),
      operands_(std::move(operands)),
      attrs_(std::move(attrs)),
      results_(std::move(results)) {
  // Most built-in ops have no attributes, whose hashes are 0: skip the calls.
  const bool no_attrs = attrs_.empty();
  structural_hash_ = op_structural_hash(op_, no_attrs ? 0 : hash_attrs_structural(attrs_));
  type_hash_ = results_hash(results_);
  constant_hash_ = no_attrs ? 0 : hash_attrs_constants(attrs_);
}

Node::Node(OpKind op, Operands&& operands, const std::shared_ptr<const SharedAttrs>& attrs,
           ResultTypes&& results)
    : op_(op),
      operands_(std::move(operands)),
      shared_attrs_(attrs),
      results_(std::move(results)) {
  // The hashes of Node(op, operands, attrs->list(), results): SharedAttrs
  // computed the attribute hashes with the same functions.
  structural_hash_ = op_structural_hash(op_, attrs->structural_hash());
  type_hash_ = results_hash(results_);
  constant_hash_ = attrs->constant_hash();
}

Node::Node(const TensorType& type, InputRole role)
    : Node(OpKind::data, Operands{}, AttrList{}, ResultTypes{type}) {
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
