// mstep::Tensor: a cheap handle to a lazy value.
//
// Creating a tensor or calling an op records a node and returns at once;
// nothing computes until mark_step() or a data read (item(), to_vector(),
// printing), which is a sync point that runs only the subgraph it needs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "mstep/core/DType.h"
#include "mstep/core/Device.h"
#include "mstep/core/Error.h"
#include "mstep/core/Shape.h"
#include "mstep/core/TensorType.h"

namespace mstep {

class TensorImpl;

/// A host scalar argument: `x + 2`, `x * 0.5`, `x == true`.
/// Integral and bool scalars keep their kind for type promotion.
class Scalar {
 public:
  Scalar(double v) : value_(v), dtype_(DType::f64) {}
  Scalar(float v) : value_(v), dtype_(DType::f64) {}
  Scalar(int v) : value_(v), dtype_(DType::i64) {}
  Scalar(int64_t v) : value_(static_cast<double>(v)), dtype_(DType::i64) {}
  Scalar(bool v) : value_(v ? 1 : 0), dtype_(DType::boolean) {}
  double value() const { return value_; }
  /// f64 for floating scalars, i64 for integers, bool for bools.
  DType dtype() const { return dtype_; }

 private:
  double value_;
  DType dtype_;
};

class Tensor {
 public:
  /// An undefined tensor (used for optional arguments).
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {
    if (impl_) add_handle(impl_.get());
  }
  // A Tensor is a user handle of its TensorImpl (TensorImpl::has_handles):
  // copies count, moves hand the handle over.
  Tensor(const Tensor& other) : impl_(other.impl_) {
    if (impl_) add_handle(impl_.get());
  }
  Tensor(Tensor&& other) noexcept = default;
  Tensor& operator=(const Tensor& other) {
    if (impl_ != other.impl_) *this = Tensor(other);
    return *this;
  }
  Tensor& operator=(Tensor&& other) noexcept {
    if (this != &other) {
      Tensor old(std::move(*this));  // drops this handle on return
      impl_ = std::move(other.impl_);
    }
    return *this;
  }
  ~Tensor() {
    if (impl_) drop_handle(impl_.get());
  }

  bool defined() const { return impl_ != nullptr; }
  const TensorType& type() const;
  const Shape& shape() const { return type().shape; }
  DType dtype() const { return type().dtype; }
  Device device() const;
  int64_t dim() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  /// Size of dimension `d`; negative d counts from the end.
  int64_t size(int64_t d) const;

  /// True while the tensor has ops that have not run yet.
  bool is_pending() const;

  // ---- Data reads: sync points -------------------------------------
  /// The single element as a double. Throws unless numel() == 1.
  double item() const;
  /// All elements, converted to T, in row-major order.
  template <typename T>
  std::vector<T> to_vector() const;
  /// "tensor(f32[2, 2], [[1, 2], [3, 4]])"
  std::string to_string() const;

  // ---- Device scalars ----------------------------------------------
  /// A 0-d tensor holding `value`, materialized at once. Use it for
  /// values that change every step (learning rate, loop index): update
  /// it with fill_() and the compiled graph stays the same.
  static Tensor scalar(double value, DType dtype = DType::f32);
  static Tensor scalar(double value, DType dtype, Device device);
  /// Overwrites every element with `value` without recording an op.
  /// Ops traced earlier still see the old value.
  Tensor& fill_(double value);
  /// Makes this tensor hold the value of `src` from now on (same shape
  /// and dtype). Lazy: records nothing until `src` itself is computed.
  Tensor& copy_(const Tensor& src);

  // ---- Autograd ----------------------------------------------------
  /// Whether gradients flow to or through this tensor.
  bool requires_grad() const;
  /// Marks a leaf tensor as a parameter whose .grad() backward() fills.
  Tensor& requires_grad_(bool requires_grad = true);
  /// The accumulated gradient of a leaf (undefined until a backward).
  Tensor grad() const;
  /// Replaces the gradient (undefined clears it, as set_to_none).
  void set_grad(const Tensor& grad);
  /// A leaf: created by the user, not by a differentiable op.
  bool is_leaf() const;
  /// Name of the backward function that produced it ("" for leaves).
  std::string grad_fn_name() const;
  /// Reverse-mode autodiff from this tensor. A non-scalar needs `gradient`.
  /// The backward ops are recorded lazily, like any other op; they run
  /// at the next mark_step(). Without retain_graph the graph's saved
  /// tensors are freed, and a second backward through it is an error.
  void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
  /// The same value, cut from the autograd graph.
  Tensor detach() const;

  // ---- Common methods (forward to the free functions) --------------
  Tensor reshape(absl::Span<const int64_t> shape) const;
  Tensor reshape(std::initializer_list<int64_t> shape) const;
  Tensor view(std::initializer_list<int64_t> shape) const;
  Tensor permute(std::initializer_list<int64_t> perm) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor to(DType dtype) const;
  /// A copy on `device` (through the host, with the backends' copy_out and
  /// copy_in) with the same dtype and shape; the same tensor when it
  /// already lives there. A pending tensor is computed first (a sync
  /// point). The copy is a leaf: a leaf that requires grad gives one that
  /// requires grad, a tensor computed from such leaves is refused (autograd
  /// does not record the copy). Not inside a Graph capture (replay would
  /// not repeat the copy). Module::to moves a module's tensors in place.
  Tensor to(Device device) const;
  Tensor sum(std::initializer_list<int64_t> dims = {}, bool keepdim = false) const;
  Tensor mean(std::initializer_list<int64_t> dims = {}, bool keepdim = false) const;
  Tensor matmul(const Tensor& other) const;

  TensorImpl* impl() const { return impl_.get(); }
  /// The impl itself; a copy of this pointer is not a handle.
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  static void add_handle(TensorImpl* impl);
  static void drop_handle(TensorImpl* impl);

  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);

extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<bool> Tensor::to_vector<bool>() const;
extern template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

}  // namespace mstep
