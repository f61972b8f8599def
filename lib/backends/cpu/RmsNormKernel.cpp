// Host kernel for f32, bf16 and f16 rms_norm: per row of the trailing
// normalized_ndim dims, x / sqrt(mean(x^2) + eps) * weight, computed as the
// ref kernel (lib/backends/ref/RefNN.cpp) does, in f64 and rounded once
// (f64 -> f32 -> bf16 or f16 for the half types, as ref rounds); rows
// split over the threads.
#include <immintrin.h>

#include <cmath>

#include "lib/backends/cpu/HostKernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

/// Over elements (input, weight, output) of type T: float, BFloat16 or
/// Float16.
template <typename T> class RmsNormKernel final : public CpuKernel {
public:
  RmsNormKernel(int64_t rows, int64_t cols, double eps, bool has_weight)
      : rows_(rows), cols_(cols), eps_(eps), has_weight_(has_weight) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* x = static_cast<const T*>(operands[0]);
    const auto* w = has_weight_ ? static_cast<const T*>(operands[1]) : nullptr;
    auto* y = static_cast<T*>(results[0]);
    const int64_t rows = rows_;
#pragma omp parallel for schedule(static) if (rows * cols_ >= simd::kParallelWork && rows > 1)
    for (int64_t r = 0; r < rows; ++r) normalize_row(x + r * cols_, w, y + r * cols_);
  }
  absl::string_view name() const override { return "host.rms_norm"; }

private:
  void normalize_row(const T* x, const T* w, T* y) const {
    // 1. mean(x^2) in f64.
    __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
    for (int64_t c = 0; c < cols_; c += simd::kLanes) {
      const __m512 v = simd::load(x + c, simd::tail_mask(cols_ - c));
      const __m512d vlo = simd::low_half_f64(v), vhi = simd::high_half_f64(v);
      lo = _mm512_fmadd_pd(vlo, vlo, lo);
      hi = _mm512_fmadd_pd(vhi, vhi, hi);
    }
    const double ms = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi)) / static_cast<double>(cols_);
    const __m512d rrms = _mm512_set1_pd(1.0 / std::sqrt(ms + eps_));
    // 2. (x * rrms) * w in f64, rounded once (an in-place y reads each
    //    block before writing it).
    for (int64_t c = 0; c < cols_; c += simd::kLanes) {
      const __mmask16 m = simd::tail_mask(cols_ - c);
      const __m512 v = simd::load(x + c, m);
      __m512d ylo = _mm512_mul_pd(simd::low_half_f64(v), rrms);
      __m512d yhi = _mm512_mul_pd(simd::high_half_f64(v), rrms);
      if (w) {
        const __m512 wv = simd::load(w + c, m);
        ylo = _mm512_mul_pd(ylo, simd::low_half_f64(wv));
        yhi = _mm512_mul_pd(yhi, simd::high_half_f64(wv));
      }
      simd::store(y + c, simd::narrow(ylo, yhi), m);
    }
  }

  int64_t rows_, cols_;
  double eps_;
  bool has_weight_;
};

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_rms_norm_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.op != OpKind::rms_norm || node.results.size() != 1) return nullptr;
  const bool has_weight =
      attr_int_or(node.attrs, AttrName::has_weight, node.operands.size() > 1) != 0;
  if (node.operands.size() != (has_weight ? 2u : 1u)) return nullptr;
  const TensorType& in = request.graph.type_of(node.operands[0]);
  if (!simd::is_f32_or_half(in.dtype) || node.results[0] != in) return nullptr;
  const int64_t normalized_ndim = attr_int(node.attrs, AttrName::normalized_ndim);
  if (normalized_ndim < 1 || normalized_ndim > in.shape.rank()) return nullptr;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < in.shape.rank(); ++d)
    (d < in.shape.rank() - normalized_ndim ? rows : cols) *= in.shape[d];
  if (has_weight) {
    const TensorType& w = request.graph.type_of(node.operands[1]);
    if (w.dtype != in.dtype || w.numel() != cols) return nullptr;
  }
  if (cols == 0) return nullptr;
  const double eps = attr_double(node.attrs, AttrName::eps);
  return simd::dispatch_f32_or_half(in.dtype, [&]<typename T>() -> std::unique_ptr<CpuKernel> {
    return std::make_unique<RmsNormKernel<T>>(rows, cols, eps, has_weight);
  });
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
