// C API: tensors — wrapping and copying host memory, type queries, sync
// points, in-place updates and autograd.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/capi/Handles.h"
#include "mstep/api/Creation.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/TensorImpl.h"

using namespace mstep;
using namespace mstep::capi;

namespace {

void check_tensor(const mstep_tensor* t, const char* what = "tensor") {
  check_handle(t, HandleKind::tensor, what);
}

/// Data reads and in-place writes need real data; builder tensors have none.
void require_data(const mstep_tensor* t, const char* what = "tensor") {
  check_tensor(t, what);
  if (t->builder)
    fail(MSTEP_FAILED_PRECONDITION,
         absl::StrCat(what, " belongs to a graph builder and holds no data; compile the "
                            "builder and run the graph to get values"));
}

Device device_or_default(mstep_device* device) {
  return device ? device->device : default_device();
}

TensorType checked_type(mstep_dtype dtype, const int64_t* shape, size_t rank, size_t byte_size,
                        const void* data) {
  TensorType type{to_shape(shape, rank, "shape"), to_dtype(dtype, "dtype")};
  if (byte_size != type.bytes())
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat("byte_size is ", byte_size, " but ", type.to_string(), " holds ",
                      type.bytes(), " bytes (elements x mstep_dtype_size)"));
  if (data == nullptr && type.bytes() > 0) fail(MSTEP_INVALID_ARGUMENT, "data is NULL");
  return type;
}

}  // namespace

extern "C" {

mstep_status* mstep_tensor_wrap_host(mstep_context* context, mstep_device* device,
                                     mstep_dtype dtype, const int64_t* shape, size_t rank,
                                     void* data, size_t byte_size, mstep_release_fn release,
                                     void* user_data, mstep_tensor** out_tensor,
                                     int* out_zero_copy) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_tensor, "out_tensor");
    const TensorType type = checked_type(dtype, shape, rank, byte_size, data);
    const Device d = device_or_default(device);
    Backend& backend = *value_or_throw(BackendRegistry::get(d.type));
    std::function<void()> on_release;
    if (release) on_release = [release, user_data, data] { release(user_data, data); };
    absl::StatusOr<BufferPtr> wrapped =
        type.bytes() > 0 ? backend.wrap_host(type, data, on_release)
                         : absl::UnimplementedError("empty tensors are copied");
    Tensor tensor;
    if (wrapped.ok()) {
      auto impl = TensorImpl::make(type, d);
      impl->set_buffer(*std::move(wrapped));
      tensor = Tensor(std::move(impl));
    } else if (absl::IsUnimplemented(wrapped.status())) {
      tensor = from_buffer(data, type, d);  // copies; the host's memory is free again
    } else {
      throw Error(wrapped.status());
    }
    mstep_tensor* handle = new_tensor(context, std::move(tensor));
    if (!wrapped.ok() && release) release(user_data, data);
    *out_tensor = handle;
    if (out_zero_copy) *out_zero_copy = wrapped.ok() ? 1 : 0;
  });
}

mstep_status* mstep_tensor_from_host(mstep_context* context, mstep_device* device,
                                     mstep_dtype dtype, const int64_t* shape, size_t rank,
                                     const void* data, size_t byte_size,
                                     mstep_tensor** out_tensor) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_tensor, "out_tensor");
    const TensorType type = checked_type(dtype, shape, rank, byte_size, data);
    *out_tensor = new_tensor(context, from_buffer(data, type, device_or_default(device)));
  });
}

mstep_status* mstep_tensor_full(mstep_context* context, mstep_device* device, mstep_dtype dtype,
                                const int64_t* shape, size_t rank, double value,
                                mstep_tensor** out_tensor) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_tensor, "out_tensor");
    const TensorType type{to_shape(shape, rank, "shape"), to_dtype(dtype, "dtype")};
    Tensor t = detail::materialized_zeros(type, device_or_default(device));
    t.fill_(value);
    *out_tensor = new_tensor(context, std::move(t));
  });
}

