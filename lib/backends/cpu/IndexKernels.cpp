// Host kernels for the embedding-style index ops (semantics in
// lib/backends/ref/RefShape.cpp and RefScatter.cpp), each viewing its
// tensors as [outer, extent along dim, inner]:
//  - index_select: out[o, j, :] = in[o, index[j], :], row copies;
//  - gather (index shaped like the input but along dim):
//    out[o, j, k] = in[o, index[o, j, k], k];
//  - index_add (f32): out = in, then out[o, index[j], :] += src[o, j, :];
//  - scatter_add (f32, index shaped like src and like the input but along
//    dim): out = in, then out[o, index[o, j, k], k] += src[o, j, k].
// The adds keep the ref kernels' order (duplicates in index order), so
// results are bitwise equal; threads split outer rows or inner columns,
// never one output element. Indices are checked first (see
// IndexCheckedKernel): a bad one is reported, never followed.
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/HostKernels.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)

#include "lib/backends/cpu/HostSimd.h"

namespace mstep::cpu {

namespace {

/// Ends gather's and index_select's index errors, as in the ref kernels.
constexpr absl::string_view kEmbeddingNote =
    " (embedding reports bad token ids through index_select.)";

/// [outer, size, inner] around `dim` of `shape`.
struct AxisView {
  int64_t outer = 1, size = 1, inner = 1;
  static AxisView of(const Shape& shape, int64_t dim) {
    AxisView v;
    for (int64_t d = 0; d < shape.rank(); ++d)
      (d < dim ? v.outer : d == dim ? v.size : v.inner) *= shape[d];
    return v;
  }
};

/// Same-size storage type for moving elements of `bytes` bytes.
template <size_t kBytes>
using Word = std::conditional_t<
    kBytes == 1, uint8_t,
    std::conditional_t<kBytes == 2, uint16_t, std::conditional_t<kBytes == 4, uint32_t, uint64_t>>>;

/// What every index kernel shares: the index check and the error fill.
class IndexKernel : public IndexCheckedKernel {
public:
  struct Info {
    std::string op; // "index_select", ...
    int64_t dim, size;
    TensorType index, input, result;
    absl::string_view note;
  };
  explicit IndexKernel(Info info)
      : info_(std::move(info)), name_(absl::StrCat("host.", info_.op)) {}
  absl::string_view name() const override { return name_; }

protected:
  /// True when every index is in [0, size). Otherwise records the error
  /// (the ref kernels' message), fills the result with NaN (zeros for
  /// integers) and returns false.
  template <typename I> bool check(const I* index, void* result) {
    const int64_t n = info_.index.numel();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = index[i];
      if (v >= 0 && v < info_.size) continue;
      last_error_ = absl::InvalidArgumentError(absl::StrCat(
          "mstep::", info_.op, ": index ", v, " (element ", i, " of the index ",
          info_.index.to_string(), ") is out of range [0, ", info_.size, ") for dim ", info_.dim,
          " of the input ", info_.input.to_string(),
          ". Indices must be in [0, size); negative indices are not wrapped.", info_.note));
      fill_invalid(result);
      return false;
    }
    last_error_ = absl::OkStatus();
    return true;
  }

  Info info_;

private:
  void fill_invalid(void* result) const {
    const int64_t n = info_.result.numel();
    if (info_.result.dtype == DType::f32)
      std::fill_n(static_cast<float*>(result), n, std::numeric_limits<float>::quiet_NaN());
    else if (info_.result.dtype == DType::f64)
      std::fill_n(static_cast<double*>(result), n, std::numeric_limits<double>::quiet_NaN());
    else
      std::memset(result, 0, info_.result.bytes());
  }

