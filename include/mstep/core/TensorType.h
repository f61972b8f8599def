// TensorType: shape plus dtype, the static type of every traced value.
#pragma once

#include <string>

#include "mstep/core/DType.h"
#include "mstep/core/Shape.h"

namespace mstep {

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return numel() * element_size(dtype); }
  /// "f32[2, 3]"
  std::string to_string() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

}  // namespace mstep
