// Which nodes the last-axis lowerings take, and which lowering each goes to.
#include "lib/backends/neuron/RowLowering.h"

namespace mstep::neuron {

namespace {

/// True when some value of the elementwise node (operands, or the body's
/// inputs and op results; 0-d constants aside) is not of the result's type,
/// or the body broadcasts (full, expand).
bool mixed_types(const GraphNode& node, absl::Span<const TensorType> types) {
  if (node.results.empty()) return false;
  const TensorType& r = node.results[0];
  for (const TensorType& t : types)
    if (t != r) return true;
  if (!node.body) return false;
  for (const GraphNode& n : node.body->nodes) {
    if (n.op == OpKind::constant && n.results[0].shape.rank() == 0) continue;
    if (n.op == OpKind::full || n.op == OpKind::expand) return true; // broadcasts
    for (const TensorType& t : n.results)
      if (t != r) return true;
  }
  return false;
}

} // namespace

bool is_row_family(const GraphNode& node, absl::Span<const TensorType> types) {
  switch (node.op) {
  case OpKind::sum:
  case OpKind::mean:
  case OpKind::max:
  case OpKind::min:
  case OpKind::softmax:
  case OpKind::log_softmax:
  case OpKind::layer_norm:
  case OpKind::rms_norm:
  case OpKind::cast:
  case OpKind::full:
  case OpKind::nll_loss:
    return true;
  case OpKind::fusion:
    return node.body && (mixed_types(node, types) || is_fill(node));
  default:
    break;
  }
  const OpFamily f = op_family(node.op);
  return (f == OpFamily::unary || f == OpFamily::binary || node.op == OpKind::where) &&
         mixed_types(node, types);
}

absl::StatusOr<LoweredOp> lower_row_family(const GraphNode& node,
                                           absl::Span<const TensorType> types) {
  if (is_fill(node)) return lower_fill(node, types);
  switch (node.op) {
  case OpKind::sum:
  case OpKind::mean:
  case OpKind::max:
  case OpKind::min:
    return lower_reduction(node, types);
  case OpKind::softmax:
  case OpKind::log_softmax:
    return lower_softmax(node, types);
  case OpKind::layer_norm:
  case OpKind::rms_norm:
    return lower_norm(node, types);
  case OpKind::nll_loss:
    return lower_nll_loss(node, types);
  default:
    return lower_broadcast(node, types);
  }
}

} // namespace mstep::neuron
