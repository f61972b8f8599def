// DType: the element types mstep tensors can hold, their sizes, and
// PyTorch's type-promotion lattice.
#pragma once

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace mstep {

/// Element type of a tensor. Names follow MLIR (f32, i64, ...); `boolean`
/// is PyTorch's torch.bool.
enum class DType : uint8_t { f32, f64, bf16, f16, i32, i64, boolean };

inline constexpr int kNumDTypes = 7;

/// Short name used in messages and dumps: "f32", "bool", ...
absl::string_view dtype_name(DType dtype);

/// Bytes per element.
size_t element_size(DType dtype);

inline bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::bf16 ||
         d == DType::f16;
}
inline bool is_integral(DType d) { return d == DType::i32 || d == DType::i64; }

/// PyTorch's promote_types for two tensors of the same priority class.
DType promote_types(DType a, DType b);

/// Category used when a lower-priority operand (a 0-d tensor or a host
/// scalar) may still raise the result type: bool < integral < floating.
int dtype_category(DType d);

/// The floating dtype integers are promoted to by ops such as exp or div.
inline constexpr DType kDefaultFloat = DType::f32;

}  // namespace mstep