  std::string name_;
};

/// Copies `bytes` from `src` to `dst` (distinct buffers) with the threads.
void parallel_copy(void* dst, const void* src, int64_t bytes) {
  if (dst == src) return; // updated in place
  simd::parallel_ranges(bytes, bytes / 4, [&](int, int64_t begin, int64_t end) {
    std::memcpy(static_cast<std::byte*>(dst) + begin, static_cast<const std::byte*>(src) + begin,
                end - begin);
  });
}

// ---- index_select -----------------------------------------------------------

template <typename I, size_t kBytes> class IndexSelectKernel final : public IndexKernel {
public:
  IndexSelectKernel(Info info, AxisView view) : IndexKernel(std::move(info)), view_(view) {}

  void run(const void* const* operands, void* const* results) override {
    using W = Word<kBytes>;
    const auto* in = static_cast<const W*>(operands[0]);
    const auto* index = static_cast<const I*>(operands[1]);
    auto* out = static_cast<W*>(results[0]);
    if (!check(index, out)) return;
    const int64_t n = info_.index.numel(), size = view_.size, inner = view_.inner;
    const int64_t rows = view_.outer * n;
#pragma omp parallel for schedule(static) if (rows * inner >= simd::kParallelWork)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t o = row / n, j = row % n;
      const W* from = in + (o * size + static_cast<int64_t>(index[j])) * inner;
      if (inner == 1)
        out[row] = *from;
      else
        std::memcpy(out + row * inner, from, inner * kBytes);
    }
  }

private:
  AxisView view_;
};

// ---- gather -----------------------------------------------------------------

template <typename I, size_t kBytes> class GatherKernel final : public IndexKernel {
public:
  GatherKernel(Info info, AxisView view, int64_t n)
      : IndexKernel(std::move(info)), view_(view), n_(n) {}

  void run(const void* const* operands, void* const* results) override {
    using W = Word<kBytes>;
    const auto* in = static_cast<const W*>(operands[0]);
    const auto* index = static_cast<const I*>(operands[1]);
    auto* out = static_cast<W*>(results[0]);
    if (!check(index, out)) return;
    const int64_t n = n_, size = view_.size, inner = view_.inner;
    const int64_t rows = view_.outer * n;
#pragma omp parallel for schedule(static) if (rows * inner >= simd::kParallelWork)
    for (int64_t row = 0; row < rows; ++row) {
      const W* base = in + row / n * size * inner;
      const I* idx = index + row * inner;
      W* dst = out + row * inner;
      for (int64_t k = 0; k < inner; ++k) dst[k] = base[static_cast<int64_t>(idx[k]) * inner + k];
    }
  }

private:
  AxisView view_;
  int64_t n_;
};

// ---- index_add --------------------------------------------------------------

template <typename I> class IndexAddKernel final : public IndexKernel {
public:
  IndexAddKernel(Info info, AxisView view) : IndexKernel(std::move(info)), view_(view) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* in = static_cast<const float*>(operands[0]);
    const auto* index = static_cast<const I*>(operands[1]);
    const auto* source = static_cast<const float*>(operands[2]);
    auto* out = static_cast<float*>(results[0]);
    if (!check(index, out)) return;
    parallel_copy(out, in, info_.result.bytes());
    const int64_t n = info_.index.numel(), size = view_.size, inner = view_.inner;
    const int64_t outer = view_.outer;
    // Block (o, j) of source adds into block (o, index[j]) of out, j in
    // order; the threads take disjoint columns, so each output element
    // sees its additions in the ref kernel's order.
    simd::parallel_ranges(inner, outer * n * inner, [&](int, int64_t begin, int64_t end) {
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < n; ++j) {
          float* dst = out + (o * size + static_cast<int64_t>(index[j])) * inner;
          const float* src = source + (o * n + j) * inner;
          for (int64_t k = begin; k < end; k += simd::kLanes) {
            const __mmask16 m = simd::tail_mask(end - k);
            simd::store(dst + k, _mm512_add_ps(simd::load(dst + k, m), simd::load(src + k, m)), m);
          }
        }
    });
  }

private:
  AxisView view_;
};

// ---- scatter_add ------------------------------------------------------------

template <typename I> class ScatterAddKernel final : public IndexKernel {
public:
  ScatterAddKernel(Info info, AxisView view, int64_t n)
      : IndexKernel(std::move(info)), view_(view), n_(n) {}

  void run(const void* const* operands, void* const* results) override {
    const auto* in = static_cast<const float*>(operands[0]);
    const auto* index = static_cast<const I*>(operands[1]);
    const auto* source = static_cast<const float*>(operands[2]);
    auto* out = static_cast<float*>(results[0]);
    if (!check(index, out)) return;
    parallel_copy(out, in, info_.result.bytes());
    const int64_t n = n_, size = view_.size, inner = view_.inner, outer = view_.outer;
    // Columns k are independent; within one, j runs in order (the ref
    // kernel's row-major walk of the index).
    simd::parallel_ranges(inner, outer * n * inner, [&](int, int64_t begin, int64_t end) {
      for (int64_t o = 0; o < outer; ++o) {
        float* dst = out + o * size * inner;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t at = (o * n + j) * inner;
          for (int64_t k = begin; k < end; ++k)
            dst[static_cast<int64_t>(index[at + k]) * inner + k] += source[at + k];
        }
      }
    });
  }

