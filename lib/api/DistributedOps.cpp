// mstep::distributed (mstep/api/Distributed.h): the process group, which
// lib/runtime/distributed/Communicator.h keeps, and the collectives as
// lazy ops: each checks its input at the call and records one node
// carrying the world size it was recorded in.
#include "mstep/api/Distributed.h"

#include <functional>
#include <vector>

#include "lib/api/OpBuilder.h"
#include "lib/runtime/distributed/Communicator.h"
#include "mstep/api/ShapeOps.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::distributed {

using detail::describe;
using detail::throw_op_error;

void init() { throw_if_error(dist::init(Tracer::get().options())); }
bool is_initialized() { return dist::is_initialized(); }
int rank() { return dist::rank(); }
int world_size() { return dist::world_size(); }
void barrier() { throw_if_error(dist::barrier()); }
void finalize() { throw_if_error(dist::finalize()); }
void abort(int code) { dist::abort(code); }

namespace {

void require_defined(absl::string_view op, const Tensor& x) {
  if (!x.defined()) throw_op_error(op, "the input is undefined", "", "");
}

/// sum/max/min need numbers; mean a floating dtype (it divides).
int64_t reduce_code(absl::string_view op, const Tensor& x, ReduceOp reduce) {
  if (x.dtype() == DType::boolean)
    throw_op_error(op, "cannot reduce a bool tensor", describe(x),
                   "Convert it first, e.g. x.to(mstep::DType::i32).");
  if (reduce == ReduceOp::mean && !is_floating(x.dtype()))
    throw_op_error(op, "ReduceOp::mean needs a floating-point input", describe(x),
                   "Use ReduceOp::sum, or convert to f32 first.");
  switch (reduce) {
    case ReduceOp::sum: return static_cast<int64_t>(dist::ReduceCode::sum);
    case ReduceOp::mean: return static_cast<int64_t>(dist::ReduceCode::mean);
    case ReduceOp::max: return static_cast<int64_t>(dist::ReduceCode::max);
    case ReduceOp::min: return static_cast<int64_t>(dist::ReduceCode::min);
  }
  throw_op_error(op, absl::StrCat("unknown ReduceOp ", static_cast<int>(reduce)), describe(x),
                 "Use ReduceOp::sum, mean, max or min.");
}

/// The dim a gather or scatter works along, normalized; x needs one.
int64_t collective_dim(absl::string_view op, const Tensor& x, int64_t dim) {
  if (x.dim() == 0)
    throw_op_error(op, "needs a tensor with at least one dim", describe(x),
                   "Reshape it first, e.g. x.reshape({1}).");
  return detail::normalize_dim(op, dim, x.dim(), x);
}

// Attributes in AttrName order, as the MLIR form lists them.
Attr world_attr() { return {AttrName::world_size, int64_t{world_size()}}; }

/// The permutation that moves dim `from` of a rank-`rank` tensor to `to`,
/// the others in order (torch.movedim).
std::vector<int64_t> movedim(int64_t rank, int64_t from, int64_t to) {
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (d != from) rest.push_back(d);
  rest.insert(rest.begin() + to, from);
  return rest;
}

/// `collective` (a gather or scatter along dim 0) along dim `d` of `x`
/// instead: along dim 0 of x with d moved to the front, then d moved back.
/// The ranks' blocks along d are then blocks along dim 0, so the
/// rearrangement is two permutes in the step graph (device kernels, and
/// differentiable) instead of a host copy around the transfer, and every
/// backend's collective works on dim 0 only.
Tensor along_dim(const Tensor& x, int64_t d, const std::function<Tensor(const Tensor&)>& collective) {
  const int64_t rank = x.dim();
  return permute(collective(permute(x, movedim(rank, d, 0))), movedim(rank, 0, d));
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op) {
  constexpr absl::string_view kOp = "distributed::all_reduce";
  require_defined(kOp, x);
  AttrList attrs{{AttrName::reduce_op, reduce_code(kOp, x, op)}, world_attr()};
  return detail::record(kOp, OpKind::all_reduce, {x}, std::move(attrs), x.type());
}

Tensor all_gather(const Tensor& x, int64_t dim) {
  constexpr absl::string_view kOp = "distributed::all_gather";
  require_defined(kOp, x);
  const int64_t d = collective_dim(kOp, x, dim);
  if (d != 0) return along_dim(x, d, [](const Tensor& front) { return all_gather(front, 0); });
  TensorType type = x.type();
  type.shape[d] *= world_size();
  AttrList attrs{{AttrName::dim, d}, world_attr()};
  return detail::record(kOp, OpKind::all_gather, {x}, std::move(attrs), std::move(type));
}

Tensor broadcast(const Tensor& x, int64_t root) {
  constexpr absl::string_view kOp = "distributed::broadcast";
  require_defined(kOp, x);
  if (root < 0 || root >= world_size())
    throw_op_error(kOp, absl::StrCat("root ", root, " is not a rank of this world of ",
                                     world_size()),
                   describe(x), "Pass a root in [0, world_size()).");
  AttrList attrs{{AttrName::root, root}, world_attr()};
  return detail::record(kOp, OpKind::broadcast, {x}, std::move(attrs), x.type());
}

Tensor reduce_scatter(const Tensor& x, ReduceOp op, int64_t dim) {
  constexpr absl::string_view kOp = "distributed::reduce_scatter";
  require_defined(kOp, x);
  const int64_t code = reduce_code(kOp, x, op);
  const int64_t d = collective_dim(kOp, x, dim);
  if (x.size(d) % world_size() != 0)
    throw_op_error(kOp,
                   absl::StrCat("dim ", d, " (size ", x.size(d),
                                ") does not divide into one equal slice per rank of a world of ",
                                world_size()),
                   describe(x), "Pad that dim to a multiple of world_size().");
  if (d != 0)
    return along_dim(x, d, [op](const Tensor& front) { return reduce_scatter(front, op, 0); });
  TensorType type = x.type();
  type.shape[d] /= world_size();
  AttrList attrs{{AttrName::dim, d}, {AttrName::reduce_op, code}, world_attr()};
  return detail::record(kOp, OpKind::reduce_scatter, {x}, std::move(attrs), std::move(type));
}

}  // namespace mstep::distributed
