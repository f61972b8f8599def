// Creation ops. full/arange/rand record nodes; from_vector/from_buffer
// copy host data into a materialized buffer at once.
#include <cmath>
#include <cstring>

#include "lib/api/OpBuilder.h"
#include "mstep/api/Creation.h"
#include "mstep/core/ElementConvert.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

using detail::throw_op_error;

namespace {

void check_shape(absl::string_view op, const Shape& shape) {
  for (int64_t i = 0; i < shape.rank(); ++i)
    if (shape[i] < 0)
      throw_op_error(op, absl::StrCat("negative dimension ", shape[i], " at index ", i),
                     absl::StrCat("shape ", shape.to_string()), "Every dim must be >= 0.");
}

void check_defined(absl::string_view op, const Tensor& t) {
  if (!t.defined())
    throw_op_error(op, "the input is undefined", "undefined",
                   "Pass a defined tensor (a default-constructed Tensor holds no value).");
}

/// Stores `v` as `dtype` with C++ conversions from T itself (not through
/// double, which would round int64 values above 2^53).
template <typename T>
void store_as(T v, DType dtype, std::byte* p) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  switch (dtype) {
    case DType::f32: return put(static_cast<float>(v));
    case DType::f64: return put(static_cast<double>(v));
    case DType::bf16: return put(BFloat16(static_cast<float>(v)));
    case DType::f16: return put(Float16(static_cast<float>(v)));
    case DType::i32: return put(static_cast<int32_t>(v));
    case DType::i64: return put(static_cast<int64_t>(v));
    case DType::boolean: return put(static_cast<uint8_t>(v != T(0)));
  }
}

IntList to_int_list(const Shape& s) { return IntList(s.begin(), s.end()); }

DType scalar_default_dtype(Scalar s) {
  return s.dtype() == DType::f64 ? kDefaultFloat : s.dtype();
}

/// Allocates a buffer on `device` and fills it from `bytes`.
Tensor materialize(const TensorType& type, Device device, const void* bytes) {
  Backend& backend = *value_or_throw(BackendRegistry::get(device.type));
  BufferPtr buf = value_or_throw(backend.allocate(type));
  throw_if_error(backend.copy_in(*buf, bytes, type.bytes()));
  auto impl = TensorImpl::make(type, device);
  impl->set_buffer(std::move(buf));
  return Tensor(std::move(impl));
}

template <typename T>
Tensor from_host(absl::string_view op, const std::vector<T>& data,
                 const Shape& shape, DType natural, std::optional<DType> dtype,
                 std::optional<Device> device) {
  check_shape(op, shape);
  if (static_cast<int64_t>(data.size()) != shape.numel())
    throw_op_error(op,
                   absl::StrCat("the data has ", data.size(),
                                " elements but the shape needs ", shape.numel()),
                   absl::StrCat("shape ", shape.to_string(), " for ", dtype_name(dtype.value_or(natural))),
                   "Pass as many values as the shape holds.");
  TensorType type{shape, dtype.value_or(natural)};
  std::vector<std::byte> bytes(type.bytes());
  const size_t esize = element_size(type.dtype);
  for (size_t i = 0; i < data.size(); ++i)
    store_as(static_cast<T>(data[i]), type.dtype, bytes.data() + i * esize);
  return materialize(type, device.value_or(default_device()), bytes.data());
}

}  // namespace

namespace {
/// full() with the name of the public op that was called, for messages.
Tensor full_named(absl::string_view op, const Shape& shape, Scalar value,
                  std::optional<DType> dtype, std::optional<Device> device) {
  check_shape(op, shape);
  DType d = dtype.value_or(scalar_default_dtype(value));
  return detail::record_values(OpKind::full, {detail::constant_value(value.value(), d)},
                               {{AttrName::shape, to_int_list(shape)}}, {shape, d},
                               device.value_or(default_device()));
}
}  // namespace

Tensor full(const Shape& shape, Scalar value, std::optional<DType> dtype,
            std::optional<Device> device) {
  return full_named("full", shape, value, dtype, device);
}

