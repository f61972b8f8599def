// Host kernel for f32, bf16 and f16 softmax and log_softmax along one dim,
// computed as the ref kernel (lib/backends/ref/RefNN.cpp) does: in f64
// from the inputs, each output rounded f64 -> f32 (-> bf16 or f16), so the
// two agree to float rounding.
//
// The input is [outer, n, inner] around the dim; each of the outer * inner
// lanes of n elements is normalized on its own:
//   1. m = the lane's maximum (exact in f32);
//   2. sum = the sum of exp(x - m), in f64 with the f64 vector exp;
//   3. softmax: exp(x - m) * (1 / sum), the exps kept from step 2 in a
//      per-thread f64 scratch row when it fits in L2 (reloading them is
//      cheaper than a second exp), else computed again;
//      log_softmax: (x - m) - log(sum).
// NaN and infinities need no special case: a NaN, a +inf (inf - inf) or a
// lane of only -inf (-inf - -inf) makes the sum NaN and with it every
// output of the lane, as in the ref kernel, while a -inf in a finite lane
// gives 0 (softmax) or -inf (log_softmax).
//
// A *unit* is what one 16-lane pass covers: with inner == 1, one contiguous
// lane read 16 elements at a time (row mode); otherwise 16 neighbouring
// lanes, one element of each per step (column mode). The threads split the
// units.
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "lib/backends/cpu/HostKernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

/// 16 lanes in f64: lanes 0-7 (lo) and 8-15 (hi).
struct F64Lanes {
  __m512d lo, hi;
};

inline F64Lanes widen(__m512 x) { return {simd::low_half_f64(x), simd::high_half_f64(x)}; }
inline F64Lanes broadcast(double v) { return {_mm512_set1_pd(v), _mm512_set1_pd(v)}; }

/// exp(x - shift), lane-wise in f64.
inline F64Lanes exp_minus(__m512 x, const F64Lanes& shift) {
  const F64Lanes wide = widen(x);
  return {simd::exp(_mm512_sub_pd(wide.lo, shift.lo)), simd::exp(_mm512_sub_pd(wide.hi, shift.hi))};
}

/// Lane i of the result is lane i ^ k of `v`. (The zero-masking forms with
/// a full mask, as in HostSimd.h: the plain intrinsics trip GCC 12's
/// -Wuninitialized on their internal undefined operand.)
inline __m512 swap_lanes(__m512 v, int k) {
  return _mm512_maskz_permutexvar_ps(0xFFFF,
                                     _mm512_xor_si512(simd::iota_i32(), _mm512_set1_epi32(k)), v);
}
inline __m512d swap_lanes(__m512d v, int k) {
  const __m512i iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm512_maskz_permutexvar_pd(0xFF, _mm512_xor_si512(iota, _mm512_set1_epi64(k)), v);
}

/// Row mode: one lane of `n` contiguous elements; step q covers elements
/// [16q, 16q + 16).
template <typename T> struct RowUnit {
  const T* x;
  T* y;
  int64_t n;

  int64_t steps() const { return (n + simd::kLanes - 1) / simd::kLanes; }
  int64_t offset(int64_t q) const { return q * simd::kLanes; }
  __mmask16 mask(int64_t q) const { return simd::tail_mask(n - q * simd::kLanes); }
  /// The row's maximum and sum from the 16 lanes' partial ones, in every
  /// lane (butterflies of lane swaps).
  __m512 combine_max(__m512 partial) const {
    for (int k : {8, 4, 2, 1})
      partial = _mm512_maskz_max_ps(0xFFFF, partial, swap_lanes(partial, k));
    return partial;
  }
  F64Lanes combine_sum(const F64Lanes& partial) const {
    __m512d sum = _mm512_add_pd(partial.lo, partial.hi);
    for (int k : {4, 2, 1}) sum = _mm512_maskz_add_pd(0xFF, sum, swap_lanes(sum, k));
    return {sum, sum};
  }
  /// log(sum) (one per row).
  F64Lanes log_of(const F64Lanes& sum) const {
    return broadcast(std::log(_mm512_cvtsd_f64(sum.lo)));
  }
};

/// Column mode: the 16 lanes (`valid` of them real) starting at x, element
/// q of each at x + q * stride; step q covers element q.
template <typename T> struct ColumnUnit {
  const T* x;
  T* y;
  int64_t n, stride;
  __mmask16 valid;

  int64_t steps() const { return n; }
  int64_t offset(int64_t q) const { return q * stride; }
  __mmask16 mask(int64_t) const { return valid; }
  /// Each lane is a whole lane of the op already.
  __m512 combine_max(__m512 partial) const { return partial; }
  F64Lanes combine_sum(const F64Lanes& partial) const { return partial; }
  F64Lanes log_of(const F64Lanes& sum) const {
    alignas(64) double lanes[simd::kLanes];
    _mm512_store_pd(lanes, sum.lo);
    _mm512_store_pd(lanes + 8, sum.hi);
    for (int lane = 0; lane < simd::kLanes; ++lane)
      if (valid >> lane & 1) lanes[lane] = std::log(lanes[lane]);
    return {_mm512_load_pd(lanes), _mm512_load_pd(lanes + 8)};
  }
};

