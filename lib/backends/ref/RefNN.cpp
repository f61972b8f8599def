// Ref kernels for softmax, log_softmax, layer_norm, rms_norm and dropout.
// Statistics (max, sums, mean, variance) are computed in double and each
// output is rounded once to the tensor's dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Philox.h"

namespace mstep::ref {

namespace {

template <typename T>
T round_to(double v) {
  return static_cast<T>(static_cast<Compute<T>>(v));
}

template <bool kLog>
absl::Status softmax_kernel(const KernelArgs& a) {
  // The tensor is [outer, n, inner] around `dim`. Each of the outer*inner
  // lanes of n elements is normalized on its own, after subtracting its
  // maximum so exp cannot overflow. A lane of all -inf gives NaN and a NaN
  // poisons its lane, as PyTorch.
  const HostBuffer& in = a.in(0);
  const Shape& shape = in.type().shape;
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d < dim) outer *= shape[d];
    else if (d == dim) n = shape[d];
    else inner *= shape[d];
  }
  dispatch_floating(in.type().dtype, [&]<typename T>() {
    const T* x = in.data<T>();
    T* y = a.out().data<T>();
    std::vector<double> e(n);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n; ++j)
          m = std::max(m, static_cast<double>(x[base + j * inner]));
        double sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          e[j] = std::exp(static_cast<double>(x[base + j * inner]) - m);
          sum += e[j];
        }
        const double log_sum = std::log(sum);
        for (int64_t j = 0; j < n; ++j) {
          const double v = static_cast<double>(x[base + j * inner]);
          y[base + j * inner] = round_to<T>(kLog ? v - m - log_sum : e[j] / sum);
        }
      }
    }
  });
  return absl::OkStatus();
}

/// The input as `rows` rows of `cols` elements, `cols` being the product
/// of the trailing `normalized_ndim` dims.
void split_rows(const Shape& shape, int64_t normalized_ndim, int64_t& rows,
                int64_t& cols) {
  rows = 1;
  cols = 1;
  for (int64_t d = 0; d < shape.rank(); ++d)
    (d < shape.rank() - normalized_ndim ? rows : cols) *= shape[d];
}

absl::Status layer_norm_kernel(const KernelArgs& a) {
  // Per row: mean and biased variance (two passes, double), then
  // (x - mean) / sqrt(var + eps) * weight + bias.
  const AttrList& attrs = a.node.attrs;
  const bool has_weight = attr_int(attrs, AttrName::has_weight) != 0;
  const bool has_bias = attr_int(attrs, AttrName::has_bias) != 0;
  const double eps = attr_double(attrs, AttrName::eps);
  int64_t rows, cols;
  split_rows(a.in(0).type().shape, attr_int(attrs, AttrName::normalized_ndim),
             rows, cols);
  dispatch_floating(a.in(0).type().dtype, [&]<typename T>() {
    const T* x = a.in(0).data<T>();
    const T* w = has_weight ? a.in(1).data<T>() : nullptr;
    const T* b = has_bias ? a.in(has_weight ? 2 : 1).data<T>() : nullptr;
    T* y = a.out().data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      double mean = 0;
      for (int64_t c = 0; c < cols; ++c) mean += static_cast<double>(xr[c]);
      mean /= static_cast<double>(cols);
      double var = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double d = static_cast<double>(xr[c]) - mean;
        var += d * d;
      }
      var /= static_cast<double>(cols);
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (int64_t c = 0; c < cols; ++c) {
        double v = (static_cast<double>(xr[c]) - mean) * rstd;
        if (w) v *= static_cast<double>(w[c]);
        if (b) v += static_cast<double>(b[c]);
        y[r * cols + c] = round_to<T>(v);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status rms_norm_kernel(const KernelArgs& a) {
  // Per row: x / sqrt(mean(x^2) + eps) * weight.
  const AttrList& attrs = a.node.attrs;
  const bool has_weight = attr_int(attrs, AttrName::has_weight) != 0;
  const double eps = attr_double(attrs, AttrName::eps);
  int64_t rows, cols;
  split_rows(a.in(0).type().shape, attr_int(attrs, AttrName::normalized_ndim),
             rows, cols);
  dispatch_floating(a.in(0).type().dtype, [&]<typename T>() {
    const T* x = a.in(0).data<T>();
    const T* w = has_weight ? a.in(1).data<T>() : nullptr;
    T* y = a.out().data<T>();
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * cols;
      double ms = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double v = static_cast<double>(xr[c]);
        ms += v * v;
      }
      ms /= static_cast<double>(cols);
      const double rrms = 1.0 / std::sqrt(ms + eps);
      for (int64_t c = 0; c < cols; ++c) {
        double v = static_cast<double>(xr[c]) * rrms;
        if (w) v *= static_cast<double>(w[c]);
        y[r * cols + c] = round_to<T>(v);
      }
    }
  });
  return absl::OkStatus();
}

absl::Status dropout_kernel(const KernelArgs& a) {
  // Element i is kept iff its Philox uniform is >= p; kept elements are
  // scaled by 1/(1-p). The output is x * (kept ? scale : 0), so a NaN stays
  // NaN even where dropped (as PyTorch), which NaN guards rely on.
  const int64_t* state = a.in(1).data<int64_t>();
  const auto seed = static_cast<uint64_t>(state[0]);
  const auto offset =
      static_cast<uint64_t>(state[1]) +
      static_cast<uint64_t>(attr_int(a.node.attrs, AttrName::offset));
  const double p = attr_double(a.node.attrs, AttrName::p);
  const double scale = 1.0 / (1.0 - p);
  dispatch_floating(a.in(0).type().dtype, [&]<typename T>() {
    const T* x = a.in(0).data<T>();
    T* y = a.out().data<T>();
    for (int64_t i = 0; i < a.out().numel(); ++i) {
      const bool keep =
          static_cast<double>(Philox::uniform(seed, offset, i)) >= p;
      y[i] = round_to<T>(static_cast<double>(x[i]) * (keep ? scale : 0.0));
    }
  });
  return absl::OkStatus();
}

}  // namespace

void register_nn_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::softmax)] = softmax_kernel<false>;
  t[static_cast<int>(OpKind::log_softmax)] = softmax_kernel<true>;
  t[static_cast<int>(OpKind::layer_norm)] = layer_norm_kernel;
  t[static_cast<int>(OpKind::rms_norm)] = rms_norm_kernel;
  t[static_cast<int>(OpKind::dropout)] = dropout_kernel;
}

}  // namespace mstep::ref
