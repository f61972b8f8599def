// Tensor handle methods: metadata, sync-point reads, device scalars and
// the method/operator forms of common ops.
#include "mstep/api/Tensor.h"

#include <ostream>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/core/ElementConvert.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

namespace {
void require_defined(const Tensor& t, absl::string_view what) {
  if (!t.defined())
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "mstep::Tensor::", what,
        ": the tensor is undefined (default-constructed). Assign it the "
        "result of an op first.")));
}

Backend& backend_for(Device device) {
  return *value_or_throw(BackendRegistry::get(device.type));
}

/// Materializes `t` and copies its bytes to the host.
std::vector<std::byte> read_bytes(const Tensor& t, absl::string_view what) {
  require_defined(t, what);
  return detail::host_bytes(t);
}

}  // namespace

// Out of line: Tensor.h sees TensorImpl only declared.
void Tensor::add_handle(TensorImpl* impl) { impl->add_handle(); }
void Tensor::drop_handle(TensorImpl* impl) { impl->drop_handle(); }

const TensorType& Tensor::type() const {
  require_defined(*this, "type");
  return impl_->type();
}

Device Tensor::device() const {
  require_defined(*this, "device");
  return impl_->device();
}

int64_t Tensor::size(int64_t d) const {
  return shape()[detail::normalize_dim("size", d, dim(), *this)];
}

bool Tensor::is_pending() const { return impl_ && impl_->is_pending(); }

double Tensor::item() const {
  require_defined(*this, "item");
  if (numel() != 1)
    detail::throw_op_error("Tensor::item",
                           absl::StrCat("needs exactly one element, the tensor has ", numel()),
                           detail::describe(*this),
                           "Reduce it first (e.g. .sum()) or use to_vector().");
  auto bytes = read_bytes(*this, "item");
  return load_element(bytes.data(), dtype());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  auto bytes = read_bytes(*this, "to_vector");
  const size_t esize = element_size(dtype());
  std::vector<T> out;
  out.reserve(numel());
  for (int64_t i = 0; i < numel(); ++i)
    out.push_back(static_cast<T>(load_element(bytes.data() + i * esize, dtype())));
  return out;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

std::string Tensor::to_string() const {
  if (!defined()) return "tensor(undefined)";
  std::vector<double> v = to_vector<double>();
  // Nested brackets following the shape.
  std::string body;
  const Shape& s = shape();
  auto strides = s.strides();
  for (int64_t i = 0; i < numel(); ++i) {
    for (int64_t d = 0; d < s.rank(); ++d)
      if (i % (strides[d] * s[d]) == 0) body += "[";
    absl::StrAppend(&body, v[i]);
    int closed = 0;
    for (int64_t d = s.rank() - 1; d >= 0; --d) {
      if ((i + 1) % (strides[d] * s[d]) == 0) {
        body += "]";
        ++closed;
      }
    }
    if (i + 1 < numel()) body += closed ? ",\n " : ", ";
  }
  if (numel() == 0) body = "[]";
  return absl::StrCat("tensor(", type().to_string(), ", ", body, ")");
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.to_string();
}

Tensor Tensor::scalar(double value, DType dtype) {
  return scalar(value, dtype, default_device());
}

Tensor Tensor::scalar(double value, DType dtype, Device device) {
  auto impl = TensorImpl::make(TensorType{Shape{}, dtype}, device);
  impl->set_input_role(InputRole::device_scalar);
  Tensor t(std::move(impl));
  t.fill_(value);
  return t;
}

Tensor& Tensor::fill_(double value) {
  require_defined(*this, "fill_");
  TensorImpl& impl = *impl_;
  Backend& backend = backend_for(impl.device());
  // Overwritten only when this tensor owns its buffer exclusively (the
  // runtime's bookkeeping, see Executable::run): ops recorded before this
  // call and anyone sharing the buffer (a detach()ed alias, a copy_()
  // snapshot) keep the old value, in a buffer this tensor leaves.
  BufferPtr buffer = impl.buffer();
  if (!impl.owns_buffer_exclusively()) buffer = value_or_throw(backend.allocate(impl.type()));
  std::vector<std::byte> host(impl.type().bytes());
  const size_t esize = element_size(dtype());
  for (size_t off = 0; off < host.size(); off += esize)
    store_element(value, dtype(), host.data() + off);
  throw_if_error(backend.copy_in(*buffer, host.data(), host.size()));
  if (buffer != impl.buffer()) impl.set_buffer(std::move(buffer));
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  require_defined(*this, "copy_");
  require_defined(src, "copy_");
  if (src.type() != type())
    detail::throw_op_error("Tensor::copy_", "source and destination types differ",
                           absl::StrCat("destination ", detail::describe(*this),
                                        ", source ", detail::describe(src)),
                           "Reshape or convert the source with .reshape()/.to() first.");
  if (src.device() != device())
    detail::throw_op_error("Tensor::copy_", "source and destination devices differ",
                           absl::StrCat(device().to_string(), " and ", src.device().to_string()),
                           "");
  if (src.is_pending())
    impl_->set_pending(src.impl()->pending());
  else
    impl_->set_buffer(src.impl()->buffer());
  return *this;
}

Tensor Tensor::reshape(absl::Span<const int64_t> s) const { return mstep::reshape(*this, s); }
Tensor Tensor::reshape(std::initializer_list<int64_t> s) const { return mstep::reshape(*this, s); }
Tensor Tensor::view(std::initializer_list<int64_t> s) const { return mstep::view(*this, s); }
Tensor Tensor::permute(std::initializer_list<int64_t> p) const { return mstep::permute(*this, p); }
Tensor Tensor::transpose(int64_t a, int64_t b) const { return mstep::transpose(*this, a, b); }
Tensor Tensor::unsqueeze(int64_t d) const { return mstep::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return mstep::squeeze(*this, d); }
Tensor Tensor::to(DType d) const { return mstep::to(*this, d); }
Tensor Tensor::sum(std::initializer_list<int64_t> dims, bool keepdim) const {
  return mstep::sum(*this, dims, keepdim);
}
Tensor Tensor::mean(std::initializer_list<int64_t> dims, bool keepdim) const {
  return mstep::mean(*this, dims, keepdim);
}
Tensor Tensor::matmul(const Tensor& other) const { return mstep::matmul(*this, other); }

Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(Scalar a, const Tensor& b) { return sub(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }

}  // namespace mstep
