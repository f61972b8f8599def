// One f32, bf16 or f16 element of host bytes, read as or written from a
// float (16-bit types rounded to nearest even). Shared by the host forms
// of library steps (host_matmul in TiledHost.h, HostSdpa.h).
#pragma once

#include <cstdint>

#include "mstep/core/DType.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::cuda::testing {

/// Element `i` of `dtype` at `p`.
inline float load_element(const char* p, int64_t i, DType dtype) {
  switch (dtype) {
  case DType::bf16: return float(reinterpret_cast<const BFloat16*>(p)[i]);
  case DType::f16: return float(reinterpret_cast<const Float16*>(p)[i]);
  default: return reinterpret_cast<const float*>(p)[i];
  }
}

/// Writes `v` as element `i` of `dtype` at `p`.
inline void store_element(char* p, int64_t i, DType dtype, float v) {
  switch (dtype) {
  case DType::bf16: reinterpret_cast<BFloat16*>(p)[i] = BFloat16(v); break;
  case DType::f16: reinterpret_cast<Float16*>(p)[i] = Float16(v); break;
  default: reinterpret_cast<float*>(p)[i] = v;
  }
}

}  // namespace mstep::cuda::testing
