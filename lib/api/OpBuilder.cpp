// Shared op-building helpers: node recording, constants, broadcasting,
// type promotion and error messages.
#include "lib/api/OpBuilder.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/api/Creation.h"
#include "mstep/api/Elementwise.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::detail {

namespace {
Device common_device(absl::string_view api_name,
                     absl::Span<const Tensor> operands,
                     std::optional<Device> device) {
  for (const Tensor& t : operands) {
    if (!t.defined()) continue;
    if (!device) {
      device = t.device();
    } else if (t.device() != *device) {
      throw_op_error(api_name, "operands live on different devices",
                     absl::StrCat(device->to_string(), " and ",
                                  t.device().to_string()),
                     "Move them to one device first.");
    }
  }
  return device ? *device : default_device();
}
}  // namespace

Tensor record_values(OpKind op, Operands operands, AttrList attrs,
                     TensorType type, Device device) {
  auto node = make_op_node(op, std::move(operands), std::move(attrs), ResultTypes{type});
  auto impl = TensorImpl::make(std::move(type), device);
  impl->set_pending(Value{std::move(node), 0});
  return Tensor(std::move(impl));
}

// record_values' body with a shared attribute list. (Not one helper for
// both: record_values is the built-in ops' hot path, kept as it was.)
Tensor record_values_shared(OpKind op, Operands&& operands,
                            const std::shared_ptr<const SharedAttrs>& attrs,
                            const TensorType& type, Device device) {
  auto node = make_op_node(op, std::move(operands), attrs, ResultTypes{type});
  auto impl = TensorImpl::make(type, device);
  impl->set_pending(Value{std::move(node), 0});
  return Tensor(std::move(impl));
}

Tensor record(absl::string_view api_name, OpKind op,
              absl::Span<const Tensor> operands, AttrList attrs,
              TensorType type, std::optional<Device> device) {
  Device d = common_device(api_name, operands, device);
  Operands values;
  for (const Tensor& t : operands) values.push_back(t.impl()->as_operand());
  const bool grads = autograd::any_requires_grad(operands);
  AttrList saved_attrs = grads ? attrs : AttrList{};
  Tensor out = record_values(op, std::move(values), std::move(attrs), std::move(type), d);
  if (grads) autograd::record_op(op, saved_attrs, operands, {&out, 1});
  return out;
}

Tensor constant_tensor(double value, DType dtype, Device device) {
  auto impl = TensorImpl::make(TensorType{Shape{}, dtype}, device);
  impl->set_pending(constant_value(value, dtype));
  return Tensor(std::move(impl));
}

std::vector<Tensor> record_multi(absl::string_view api_name, OpKind op,
                                 absl::Span<const Tensor> operands,
                                 AttrList attrs, ResultTypes types,
                                 const std::vector<bool>& differentiable) {
  Device d = common_device(api_name, operands, std::nullopt);
  Operands values;
  for (const Tensor& t : operands) values.push_back(t.impl()->as_operand());
  auto node = make_op_node(op, std::move(values), std::move(attrs), types);
  std::vector<Tensor> out;
  for (uint32_t i = 0; i < types.size(); ++i) {
    auto impl = TensorImpl::make(types[i], d);
    impl->set_pending(Value{node, i});
    out.emplace_back(std::move(impl));
  }
  autograd::record_op(op, node->attrs(), operands, out, differentiable);
  return out;
}

Value constant_value(double value, DType dtype) {
  AttrList attrs;
  attrs.push_back({AttrName::value, value});
  return Value{make_op_node(OpKind::constant, Operands{}, std::move(attrs),
                            ResultTypes{TensorType{Shape{}, dtype}}),
               0};
}

std::string describe(const Tensor& t) {
  return t.defined() ? t.type().to_string() : std::string("undefined");
}

