// What the hand-vectorized host kernels share: 16-lane AVX-512 helpers
// (tail masks, f32 -> f64 accumulation, a vector exp, bf16/f16 loads and
// stores through f32) and the one way they split work over the cores.
// Only included where __AVX512F__ is defined; HostKernels.cpp builds no
// host kernel elsewhere.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mstep/core/DType.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::cpu::simd {

inline constexpr int64_t kLanes = 16;

/// The lanes [0, remaining) of a 16-lane block (all of them for >= 16).
inline __mmask16 tail_mask(int64_t remaining) {
  return remaining >= kLanes ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1);
}

/// Masked load: lanes outside `m` read as 0 and touch no memory.
inline __m512 load(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline void store(float* p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }

// ---- bf16 and f16 through f32 ---------------------------------------------------
// A kernel templated on its element type T (float, BFloat16, Float16)
// reads 16 elements as f32 lanes (exact for both half types) and rounds
// its f32 results once more on store, as the ref kernels do
// (double -> float -> T, HalfTypes.h's round-to-nearest-even), so the
// f32 code path serves all three.

/// Whether `dtype` is one a templated kernel handles (f32, bf16, f16).
inline bool is_f32_or_half(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16;
}

/// Calls `f.template operator()<T>()` with T the storage type of `dtype`,
/// which must satisfy is_f32_or_half.
template <typename F> decltype(auto) dispatch_f32_or_half(DType dtype, F&& f) {
  switch (dtype) {
  case DType::bf16:
    return f.template operator()<BFloat16>();
  case DType::f16:
    return f.template operator()<Float16>();
  default:
    return f.template operator()<float>();
  }
}

/// Masked load of 16 16-bit elements: lanes outside `m` read as 0 and
/// touch no memory.
inline __m256i load_u16(const void* p, __mmask16 m) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_maskz_loadu_epi16(m, p);
#else
  if (m == 0xFFFF) return _mm256_loadu_si256(static_cast<const __m256i*>(p));
  alignas(32) uint16_t lanes[kLanes] = {};
  for (int i = 0; i < kLanes; ++i)
    if (m >> i & 1) std::memcpy(&lanes[i], static_cast<const uint16_t*>(p) + i, 2);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
#endif
}

inline __m512 load(const BFloat16* p, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(load_u16(p, m)), 16));
}
inline __m512 load(const Float16* p, __mmask16 m) { return _mm512_cvtph_ps(load_u16(p, m)); }

/// f32 lanes rounded to bf16 bits (in the low half of each 32-bit lane)
/// exactly as BFloat16(float): round to nearest even, and a NaN kept as a
/// quiet NaN of its sign and top payload bits.
inline __m512i to_bf16_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i odd = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_or_epi32(rounded, nan, high, _mm512_set1_epi32(0x40));
}

inline void store(BFloat16* p, __m512 v, __mmask16 m) {
  _mm512_mask_cvtepi32_storeu_epi16(p, m, to_bf16_bits(v));
}
inline void store(Float16* p, __m512 v, __mmask16 m) {
  // Round to nearest even, as the _Float16 conversion of Float16(float).
  const __m256i halves = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
  _mm512_mask_cvtepi32_storeu_epi16(p, m, _mm512_cvtepu16_epi32(halves));
}

/// One f32 value as a T (the scalar form of store).
template <typename T> inline T from_f32(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}

/// Lanes 0-7 and 8-15 of `x` widened to f64. (The zero-masking forms with
/// a full mask compile to the plain instructions; the plain intrinsics
/// trip GCC 12's -Wuninitialized on their internal undefined operand.)
inline __m512d low_half_f64(__m512 x) {
  return _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, x, 0));
}
inline __m512d high_half_f64(__m512 x) {
  return _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, x, 1));
}
/// Two f64 halves narrowed (rounded to nearest) back into 16 f32 lanes.
inline __m512 narrow(__m512d lo, __m512d hi) {
  const __m256 l = _mm512_cvtpd_ps(lo), h = _mm512_cvtpd_ps(hi);
  return _mm512_insertf32x8(_mm512_castps256_ps512(l), h, 1);
}

/// The lane indices 0..15.
inline __m512i iota_i32() {
  return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/// e^x for 8 f64 lanes, within a few ulp of exp: x = n ln 2 + r with
/// |r| <= ln 2 / 2, a degree-13 Taylor polynomial for e^r (truncation below
/// 1e-17), then a scale by 2^n that _mm512_scalef_pd takes to inf or 0
/// without overflow tricks. NaN stays NaN, -inf gives 0, +inf gives inf.
inline __m512d exp(__m512d x) {
  // Beyond these bounds e^x is inf or 0; clamping keeps n finite (max and
  // min return their second operand, x, when it is NaN).
  x = _mm512_min_pd(_mm512_set1_pd(710.0), _mm512_max_pd(_mm512_set1_pd(-746.0), x));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln 2, with ln 2 split in two so that n * hi is exact.
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93147180369123816490e-01), x);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.90821492927058770002e-10), r);
  __m512d y = _mm512_set1_pd(1.0 / 6227020800.0); // 1/13!
  for (double inverse_factorial :
       {1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
        1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0})
    y = _mm512_fmadd_pd(y, r, _mm512_set1_pd(inverse_factorial));
  return _mm512_scalef_pd(y, n);
}

/// Below this many elements a kernel runs on the calling thread: waking
/// the OpenMP team costs more than it saves.
inline constexpr int64_t kParallelWork = int64_t{1} << 15;

/// Slots that parallel_ranges may hand out: size per-thread scratch with it.
inline int max_slots() { return omp_get_max_threads(); }

/// Calls `body(slot, begin, end)` on disjoint ranges covering [0, n), one
/// per OpenMP thread (slot = thread number, boundaries rounded to 16), or
/// once as slot 0 on the calling thread when `work` is below
/// kParallelWork or the caller is already inside a parallel region.
template <typename Body> void parallel_ranges(int64_t n, int64_t work, Body&& body) {
  if (work < kParallelWork || omp_get_max_threads() == 1 || omp_in_parallel()) {
    body(0, int64_t{0}, n);
    return;
  }
#pragma omp parallel
  {
    const int threads = omp_get_num_threads(), t = omp_get_thread_num();
    const auto bound = [&](int k) {
      return k == threads ? n : std::min(n, (n * k / threads) / kLanes * kLanes);
    };
    const int64_t begin = bound(t), end = bound(t + 1);
    if (begin < end) body(t, begin, end);
  }
}

} // namespace mstep::cpu::simd