mstep_status* mstep_tensor_retain(mstep_tensor* tensor) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    ++tensor->references;
  });
}

mstep_status* mstep_tensor_release(mstep_tensor* tensor) {
  if (tensor == nullptr) return nullptr;
  return guard(__func__, [&] {
    check_tensor(tensor);
    if (--tensor->references == 0) {
      mstep_context* context = tensor->context;
      retire(tensor);
      count_released(context);
    }
  });
}

mstep_status* mstep_tensor_dtype(const mstep_tensor* tensor, mstep_dtype* out_dtype) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    require_out(out_dtype, "out_dtype");
    *out_dtype = to_c_dtype(tensor->tensor.dtype());
  });
}

mstep_status* mstep_tensor_shape(const mstep_tensor* tensor, int64_t* dims, size_t capacity,
                                 size_t* out_rank) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    require_out(out_rank, "out_rank");
    write_type(tensor->tensor.type(), nullptr, dims, capacity, out_rank);
  });
}

mstep_status* mstep_tensor_numel(const mstep_tensor* tensor, int64_t* out_numel) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    require_out(out_numel, "out_numel");
    *out_numel = tensor->tensor.numel();
  });
}

mstep_status* mstep_tensor_device(const mstep_tensor* tensor, mstep_device** out_device) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    require_out(out_device, "out_device");
    check_handle(tensor->context, HandleKind::context, "the tensor's context");
    *out_device = tensor->context->device_handle(tensor->tensor.device());
  });
}

mstep_status* mstep_tensor_is_pending(const mstep_tensor* tensor, int* out_pending) {
  return guard(__func__, [&] {
    check_tensor(tensor);
    require_out(out_pending, "out_pending");
    *out_pending = tensor->tensor.is_pending() ? 1 : 0;
  });
}

mstep_status* mstep_tensor_copy_to_host(mstep_tensor* tensor, void* dst, size_t byte_size) {
  return guard(__func__, [&] {
    require_data(tensor);
    const TensorType& type = tensor->tensor.type();
    if (byte_size != type.bytes())
      fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("byte_size is ", byte_size, " but the tensor (",
                                                type.to_string(), ") holds ", type.bytes(),
                                                " bytes"));
    if (byte_size > 0) require_out(dst, "dst");
    const std::vector<std::byte> bytes = detail::host_bytes(tensor->tensor);
    if (byte_size > 0) std::memcpy(dst, bytes.data(), byte_size);
  });
}

mstep_status* mstep_tensor_item(mstep_tensor* tensor, double* out_value) {
  return guard(__func__, [&] {
    require_data(tensor);
    require_out(out_value, "out_value");
    *out_value = tensor->tensor.item();
  });
}

mstep_status* mstep_tensor_copy_(mstep_tensor* dst, mstep_tensor* src) {
  return guard(__func__, [&] {
    require_data(dst, "dst");
    require_data(src, "src");
    dst->tensor.copy_(src->tensor);
  });
}

mstep_status* mstep_tensor_fill_(mstep_tensor* tensor, double value) {
  return guard(__func__, [&] {
    require_data(tensor);
    tensor->tensor.fill_(value);
  });
}

mstep_status* mstep_tensor_set_requires_grad(mstep_tensor* tensor, int requires_grad) {
  return guard(__func__, [&] {
    require_data(tensor);
    tensor->tensor.requires_grad_(requires_grad != 0);
  });
}

mstep_status* mstep_tensor_backward(mstep_tensor* tensor) {
  return guard(__func__, [&] {
    require_data(tensor);
    tensor->tensor.backward();
  });
}

mstep_status* mstep_tensor_grad(mstep_tensor* tensor, mstep_tensor** out_grad) {
  return guard(__func__, [&] {
    require_data(tensor);
    require_out(out_grad, "out_grad");
    Tensor grad = tensor->tensor.grad();
    *out_grad = grad.defined() ? new_tensor(tensor->context, std::move(grad)) : nullptr;
  });
}

}  // extern "C"