Tensor zeros(const Shape& shape, DType dtype, std::optional<Device> device) {
  return full_named("zeros", shape, 0, dtype, device);
}
Tensor ones(const Shape& shape, DType dtype, std::optional<Device> device) {
  return full_named("ones", shape, 1, dtype, device);
}
Tensor zeros_like(const Tensor& t) {
  check_defined("zeros_like", t);
  return zeros(t.shape(), t.dtype(), t.device());
}
Tensor ones_like(const Tensor& t) {
  check_defined("ones_like", t);
  return ones(t.shape(), t.dtype(), t.device());
}
Tensor full_like(const Tensor& t, Scalar value) {
  check_defined("full_like", t);
  return full(t.shape(), value, t.dtype(), t.device());
}

Tensor arange(Scalar end, std::optional<DType> dtype, std::optional<Device> device) {
  return arange(0, end, 1, dtype, device);
}

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype,
              std::optional<Device> device) {
  const std::string got =
      absl::StrCat("start ", start.value(), ", end ", end.value(), ", step ", step.value());
  if (step.value() == 0)
    throw_op_error("arange", "step must be nonzero", got,
                   "Use a positive step to count up or a negative one to count down.");
  if (!std::isfinite(start.value()) || !std::isfinite(end.value()) ||
      !std::isfinite(step.value()))
    throw_op_error("arange", "start, end and step must be finite", got,
                   "Pass finite bounds and step.");
  // As PyTorch: end may equal start (an empty range) but not lie behind it.
  if ((step.value() > 0 && end.value() < start.value()) ||
      (step.value() < 0 && end.value() > start.value()))
    throw_op_error("arange", "end lies behind start in the direction of step", got,
                   "Use end >= start for a positive step, end <= start for a negative one.");
  const double n = std::ceil((end.value() - start.value()) / step.value());
  const bool all_int = start.dtype() != DType::f64 && end.dtype() != DType::f64 &&
                       step.dtype() != DType::f64;
  DType d = dtype.value_or(all_int ? DType::i64 : kDefaultFloat);
  return detail::record_values(
      OpKind::arange, {},
      {{AttrName::start, start.value()}, {AttrName::step, step.value()}},
      {Shape{static_cast<int64_t>(n)}, d}, device.value_or(default_device()));
}

namespace {
Tensor random(absl::string_view op, OpKind kind, const Shape& shape, DType dtype,
              std::optional<Device> device) {
  check_shape(op, shape);
  if (!is_floating(dtype))
    throw_op_error(op, absl::StrCat("cannot fill ", dtype_name(dtype), " with random values"),
                   TensorType{shape, dtype}.to_string(),
                   "Use a floating dtype (f32, f64, bf16, f16).");
  Device d = device.value_or(default_device());
  Tracer::RandomDraw draw = value_or_throw(Tracer::get().draw_random(shape.numel(), d));
  return detail::record_values(
      kind, {draw.state->as_operand()},
      {{AttrName::shape, to_int_list(shape)}, {AttrName::offset, draw.offset}},
      {shape, dtype}, d);
}
}  // namespace

Tensor rand(const Shape& shape, DType dtype, std::optional<Device> device) {
  return random("rand", OpKind::rand, shape, dtype, device);
}
Tensor randn(const Shape& shape, DType dtype, std::optional<Device> device) {
  return random("randn", OpKind::randn, shape, dtype, device);
}

Tensor from_vector(const std::vector<float>& data, const Shape& shape,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return from_host("from_vector", data, shape, DType::f32, dtype, device);
}
Tensor from_vector(const std::vector<double>& data, const Shape& shape,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return from_host("from_vector", data, shape, DType::f64, dtype, device);
}
Tensor from_vector(const std::vector<int32_t>& data, const Shape& shape,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return from_host("from_vector", data, shape, DType::i32, dtype, device);
}
Tensor from_vector(const std::vector<int64_t>& data, const Shape& shape,
                   std::optional<DType> dtype, std::optional<Device> device) {
  return from_host("from_vector", data, shape, DType::i64, dtype, device);
}
Tensor from_vector(const std::vector<bool>& data, const Shape& shape,
                   std::optional<Device> device) {
  return from_host("from_vector", data, shape, DType::boolean, std::nullopt, device);
}

Tensor from_buffer(const void* data, const TensorType& type,
                   std::optional<Device> device) {
  check_shape("from_buffer", type.shape);
  if (data == nullptr && type.bytes() > 0)
    throw_op_error("from_buffer", "data is null", type.to_string(),
                   "Pass a pointer to type.bytes() bytes of host memory.");
  return materialize(type, device.value_or(default_device()), data);
}

}  // namespace mstep
