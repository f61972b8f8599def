// Helpers shared by the op implementations in lib/api: recording nodes,
// scalar constants, dim normalization, broadcasting, type promotion and
// error messages. Library-internal.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Tensor.h"
#include "mstep/ir/Node.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep::detail {

/// Autocast (mstep/api/Autocast.h): the dtype to run a covered op in when
/// an autocast scope is active and some operand is f32, else nullopt.
std::optional<DType> autocast_target(std::initializer_list<const Tensor*> operands);
/// `t` cast to `dtype` if it is f32 (undefined and other dtypes as is).
Tensor autocast_operand(const Tensor& t, DType dtype);


/// Records `op` on `operands` with a single result of `type`. All operands
/// must live on one device (checked). With no operands the tensor goes to
/// `device`.
Tensor record(absl::string_view api_name, OpKind op,
              absl::Span<const Tensor> operands, AttrList attrs,
              TensorType type, std::optional<Device> device = std::nullopt);
/// The same with several results. `differentiable` (empty: every operand)
/// says which operands a gradient may flow into (autograd::record_op).
std::vector<Tensor> record_multi(absl::string_view api_name, OpKind op,
                                 absl::Span<const Tensor> operands,
                                 AttrList attrs, ResultTypes types,
                                 const std::vector<bool>& differentiable = {});
/// Records `op` on operand values already prepared by the caller. The fast
/// path for ops whose inputs need no gradient: it skips autograd, so
/// callers check needs_autograd() first and use record() otherwise.
Tensor record_values(OpKind op, Operands operands, AttrList attrs,
                     TensorType type, Device device);
/// The same with attributes many nodes share (a custom op's call site):
/// the node holds `attrs` instead of a copy (see Node).
Tensor record_values_shared(OpKind op, Operands&& operands,
                            const std::shared_ptr<const SharedAttrs>& attrs,
                            const TensorType& type, Device device);

/// The operand values of `tensors`, moved into place (no refcount churn).
inline Operands operands_of(const Tensor& a) {
  Operands ops;
  ops.push_back(a.impl()->as_operand());
  return ops;
}
inline Operands operands_of(const Tensor& a, const Tensor& b) {
  Operands ops;
  ops.push_back(a.impl()->as_operand());
  ops.push_back(b.impl()->as_operand());
  return ops;
}

/// Whether recording an op on these inputs must also record its backward.
inline bool needs_autograd(const Tensor& a) {
  return a.impl()->autograd_meta() != nullptr && a.requires_grad() && grad_enabled();
}
inline bool needs_autograd(const Tensor& a, const Tensor& b) {
  return needs_autograd(a) || needs_autograd(b);
}

/// The same 0-d constant as constant_value(), as a tensor operand.
Tensor constant_tensor(double value, DType dtype, Device device);

/// A 0-d constant node holding `value` as `dtype`. The value is a host
/// constant: it is hashed as such, and changing it recompiles (with a
/// warning when it keeps happening).
Value constant_value(double value, DType dtype);

/// "f32[2, 3]"
std::string describe(const Tensor& t);

/// InvalidArgument "mstep::<op>: <problem>. Got <inputs>. <hint>"
absl::Status op_error(absl::string_view op, absl::string_view problem,
                      absl::string_view inputs, absl::string_view hint);
/// Throws op_error(...) as mstep::Error.
[[noreturn]] void throw_op_error(absl::string_view op, absl::string_view problem,
                                 absl::string_view inputs, absl::string_view hint);

/// Wraps a possibly negative `dim` into [0, rank); throws naming `op`.
int64_t normalize_dim(absl::string_view op, int64_t dim, int64_t rank,
                      const Tensor& x);
/// Normalizes, sorts and checks for duplicates. Empty means all dims.
IntList normalize_dims(absl::string_view op, absl::Span<const int64_t> dims,
                       const Tensor& x);

/// The broadcast of two shapes, or an error naming the mismatched dim.
absl::StatusOr<Shape> broadcast_shapes(const Shape& a, const Shape& b);

/// PyTorch's result_type over tensors (0-d tensors weigh less than
/// dimensioned ones) and host scalars (weigh least).
DType result_type(absl::Span<const Tensor> tensors,
                  absl::Span<const Scalar> scalars = {});

/// `x` converted to `dtype` (no node when it already has it).
Tensor cast_to(const Tensor& x, DType dtype);

/// Throws when `x` is not floating, naming `op`.
void require_floating(absl::string_view op, const Tensor& x);

/// A materialized zero tensor: unlike zeros(), it is not a node, so a graph
/// that reads it is the same graph every step.
Tensor materialized_zeros(const TensorType& type, Device device);

/// The bytes of `t` on the host, running what it still depends on first
/// (a sync point).
std::vector<std::byte> host_bytes(const Tensor& t);

}  // namespace mstep::detail
