// Host kernel for f32, bf16 and f16 dropout: the ref kernel's
// (lib/backends/ref/RefNN.cpp) Philox4x32-10 stream (mstep/core/Philox.h),
// 16 counters at a time.
//
// Element i draws word 0 of Philox::block(seed, offset + i) and is kept
// iff its uniform (w >> 8) * 2^-24 is >= p, which for the integer
// k = w >> 8 is k >= ceil(p * 2^24): an exact integer test. The output is
// x * (kept ? 1/(1-p) : 0) in f64, rounded once (f64 -> f32 -> bf16 or
// f16 for the half types, as ref rounds), so NaN stays NaN where dropped,
// as in the ref kernel.
#include <immintrin.h>

#include <cmath>

#include "lib/backends/cpu/HostKernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

/// The 64-bit products a[i] * b (unsigned, b the same in every lane), as
/// their high and low 32-bit halves.
inline void multiply_wide(__m512i a, __m512i b, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, b);                       // lanes 0, 2, ...
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), b); // lanes 1, 3, ...
  hi = _mm512_mask_blend_epi32(__mmask16(0xAAAA), _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(__mmask16(0xAAAA), even, _mm512_slli_epi64(odd, 32));
}

/// a ^ b ^ c.
inline __m512i xor3(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0x96);
}

/// Word 0 of Philox::block(seed, first + lane) for the 16 lanes.
inline __m512i philox_word0(uint64_t seed, uint64_t first) {
  const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(static_cast<uint32_t>(first)));
  const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(first >> 32));
  __m512i c0 = _mm512_add_epi32(lo, simd::iota_i32());
  // The carry into the high word where the low word wrapped.
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lo);
  __m512i c1 = _mm512_mask_add_epi32(hi, carry, hi, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const __m512i m0 = _mm512_set1_epi32(static_cast<int32_t>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int32_t>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    __m512i hi0, lo0, hi1, lo1;
    multiply_wide(c0, m0, hi0, lo0);
    multiply_wide(c2, m1, hi1, lo1);
    c0 = xor3(hi1, c1, _mm512_set1_epi32(static_cast<int32_t>(k0)));
    c1 = lo1;
    c2 = xor3(hi0, c3, _mm512_set1_epi32(static_cast<int32_t>(k1)));
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c0;
}

/// Over elements of type T: float, BFloat16 or Float16.
template <typename T> class DropoutKernel final : public CpuKernel {
public:
  DropoutKernel(int64_t numel, double p, uint64_t offset)
      : numel_(numel), offset_(offset), scale_(1.0 / (1.0 - p)) {
    // keep iff k >= ceil(p * 2^24), k in [0, 2^24).
    const double threshold = std::ceil(p * 16777216.0);
    threshold_ = threshold <= 0            ? 0
                 : threshold >= 16777216.0 ? 16777216u
                                           : static_cast<uint32_t>(threshold);
  }

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const T*>(operands[0]);
    const auto* state = static_cast<const int64_t*>(operands[1]);
    auto* y = static_cast<T*>(results[0]);
    const auto seed = static_cast<uint64_t>(state[0]);
    const uint64_t first = static_cast<uint64_t>(state[1]) + offset_;
    const __m512i threshold = _mm512_set1_epi32(static_cast<int32_t>(threshold_));
    const __m512d scale = _mm512_set1_pd(scale_);
    // Philox costs far more than the bytes: split from a smaller size.
    simd::parallel_ranges(numel_, numel_ * 16, [&](int, int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; i += simd::kLanes) {
        const __mmask16 m = simd::tail_mask(end - i);
        const __m512i k = _mm512_srli_epi32(philox_word0(seed, first + i), 8);
        const __mmask16 keep = _mm512_cmpge_epu32_mask(k, threshold);
        const __m512 v = simd::load(x + i, m);
        const __m512d lo = _mm512_mul_pd(simd::low_half_f64(v),
                                         _mm512_maskz_mov_pd(static_cast<__mmask8>(keep), scale));
        const __m512d hi = _mm512_mul_pd(
            simd::high_half_f64(v), _mm512_maskz_mov_pd(static_cast<__mmask8>(keep >> 8), scale));
        simd::store(y + i, simd::narrow(lo, hi), m);
      }
    });
  }
  absl::string_view name() const override { return "host.dropout"; }

private:
  int64_t numel_;
  uint64_t offset_;
  double scale_;
  uint32_t threshold_ = 0;
};

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_dropout_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.op != OpKind::dropout || node.operands.size() != 2 || node.results.size() != 1)
    return nullptr;
  const TensorType& in = request.graph.type_of(node.operands[0]);
  const TensorType& rng = request.graph.type_of(node.operands[1]);
  if (!simd::is_f32_or_half(in.dtype) || node.results[0] != in || rng.dtype != DType::i64 ||
      rng.numel() != 2)
    return nullptr;
  const double p = attr_double(node.attrs, AttrName::p);
  if (!(p >= 0 && p <= 1)) return nullptr;
  const auto offset = static_cast<uint64_t>(attr_int(node.attrs, AttrName::offset));
  return simd::dispatch_f32_or_half(in.dtype, [&]<typename T>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<DropoutKernel<T>>(in.numel(), p, offset);
  });
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
