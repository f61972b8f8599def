// Shape: the dimensions of a tensor, with helpers for rank, element count
// and dimension wrapping (PyTorch's negative dims).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace mstep {

/// A list of dimension sizes. Small shapes live inline, no allocation.
class Shape {
 public:
  using Dims = absl::InlinedVector<int64_t, 6>;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(absl::Span<const int64_t> dims)
      : dims_(dims.begin(), dims.end()) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t operator[](int64_t i) const { return dims_[i]; }
  int64_t& operator[](int64_t i) { return dims_[i]; }
  int64_t numel() const;
  absl::Span<const int64_t> dims() const { return dims_; }
  Dims& mutable_dims() { return dims_; }
  void push_back(int64_t d) { dims_.push_back(d); }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }

  /// Row-major strides, in elements.
  Dims strides() const;

  /// "[2, 3, 4]"
  std::string to_string() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.dims_ == b.dims_;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  Dims dims_;
};

}  // namespace mstep
