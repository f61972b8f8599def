// The arithmetic the flash attention kernels are built from: 16-lane f32
// vectors (GCC/Clang vector extensions; one AVX-512 register each with
// -march=native, two AVX2 registers elsewhere), a vector exp, register-
// blocked tile matrix products, Philox dropout draws eight at a time, and
// f32/bf16 conversion of input rows; and the per-thread scratch the tiles
// live in.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include <omp.h>

#include "mstep/core/HalfTypes.h"

#ifdef __AVX512F__
#include <immintrin.h>
#endif

namespace mstep::cpu::flash {

/// Query rows per tile (Br) and keys per tile (Bc). 64 x 64 f32 score
/// tiles (16 KiB) and 64-row q/k/v tiles of head dim 64 stay in L1/L2.
constexpr int64_t kBlockRows = 64;
constexpr int64_t kBlockKeys = 64;
constexpr int64_t kLanes = 16;
static_assert(kBlockRows % kLanes == 0 && kBlockKeys % kLanes == 0);

typedef float VecF __attribute__((vector_size(64)));
typedef int32_t VecI __attribute__((vector_size(64)));
typedef uint64_t VecU64 __attribute__((vector_size(64)));
typedef int64_t VecI64 __attribute__((vector_size(64)));
typedef float VecF8 __attribute__((vector_size(32)));

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

inline VecF load(const float* p) {
  VecF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VecF v) { std::memcpy(p, &v, sizeof v); }
inline VecF splat(float x) { return VecF{x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
inline VecF vmax(VecF a, VecF b) { return a > b ? a : b; }

/// e^x on 16 lanes: Cephes' expf polynomial (about 2 ulp). Exactly 0 for
/// x below -87.3, so an excluded (-inf) score gives probability 0; NaN
/// stays NaN; x is clamped at 88.
inline VecF exp16(VecF x) {
  const VecF hi = splat(88.0f);
  x = x > hi ? hi : x;  // NaN compares false and is kept
  const VecF t = x * 1.44269504088896341f;
  // Adding 1.5 * 2^23 rounds t to an integer n held in the low mantissa
  // bits, so the bit patterns' difference is n as an int.
  const VecF magic = splat(12582912.0f);
  const VecF shifted = t + magic;
  const VecF n = shifted - magic;
  VecF r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  VecF p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const VecI n_int = std::bit_cast<VecI>(shifted) - std::bit_cast<VecI>(magic);
  const VecF result = p * std::bit_cast<VecF>((n_int + 127) << 23);
  return x < splat(-87.33654f) ? splat(0.0f) : result;
}

inline float horizontal_max(VecF v) {
  float m = v[0];
  for (int i = 1; i < kLanes; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
inline float horizontal_sum(VecF v) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

/// What dropout needs for one run: the Philox key, the stream's start,
/// and the ref kernel's keep rule `Philox::uniform(...) >= p` as an integer
/// test on the 24 bits uniform() uses (exact, since both sides scale by
/// 2^24 without rounding).
struct DropoutDraw {
  uint64_t seed = 0, offset = 0;
  uint32_t threshold = 0;  // keep iff (word >> 8) >= threshold
  float keep_scale = 0;    // 1 / (1 - p), 0 when p = 1
};

/// (x mod 2^32) * c per 64-bit lane, for c below 2^32: the full product.
inline VecU64 mul_32x32(VecU64 x, uint64_t c) {
#ifdef __AVX512F__
  // vpmuludq reads only the low halves, so no mask is needed.
  return std::bit_cast<VecU64>(
      _mm512_mul_epu32(std::bit_cast<__m512i>(x), _mm512_set1_epi64(static_cast<int64_t>(c))));
#else
  return (x & 0xFFFFFFFFu) * c;
#endif
}

/// factors[c] = keep ? keep_scale : 0 for elements first_index + c,
/// c < n, of the dropout stream: Philox4x32-10 (core/Philox.h), bit for
/// bit the ref kernel's draws, on 32 counters at a time in four
/// independent 8-lane chains (one chain alone waits on multiply latency).
inline void dropout_factors(const DropoutDraw& d, uint64_t first_index, int64_t n, float* factors) {
  constexpr uint64_t kLow32 = 0xFFFFFFFFu;
  constexpr int kChains = 4, kWidth = 8 * kChains;
  const VecU64 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  for (int64_t c = 0; c < n; c += kWidth) {
    VecU64 x0[kChains], x1[kChains], x2[kChains], x3[kChains];
    for (int h = 0; h < kChains; ++h) {
      const VecU64 counter = (d.offset + first_index + static_cast<uint64_t>(c + 8 * h)) + lane;
      x0[h] = counter;
      x1[h] = counter >> 32;
      x2[h] = VecU64{};
      x3[h] = VecU64{};
    }
    uint64_t k0 = d.seed & kLow32, k1 = d.seed >> 32;
    for (int round = 0; round < 10; ++round) {
      for (int h = 0; h < kChains; ++h) {
        const VecU64 p0 = mul_32x32(x0[h], 0xD2511F53);
        const VecU64 p1 = mul_32x32(x2[h], 0xCD9E8D57);
        // Only the low 32 bits of each lane are Philox's word; the high
        // bits are don't-care (mul_32x32 ignores them) until the end.
        x0[h] = (p1 >> 32) ^ x1[h] ^ k0;
        x1[h] = p1;
        x2[h] = (p0 >> 32) ^ x3[h] ^ k1;
        x3[h] = p0;
      }
      k0 = (k0 + 0x9E3779B9u) & kLow32;
      k1 = (k1 + 0xBB67AE85u) & kLow32;
    }
    float out[kWidth];
    for (int h = 0; h < kChains; ++h) {
      const VecI64 keep = ((x0[h] & kLow32) >> 8) >= d.threshold;  // -1 or 0 per lane
      const VecF8 f = __builtin_convertvector(keep, VecF8) * -d.keep_scale;
      std::memcpy(out + 8 * h, &f, sizeof f);
    }
    std::memcpy(factors + c, out, std::min<int64_t>(kWidth, n - c) * sizeof(float));
  }
}

/// C[kRows x 16*kVecs] (+)= A * B for one register block: A(m, k) is
/// a[m * lda + k], or a[k * lda + m] when kTransposeA; C is overwritten
/// unless kAccumulate.
template <int kRows, int kVecs, bool kTransposeA, bool kAccumulate>
inline void gemm_block(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  VecF acc[kRows][kVecs];
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v)
      acc[r][v] = kAccumulate ? load(c + r * ldc + v * kLanes) : splat(0.0f);
  for (int64_t k = 0; k < K; ++k) {
    VecF bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = load(b + k * ldb + v * kLanes);
    for (int r = 0; r < kRows; ++r) {
      const VecF av = splat(kTransposeA ? a[k * lda + r] : a[r * lda + k]);
      for (int v = 0; v < kVecs; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int v = 0; v < kVecs; ++v) store(c + r * ldc + v * kLanes, acc[r][v]);
}

/// The columns past the last full vector, one at a time.
template <int kRows, bool kTransposeA, bool kAccumulate>
inline void gemm_tail(int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float* c, int64_t ldc) {
  for (int r = 0; r < kRows; ++r) {
    if (!kAccumulate) std::fill(c + r * ldc, c + r * ldc + N, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float av = kTransposeA ? a[k * lda + r] : a[r * lda + k];
      for (int64_t n = 0; n < N; ++n) c[r * ldc + n] += av * b[k * ldb + n];
    }
  }
}

template <int kRows, bool kTransposeA, bool kAccumulate>
inline void gemm_rows(int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float* c, int64_t ldc) {
  int64_t n = 0;
  for (; n + 4 * kLanes <= N; n += 4 * kLanes)
    gemm_block<kRows, 4, kTransposeA, kAccumulate>(K, a, lda, b + n, ldb, c + n, ldc);
  switch ((N - n) / kLanes) {
    case 3:
      gemm_block<kRows, 3, kTransposeA, kAccumulate>(K, a, lda, b + n, ldb, c + n, ldc);
      break;
    case 2:
      gemm_block<kRows, 2, kTransposeA, kAccumulate>(K, a, lda, b + n, ldb, c + n, ldc);
      break;
    case 1:
      gemm_block<kRows, 1, kTransposeA, kAccumulate>(K, a, lda, b + n, ldb, c + n, ldc);
      break;
    default:
      break;
  }
  n += (N - n) / kLanes * kLanes;
  if (n < N) gemm_tail<kRows, kTransposeA, kAccumulate>(N - n, K, a, lda, b + n, ldb, c + n, ldc);
}

/// C[M x N] (+)= A[M x K] * B[K x N], all f32 with row strides
/// lda/ldb/ldc. A(m, k) is a[m * lda + k], or a[k * lda + m] when
/// kTransposeA (so A^T * B needs no transposed copy). B and C are
/// row-major; C is overwritten unless kAccumulate.
template <bool kTransposeA, bool kAccumulate>
void gemm(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  constexpr int kRows = 4;
  int64_t m = 0;
  auto a_at = [&](int64_t row) { return kTransposeA ? a + row : a + row * lda; };
  for (; m + kRows <= M; m += kRows)
    gemm_rows<kRows, kTransposeA, kAccumulate>(N, K, a_at(m), lda, b, ldb, c + m * ldc, ldc);
  switch (M - m) {
    case 3:
      gemm_rows<3, kTransposeA, kAccumulate>(N, K, a_at(m), lda, b, ldb, c + m * ldc, ldc);
      break;
    case 2:
      gemm_rows<2, kTransposeA, kAccumulate>(N, K, a_at(m), lda, b, ldb, c + m * ldc, ldc);
      break;
    case 1:
      gemm_rows<1, kTransposeA, kAccumulate>(N, K, a_at(m), lda, b, ldb, c + m * ldc, ldc);
      break;
    default:
      break;
  }
}

/// C += A * B and C = A * B (see gemm).
template <bool kTransposeA>
void gemm_accumulate(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* c, int64_t ldc) {
  gemm<kTransposeA, true>(M, N, K, a, lda, b, ldb, c, ldc);
}
template <bool kTransposeA>
void gemm_assign(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc) {
  gemm<kTransposeA, false>(M, N, K, a, lda, b, ldb, c, ldc);
}

/// Storage type <-> f32 (bf16 rounds to nearest even).
template <typename T>
inline float to_f32(T x) {
  return static_cast<float>(x);
}
template <typename T>
inline T from_f32(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return T(x);
}

/// `n` rows of `width` elements at `src` (row stride `width`) as f32:
/// `src` itself for f32 data, else converted into `scratch`.
template <typename T>
inline const float* rows_as_f32(const T* src, int64_t n, int64_t width, float* scratch) {
  if constexpr (std::is_same_v<T, float>) {
    return src;
  } else {
    for (int64_t i = 0; i < n * width; ++i) scratch[i] = to_f32(src[i]);
    return scratch;
  }
}

/// `scale` times the transpose of `n` rows of `width` elements at `src`
/// into dst[width x ld] (column c = row c of src), zero in columns
/// [n, round_up(n, kLanes)) so whole vectors can be read.
template <typename T>
inline void load_transposed(const T* src, int64_t n, int64_t width, float* dst, int64_t ld,
                            float scale = 1.0f) {
  const int64_t padded = round_up(n, kLanes);
  for (int64_t e = 0; e < width; ++e) {
    float* out = dst + e * ld;
    for (int64_t c = 0; c < n; ++c) out[c] = to_f32(src[c * width + e]) * scale;
    for (int64_t c = n; c < padded; ++c) out[c] = 0.0f;
  }
}

/// A kernel's scratch, allocated once at construction: `threads` slices of
/// `per_thread` floats, then `shared` floats, every slice 64-byte aligned.
class ThreadScratch {
 public:
  ThreadScratch() = default;
  ThreadScratch(int threads, int64_t per_thread, int64_t shared)
      : stride_(round_up(per_thread, kLanes)),
        floats_(stride_ * threads + round_up(shared, kLanes)),
        data_(static_cast<float*>(
            ::operator new[](floats_ * sizeof(float) + 64, std::align_val_t{64}))),
        threads_(threads) {}

  /// Threads for a parallel region over this scratch: OpenMP's current
  /// setting, but never more than there are slices.
  int team_size() const { return std::max(1, std::min(threads_, omp_get_max_threads())); }
  float* thread(int i) { return data_.get() + stride_ * i; }
  float* shared() { return data_.get() + stride_ * threads_; }
  size_t bytes() const { return floats_ * sizeof(float); }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  int64_t stride_ = 0, floats_ = 0;
  std::unique_ptr<float[], Free> data_;
  int threads_ = 0;
};

}  // namespace mstep::cpu::flash