absl::Status op_error(absl::string_view op, absl::string_view problem,
                      absl::string_view inputs, absl::string_view hint) {
  std::string msg = absl::StrCat("mstep::", op, ": ", problem);
  if (!inputs.empty()) absl::StrAppend(&msg, ". Got ", inputs);
  absl::StrAppend(&msg, ".");
  if (!hint.empty()) absl::StrAppend(&msg, " ", hint);
  return absl::InvalidArgumentError(msg);
}

void throw_op_error(absl::string_view op, absl::string_view problem,
                    absl::string_view inputs, absl::string_view hint) {
  throw Error(op_error(op, problem, inputs, hint));
}

int64_t normalize_dim(absl::string_view op, int64_t dim, int64_t rank,
                      const Tensor& x) {
  const int64_t lo = rank == 0 ? -1 : -rank, hi = rank == 0 ? 0 : rank - 1;
  if (dim < lo || dim > hi)
    throw_op_error(op,
                   absl::StrCat("dim ", dim, " is out of range [", lo, ", ",
                                hi, "]"),
                   describe(x), "Use a dim within the tensor's rank.");
  return dim < 0 ? dim + std::max<int64_t>(rank, 1) : dim;
}

IntList normalize_dims(absl::string_view op, absl::Span<const int64_t> dims,
                       const Tensor& x) {
  IntList out;
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(normalize_dim(op, d, x.dim(), x));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    throw_op_error(op, absl::StrCat("dim list [", absl::StrJoin(dims, ", "),
                                    "] names a dim twice"),
                   describe(x), "List each dim once.");
  if (x.dim() == 0) out.clear();  // dim 0 / -1 of a scalar: nothing to reduce
  return out;
}

absl::StatusOr<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const int64_t rank = std::max(a.rank(), b.rank());
  Shape out;
  out.mutable_dims().resize(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da != db && da != 1 && db != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes ", a.to_string(), " and ", b.to_string(),
          " cannot be broadcast: dim ", i - rank, " has sizes ", da, " and ",
          db));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

DType result_type(absl::Span<const Tensor> tensors,
                  absl::Span<const Scalar> scalars) {
  // Three priority classes, as torch.result_type: dimensioned tensors,
  // 0-d tensors, host scalars. A lower class only matters when its
  // category (bool < integral < floating) is higher.
  std::optional<DType> dimensioned, zero_dim, scalar;
  auto fold = [](std::optional<DType>& acc, DType d) {
    acc = acc ? promote_types(*acc, d) : d;
  };
  for (const Tensor& t : tensors) fold(t.dim() > 0 ? dimensioned : zero_dim, t.dtype());
  for (const Scalar& s : scalars) fold(scalar, s.dtype());
  DType result = dimensioned ? *dimensioned : zero_dim ? *zero_dim : DType::f32;
  if (!dimensioned && !zero_dim && scalar)
    result = *scalar == DType::f64 ? kDefaultFloat : *scalar;
  if (dimensioned && zero_dim &&
      dtype_category(*zero_dim) > dtype_category(result))
    result = *zero_dim;
  if ((dimensioned || zero_dim) && scalar &&
      dtype_category(*scalar) > dtype_category(result))
    result = *scalar == DType::f64 ? kDefaultFloat : *scalar;
  return result;
}

Tensor cast_to(const Tensor& x, DType dtype) {
  return x.dtype() == dtype ? x : to(x, dtype);
}

void require_floating(absl::string_view op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw_op_error(op, "expects a floating-point tensor", describe(x),
                   "Convert it first, e.g. x.to(mstep::DType::f32).");
}

Tensor materialized_zeros(const TensorType& type, Device device) {
  std::vector<std::byte> bytes(type.bytes());
  return from_buffer(bytes.data(), type, device);
}

std::vector<std::byte> host_bytes(const Tensor& t) {
  TensorImpl& impl = *t.impl();
  throw_if_error(Tracer::get().sync(impl));
  std::vector<std::byte> bytes(impl.type().bytes());
  Backend& backend = *value_or_throw(BackendRegistry::get(impl.device().type));
  throw_if_error(backend.copy_out(*impl.buffer(), bytes.data(), bytes.size()));
  return bytes;
}

}  // namespace mstep::detail