/// Steps 1-3 of the file comment for one unit. Masked-off lanes load as 0
/// and are kept out of the maximum and the sum; an in-place y reads each
/// block before writing it. `exps` (softmax only) has room for the 16
/// lanes of every step, or is null.
template <bool kLog, typename Unit> void normalize(const Unit& u, double* exps) {
  __m512 partial_max = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t q = 0; q < u.steps(); ++q) {
    const __mmask16 m = u.mask(q);
    partial_max = _mm512_mask_max_ps(partial_max, m, partial_max, simd::load(u.x + u.offset(q), m));
  }
  const F64Lanes max = widen(u.combine_max(partial_max));

  F64Lanes partial_sum = broadcast(0.0);
  for (int64_t q = 0; q < u.steps(); ++q) {
    const __mmask16 m = u.mask(q);
    const F64Lanes e = exp_minus(simd::load(u.x + u.offset(q), m), max);
    if (exps) {
      _mm512_storeu_pd(exps + q * simd::kLanes, e.lo);
      _mm512_storeu_pd(exps + q * simd::kLanes + 8, e.hi);
    }
    partial_sum.lo =
        _mm512_mask_add_pd(partial_sum.lo, static_cast<__mmask8>(m), partial_sum.lo, e.lo);
    partial_sum.hi =
        _mm512_mask_add_pd(partial_sum.hi, static_cast<__mmask8>(m >> 8), partial_sum.hi, e.hi);
  }
  const F64Lanes sum = u.combine_sum(partial_sum);

  if constexpr (kLog) {
    const F64Lanes log_sum = u.log_of(sum);
    for (int64_t q = 0; q < u.steps(); ++q) {
      const __mmask16 m = u.mask(q);
      const F64Lanes x = widen(simd::load(u.x + u.offset(q), m));
      simd::store(u.y + u.offset(q),
                  simd::narrow(_mm512_sub_pd(_mm512_sub_pd(x.lo, max.lo), log_sum.lo),
                               _mm512_sub_pd(_mm512_sub_pd(x.hi, max.hi), log_sum.hi)),
                  m);
    }
  } else {
    // A product with the reciprocal instead of the ref's quotient: both
    // are within two f64 ulps of e / sum, far below the f32 rounding.
    const __m512d one = _mm512_set1_pd(1.0);
    const F64Lanes inverse = {_mm512_div_pd(one, sum.lo), _mm512_div_pd(one, sum.hi)};
    for (int64_t q = 0; q < u.steps(); ++q) {
      const __mmask16 m = u.mask(q);
      const F64Lanes e = exps ? F64Lanes{_mm512_loadu_pd(exps + q * simd::kLanes),
                                         _mm512_loadu_pd(exps + q * simd::kLanes + 8)}
                              : exp_minus(simd::load(u.x + u.offset(q), m), max);
      simd::store(u.y + u.offset(q),
                  simd::narrow(_mm512_mul_pd(e.lo, inverse.lo), _mm512_mul_pd(e.hi, inverse.hi)),
                  m);
    }
  }
}

/// The largest scratch row, in doubles (512 KiB, half of a Zen 4 L2).
inline constexpr int64_t kMaxScratch = int64_t{1} << 16;

/// Over elements of type T (float, BFloat16 or Float16).
template <bool kLog, typename T> class SoftmaxKernel final : public CpuKernel {
public:
  SoftmaxKernel(int64_t outer, int64_t n, int64_t inner) : outer_(outer), n_(n), inner_(inner) {
    const int64_t steps = inner == 1 ? (n + simd::kLanes - 1) / simd::kLanes : n;
    scratch_row_ = steps * simd::kLanes;
    if (!kLog && scratch_row_ <= kMaxScratch) {
      slots_ = simd::max_slots();
      scratch_.resize(slots_ * scratch_row_);
    }
  }

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const T*>(operands[0]);
    auto* y = static_cast<T*>(results[0]);
    const int64_t outer = outer_, n = n_, inner = inner_;
    const bool large = outer * n * inner >= simd::kParallelWork;
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (large && outer > 1)
      for (int64_t o = 0; o < outer; ++o)
        normalize<kLog>(RowUnit<T>{x + o * n, y + o * n, n}, scratch_of_this_thread());
      return;
    }
    const int64_t blocks = (inner + simd::kLanes - 1) / simd::kLanes;
#pragma omp parallel for schedule(static) if (large && outer * blocks > 1)
    for (int64_t unit = 0; unit < outer * blocks; ++unit) {
      const int64_t o = unit / blocks, column = unit % blocks * simd::kLanes;
      const int64_t base = o * n * inner + column;
      normalize<kLog>(ColumnUnit<T>{x + base, y + base, n, inner, simd::tail_mask(inner - column)},
                      scratch_of_this_thread());
    }
  }
  absl::string_view name() const override { return kLog ? "host.log_softmax" : "host.softmax"; }

private:
  /// The calling thread's scratch row, or null (log_softmax, rows too long,
  /// or more threads than at construction).
  double* scratch_of_this_thread() {
    const int slot = omp_get_thread_num();
    return slot < slots_ ? scratch_.data() + slot * scratch_row_ : nullptr;
  }

  int64_t outer_, n_, inner_;
  int64_t scratch_row_ = 0;
  int slots_ = 0;
  std::vector<double> scratch_;
};

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_softmax_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if ((node.op != OpKind::softmax && node.op != OpKind::log_softmax) || node.operands.size() != 1 ||
      node.results.size() != 1)
    return nullptr;
  const TensorType& in = request.graph.type_of(node.operands[0]);
  if (!simd::is_f32_or_half(in.dtype) || node.results[0] != in || in.numel() == 0) return nullptr;
  const Shape& shape = in.shape;
  const int64_t dim = attr_int(node.attrs, AttrName::dim);
  if (dim < 0 || dim >= shape.rank()) return nullptr;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < shape.rank(); ++d) inner *= shape[d];
  const bool log = node.op == OpKind::log_softmax;
  return simd::dispatch_f32_or_half(in.dtype, [&]<typename T>() -> std::unique_ptr<CpuKernel> {
    if (log) return std::make_unique<SoftmaxKernel<true, T>>(outer, shape[dim], inner);
    return std::make_unique<SoftmaxKernel<false, T>>(outer, shape[dim], inner);
  });
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
