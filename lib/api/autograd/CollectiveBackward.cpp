// Backward formulas of the collectives, as torch.distributed.nn defines
// them: the gradient of an all_reduce (sum or mean) is the same all_reduce
// of the gradient, all_gather and reduce_scatter are each other's
// gradient, and broadcast sends the sum of the gradients back to the root.
// max and min have no gradient here (it would need the arg-max rank).
#include "lib/api/autograd/Formulas.h"
#include "lib/runtime/distributed/Communicator.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

namespace {

using Grads = std::vector<Tensor>;
using distributed::ReduceOp;

/// The ReduceOp of a node's reduce_op attribute, when it is differentiable.
ReduceOp differentiable_reduce(const BackwardContext& c) {
  const auto code = static_cast<dist::ReduceCode>(attr_int(c.attrs, AttrName::reduce_op));
  if (code == dist::ReduceCode::sum) return ReduceOp::sum;
  if (code == dist::ReduceCode::mean) return ReduceOp::mean;
  throw Error(absl::UnimplementedError(absl::StrCat(
      "mstep::backward: distributed::", op_name(c.op), " with ReduceOp::",
      dist::reduce_name(static_cast<int64_t>(code)),
      " has no gradient (only sum and mean do). Detach its input (x.detach()) if no gradient "
      "is needed through it.")));
}

Grads all_reduce_bw(const BackwardContext& c) {
  return {distributed::all_reduce(c.grad(), differentiable_reduce(c))};
}

Grads all_gather_bw(const BackwardContext& c) {
  return {distributed::reduce_scatter(c.grad(), ReduceOp::sum, attr_int(c.attrs, AttrName::dim))};
}

Grads reduce_scatter_bw(const BackwardContext& c) {
  // mean divided the sum by the world size; so is each rank's share.
  Tensor g = distributed::all_gather(c.grad(), attr_int(c.attrs, AttrName::dim));
  if (differentiable_reduce(c) == ReduceOp::mean) g = g / static_cast<double>(distributed::world_size());
  return {g};
}

Grads broadcast_bw(const BackwardContext& c) {
  // Every rank runs the all_reduce (the ranks' graphs must match); the
  // others scale it to zero.
  Tensor total = distributed::all_reduce(c.grad(), ReduceOp::sum);
  return {total * (distributed::rank() == attr_int(c.attrs, AttrName::root) ? 1.0 : 0.0)};
}

}  // namespace

void register_collective_formulas(FormulaTable& t) {
  t[static_cast<int>(OpKind::all_reduce)] = all_reduce_bw;
  t[static_cast<int>(OpKind::all_gather)] = all_gather_bw;
  t[static_cast<int>(OpKind::reduce_scatter)] = reduce_scatter_bw;
  t[static_cast<int>(OpKind::broadcast)] = broadcast_bw;
}

}  // namespace mstep::autograd
