// Reading and writing one element of any dtype through double, with
// PyTorch's conversion rules (float to int truncates, nonzero is true).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "mstep/core/DType.h"
#include "mstep/core/HalfTypes.h"

namespace mstep {

inline double load_element(const std::byte* p, DType dtype) {
  switch (dtype) {
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::bf16: { BFloat16 v; std::memcpy(&v, p, 2); return float(v); }
    case DType::f16: { Float16 v; std::memcpy(&v, p, 2); return float(v); }
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::boolean: return static_cast<uint8_t>(*p) ? 1.0 : 0.0;
  }
  return 0;
}

inline void store_element(double v, DType dtype, std::byte* p) {
  switch (dtype) {
    case DType::f32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); return; }
    case DType::f64: std::memcpy(p, &v, 8); return;
    case DType::bf16: { BFloat16 x(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case DType::f16: { Float16 x(static_cast<float>(v)); std::memcpy(p, &x, 2); return; }
    case DType::i32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); return; }
    case DType::i64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); return; }
    case DType::boolean: *p = std::byte{static_cast<uint8_t>(v != 0)}; return;
  }
}

}  // namespace mstep
