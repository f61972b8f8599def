// gather/scatter: four nested free-dimension loops per partition row, the
// innermost a strided loop over typed elements.
#include "lib/backends/neuron/TileGather.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "mstep/core/HalfTypes.h"

namespace mstep::neuron {

namespace {

/// The pattern's free dims padded to four, outermost first.
struct Dims4 {
  std::array<int64_t, 4> size{1, 1, 1, 1};
  std::array<int64_t, 4> stride{0, 0, 0, 0};
};

Dims4 dims4(const AccessPattern& ap) {
  Dims4 d;
  const int n = static_cast<int>(ap.dims.size());
  for (int i = 0; i < n && i < 4; ++i) {
    d.size[4 - n + i] = ap.dims[i].size;
    d.stride[4 - n + i] = ap.dims[i].stride;
  }
  return d;
}

inline float to_f32(BFloat16 v) { return float(v); }
inline float to_f32(Float16 v) { return float(v); }
inline float to_f32(float v) { return v; }
inline float to_f32(int32_t v) { return static_cast<float>(v); }
inline float to_f32(uint8_t v) { return static_cast<float>(v); }

template <typename T> inline T from_f32(float v) {
  if constexpr (std::is_same_v<T, uint8_t>) { // uint8 (bool tiles): saturating
    if (!(v > 0)) return 0;
    return v >= 255.0f ? 255 : static_cast<uint8_t>(v);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    if (std::isnan(v)) return 0;
    if (v >= 2147483647.0f) return std::numeric_limits<int32_t>::max();
    if (v <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
    return static_cast<int32_t>(v);
  } else if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

/// Calls body(element pointer offset in elements, flat index) over the
/// pattern's free elements of one row, innermost loop last.
template <typename Body> inline void walk(const Dims4& d, Body&& body) {
  int64_t k = 0;
  for (int64_t i0 = 0; i0 < d.size[0]; ++i0)
    for (int64_t i1 = 0; i1 < d.size[1]; ++i1)
      for (int64_t i2 = 0; i2 < d.size[2]; ++i2) {
        const int64_t base = i0 * d.stride[0] + i1 * d.stride[1] + i2 * d.stride[2];
        body(base, d.size[3], d.stride[3], k);
        k += d.size[3];
      }
}

template <typename T> void gather_t(const AccessPattern& ap, const PatternBase& b, float* out) {
  const Dims4 d = dims4(ap);
  const int64_t free = ap.free_elements();
  for (int64_t p = 0; p < ap.partitions; ++p) {
    const T* row = reinterpret_cast<const T*>(b.row(p));
    float* o = out + p * free;
    walk(d, [&](int64_t base, int64_t n, int64_t stride, int64_t k) {
      const T* src = row + base;
      if (stride == 1)
        for (int64_t j = 0; j < n; ++j) o[k + j] = to_f32(src[j]);
      else
        for (int64_t j = 0; j < n; ++j) o[k + j] = to_f32(src[j * stride]);
    });
  }
}

template <typename T>
void scatter_t(const AccessPattern& ap, const PatternBase& b, const float* in) {
  const Dims4 d = dims4(ap);
  const int64_t free = ap.free_elements();
  for (int64_t p = 0; p < ap.partitions; ++p) {
    T* row = reinterpret_cast<T*>(b.row(p));
    const float* x = in + p * free;
    walk(d, [&](int64_t base, int64_t n, int64_t stride, int64_t k) {
      T* dst = row + base;
      if (stride == 1)
        for (int64_t j = 0; j < n; ++j) dst[j] = from_f32<T>(x[k + j]);
      else
        for (int64_t j = 0; j < n; ++j) dst[j * stride] = from_f32<T>(x[k + j]);
    });
  }
}

template <typename T>
void copy_t(const AccessPattern& dst, const PatternBase& db, const AccessPattern& src,
            const PatternBase& sb) {
  // Both patterns walk the same number of elements per row; read the source
  // row into a contiguous buffer, then write it out.
  std::vector<T> tmp(static_cast<size_t>(src.free_elements()));
  const Dims4 ds = dims4(src), dd = dims4(dst);
  for (int64_t p = 0; p < src.partitions; ++p) {
    const T* srow = reinterpret_cast<const T*>(sb.row(p));
    walk(ds, [&](int64_t base, int64_t n, int64_t stride, int64_t k) {
      if (stride == 1)
        std::memcpy(&tmp[k], srow + base, n * sizeof(T));
      else
        for (int64_t j = 0; j < n; ++j) tmp[k + j] = srow[base + j * stride];
    });
    T* drow = reinterpret_cast<T*>(db.row(p));
    walk(dd, [&](int64_t base, int64_t n, int64_t stride, int64_t k) {
      if (stride == 1)
        std::memcpy(drow + base, &tmp[k], n * sizeof(T));
      else
        for (int64_t j = 0; j < n; ++j) drow[base + j * stride] = tmp[k + j];
    });
  }
}

} // namespace

void gather(const AccessPattern& ap, const PatternBase& base, float* out) {
  switch (ap.dtype) {
  case DType::bf16:
    return gather_t<BFloat16>(ap, base, out);
  case DType::f16:
    return gather_t<Float16>(ap, base, out);
  case DType::i32:
    return gather_t<int32_t>(ap, base, out);
  case DType::boolean:
    return gather_t<uint8_t>(ap, base, out);
  default:
    return gather_t<float>(ap, base, out);
  }
}

void scatter(const AccessPattern& ap, const PatternBase& base, const float* in) {
  switch (ap.dtype) {
  case DType::bf16:
    return scatter_t<BFloat16>(ap, base, in);
  case DType::f16:
    return scatter_t<Float16>(ap, base, in);
  case DType::i32:
    return scatter_t<int32_t>(ap, base, in);
  case DType::boolean:
    return scatter_t<uint8_t>(ap, base, in);
  default:
    return scatter_t<float>(ap, base, in);
  }
}

void copy_pattern(const AccessPattern& dst, const PatternBase& dst_base, const AccessPattern& src,
                  const PatternBase& src_base) {
  if (element_size(src.dtype) == 1) return copy_t<uint8_t>(dst, dst_base, src, src_base);
  if (element_size(src.dtype) == 2) return copy_t<uint16_t>(dst, dst_base, src, src_base);
  return copy_t<uint32_t>(dst, dst_base, src, src_base);
}

} // namespace mstep::neuron