private:
  AxisView view_;
  int64_t n_;
};

// ---- Factory ----------------------------------------------------------------

/// Calls `f.template operator()<I>()` for the index dtype (i32 or i64).
template <typename F> std::unique_ptr<CpuKernel> with_index_type(DType dtype, F&& f) {
  if (dtype == DType::i32) return f.template operator()<int32_t>();
  if (dtype == DType::i64) return f.template operator()<int64_t>();
  return nullptr;
}

/// Same with the element size of the moved data (1, 2, 4 or 8 bytes).
template <template <typename, size_t> class Kernel, typename I, typename... Args>
std::unique_ptr<CpuKernel> with_element_size(size_t bytes, Args&&... args) {
  switch (bytes) {
  case 1:
    return std::make_unique<Kernel<I, 1>>(std::forward<Args>(args)...);
  case 2:
    return std::make_unique<Kernel<I, 2>>(std::forward<Args>(args)...);
  case 4:
    return std::make_unique<Kernel<I, 4>>(std::forward<Args>(args)...);
  case 8:
    return std::make_unique<Kernel<I, 8>>(std::forward<Args>(args)...);
  default:
    return nullptr;
  }
}

/// Whether `a` and `b` have the same rank and dims except `dim`.
bool same_except(const Shape& a, const Shape& b, int64_t dim) {
  if (a.rank() != b.rank()) return false;
  for (int64_t d = 0; d < a.rank(); ++d)
    if (d != dim && a[d] != b[d]) return false;
  return true;
}

} // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_index_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  const OpKind op = node.op;
  const bool adds = op == OpKind::index_add || op == OpKind::scatter_add;
  if (node.operands.size() != (adds ? 3u : 2u) || node.results.size() != 1) return nullptr;
  const TensorType& input = request.graph.type_of(node.operands[0]);
  const TensorType& index = request.graph.type_of(node.operands[1]);
  const TensorType& result = node.results[0];
  const int64_t dim = attr_int(node.attrs, AttrName::dim);
  if (input.shape.rank() == 0 || dim < 0 || dim >= input.shape.rank()) return nullptr;
  if (result.dtype != input.dtype || input.numel() == 0 || result.numel() == 0) return nullptr;
  const AxisView view = AxisView::of(input.shape, dim);
  IndexKernel::Info info{std::string(op_name(op)),
                         dim,
                         view.size,
                         index,
                         input,
                         result,
                         adds ? absl::string_view() : kEmbeddingNote};
  const size_t bytes = element_size(input.dtype);
  switch (op) {
  case OpKind::index_select:
    if (index.shape.rank() > 1) return nullptr;
    return with_index_type(index.dtype, [&]<typename I>() {
      return with_element_size<IndexSelectKernel, I>(bytes, info, view);
    });
  case OpKind::gather:
    if (!same_except(index.shape, input.shape, dim) || result.shape != index.shape) return nullptr;
    return with_index_type(index.dtype, [&]<typename I>() {
      return with_element_size<GatherKernel, I>(bytes, info, view, index.shape[dim]);
    });
  case OpKind::index_add: {
    const TensorType& source = request.graph.type_of(node.operands[2]);
    if (input.dtype != DType::f32 || source.dtype != DType::f32 || index.shape.rank() > 1 ||
        result.shape != input.shape || !same_except(source.shape, input.shape, dim) ||
        source.shape[dim] != index.numel())
      return nullptr;
    return with_index_type(index.dtype, [&]<typename I>() -> std::unique_ptr<CpuKernel> {
      return std::make_unique<IndexAddKernel<I>>(info, view);
    });
  }
  case OpKind::scatter_add: {
    const TensorType& source = request.graph.type_of(node.operands[2]);
    if (input.dtype != DType::f32 || source.dtype != DType::f32 || source.shape != index.shape ||
        !same_except(index.shape, input.shape, dim) || result.shape != input.shape)
      return nullptr;
    return with_index_type(index.dtype, [&]<typename I>() -> std::unique_ptr<CpuKernel> {
      return std::make_unique<ScatterAddKernel<I>>(info, view, index.shape[dim]);
    });
  }
  default:
    return nullptr;
  }
}

} // namespace mstep::cpu

#endif // __AVX512F__ && __AVX512DQ__
