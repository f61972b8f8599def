// Ref kernels for matmul, conv2d, max_pool2d and avg_pool2d (NCHW).
//
// Sums accumulate in a wider type than they store (Accumulator<T>):
// double for f32/f64, float for bf16/f16 (each product and the sum run in
// float, rounded once on store), and uint64 for integers so that overflow
// wraps like PyTorch's integer matmul instead of being undefined.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::ref {

namespace {

template <typename T>
using Accumulator =
    std::conditional_t<std::is_integral_v<T>, uint64_t,
                       std::conditional_t<std::is_same_v<Compute<T>, float> &&
                                              !std::is_same_v<T, float>,
                                          float, double>>;

template <typename T> Accumulator<T> widen(T v) {
  return static_cast<Accumulator<T>>(static_cast<Compute<T>>(v));
}

template <typename T> T narrow(Accumulator<T> v) {
  return static_cast<T>(static_cast<Compute<T>>(v));
}

absl::Status reject_bool(absl::string_view op, const KernelArgs& a) {
  if (a.in(0).type().dtype == DType::boolean)
    return absl::InvalidArgumentError(
        absl::StrCat("ref ", op, ": bool operands are not supported"));
  return absl::OkStatus();
}

/// out[..., n, p] = lhs[..., n, k] @ rhs[..., k, p], the batch dims of
/// lhs and rhs broadcast to those of out.
absl::Status matmul_kernel(const KernelArgs& a) {
  MSTEP_RETURN_IF_ERROR(reject_bool("matmul", a));
  const HostBuffer& lhs = a.in(0);
  const HostBuffer& rhs = a.in(1);
  HostBuffer& out = a.out();
  const Shape& ls = lhs.type().shape;
  const Shape& rs = rhs.type().shape;
  const Shape& os = out.type().shape;
  const int64_t rank = os.rank();
  const int64_t n = os[rank - 2], p = os[rank - 1], k = ls[ls.rank() - 1];
  if (out.numel() == 0) return absl::OkStatus();
  // Batch strides count whole matrices; scaled to elements below.
  const Shape batch(os.dims().subspan(0, rank - 2));
  std::array<Shape::Dims, 2> strides = {
      broadcast_strides(Shape(ls.dims().subspan(0, ls.rank() - 2)), batch),
      broadcast_strides(Shape(rs.dims().subspan(0, rs.rank() - 2)), batch)};
  dispatch(lhs.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    std::vector<Acc> row(p);
    const T* x = lhs.data<T>();
    const T* y = rhs.data<T>();
    T* z = out.data<T>();
    for_each_strided(batch, strides,
                     [&](int64_t b, const std::array<int64_t, 2>& o) {
                       const T* xm = x + o[0] * n * k;
                       const T* ym = y + o[1] * k * p;
                       T* zm = z + b * n * p;
                       // i-k-j order: the inner loop walks a row of rhs and of
                       // the accumulator contiguously.
                       for (int64_t i = 0; i < n; ++i) {
                         std::fill(row.begin(), row.end(), Acc(0));
                         for (int64_t kk = 0; kk < k; ++kk) {
                           const Acc xik = widen(xm[i * k + kk]);
                           const T* yrow = ym + kk * p;
                           for (int64_t j = 0; j < p; ++j)
                             row[j] += xik * widen(yrow[j]);
                         }
                         for (int64_t j = 0; j < p; ++j)
                           zm[i * p + j] = narrow<T>(row[j]);
                       }
                     });
  });
  return absl::OkStatus();
}

/// out[n, o, oh, ow] = bias[o] + sum over the group's input channels c and
/// the kernel taps (kh, kw) of
///   in[n, c, oh * sH - pH + kh * dH, ow * sW - pW + kw * dW] * w[o, c', kh,
///   kw]
/// where taps that land in the padding contribute nothing.
absl::Status conv2d_kernel(const KernelArgs& a) {
  const HostBuffer& in = a.in(0);
  const HostBuffer& weight = a.in(1);
  const bool has_bias = attr_int(a.node.attrs, AttrName::has_bias) != 0;
  const HostBuffer* bias = has_bias ? &a.in(2) : nullptr;
  HostBuffer& out = a.out();
  const IntList& stride = attr_ints(a.node.attrs, AttrName::stride);
  const IntList& pad = attr_ints(a.node.attrs, AttrName::padding);
  const IntList& dil = attr_ints(a.node.attrs, AttrName::dilation);
  const int64_t groups = attr_int(a.node.attrs, AttrName::groups);
  const Shape& is = in.type().shape;
  const Shape& ws = weight.type().shape;
  const Shape& os = out.type().shape;
  const int64_t batch = is[0], channels = is[1], height = is[2], width = is[3];
  const int64_t out_channels = ws[0], group_channels = ws[1];
  const int64_t kh_size = ws[2], kw_size = ws[3];
  const int64_t out_h = os[2], out_w = os[3];
  const int64_t outs_per_group = out_channels / groups;
  dispatch_floating(in.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    std::vector<Acc> plane(out_h * out_w);
    const T* x = in.data<T>();
    const T* w = weight.data<T>();
    const T* bv = bias ? bias->data<T>() : nullptr;
    T* y = out.data<T>();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t oc = 0; oc < out_channels; ++oc) {
        const int64_t group = oc / outs_per_group;
        std::fill(plane.begin(), plane.end(), bv ? widen(bv[oc]) : Acc(0));
        for (int64_t gc = 0; gc < group_channels; ++gc) {
          const int64_t c = group * group_channels + gc;
          const T* xc = x + (n * channels + c) * height * width;
          const T* wc = w + (oc * group_channels + gc) * kh_size * kw_size;
          for (int64_t kh = 0; kh < kh_size; ++kh) {
            for (int64_t kw = 0; kw < kw_size; ++kw) {
              const Acc wv = widen(wc[kh * kw_size + kw]);
              for (int64_t oh = 0; oh < out_h; ++oh) {
                const int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
                if (ih < 0 || ih >= height) continue;
                const T* xrow = xc + ih * width;
                Acc* prow = plane.data() + oh * out_w;
                for (int64_t ow = 0; ow < out_w; ++ow) {
                  const int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
                  if (iw >= 0 && iw < width) prow[ow] += wv * widen(xrow[iw]);
                }
              }
            }
          }
        }
        T* yp = y + (n * out_channels + oc) * out_h * out_w;
        for (int64_t i = 0; i < out_h * out_w; ++i) yp[i] = narrow<T>(plane[i]);
      }
    }
  });
  return absl::OkStatus();
}

template <typename V> bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>)
    return std::isnan(v);
  else
    return false;
}

/// Max over each window; taps in the padding are skipped (as -inf) and a
/// NaN anywhere in the window wins, as PyTorch.
absl::Status max_pool2d_kernel(const KernelArgs& a) {
  MSTEP_RETURN_IF_ERROR(reject_bool("max_pool2d", a));
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const IntList& kernel = attr_ints(a.node.attrs, AttrName::kernel);
  const IntList& stride = attr_ints(a.node.attrs, AttrName::stride);
  const IntList& pad = attr_ints(a.node.attrs, AttrName::padding);
  const IntList& dil = attr_ints(a.node.attrs, AttrName::dilation);
  const Shape& is = in.type().shape;
  const Shape& os = out.type().shape;
  const int64_t planes = is[0] * is[1], height = is[2], width = is[3];
  const int64_t out_h = os[2], out_w = os[3];
  dispatch(in.type().dtype, [&]<typename T>() {
    using V = Compute<T>;
    const V lowest = std::numeric_limits<V>::has_infinity
                         ? -std::numeric_limits<V>::infinity()
                         : std::numeric_limits<V>::lowest();
    const T* x = in.data<T>();
    T* y = out.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * height * width;
      T* yp = y + pl * out_h * out_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        for (int64_t ow = 0; ow < out_w; ++ow) {
          V best = lowest;
          for (int64_t kh = 0; kh < kernel[0]; ++kh) {
            const int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
            if (ih < 0 || ih >= height) continue;
            for (int64_t kw = 0; kw < kernel[1]; ++kw) {
              const int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
              if (iw < 0 || iw >= width) continue;
              const V v = static_cast<V>(xp[ih * width + iw]);
              if (v > best || is_nan(v)) best = v;
            }
          }
          yp[oh * out_w + ow] = static_cast<T>(best);
        }
      }
    }
  });
  return absl::OkStatus();
}

/// Mean over each window, with PyTorch's divisor:
/// 1. the window [start, start + kernel) is clipped to the padded input
///    (in ceil mode the last window may stick out past the right padding);
/// 2. count_include_pad divides by that clipped window's size, otherwise
///    by the number of taps inside the unpadded input.
absl::Status avg_pool2d_kernel(const KernelArgs& a) {
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const IntList& kernel = attr_ints(a.node.attrs, AttrName::kernel);
  const IntList& stride = attr_ints(a.node.attrs, AttrName::stride);
  const IntList& pad = attr_ints(a.node.attrs, AttrName::padding);
  const bool include_pad =
      attr_int(a.node.attrs, AttrName::count_include_pad) != 0;
  const Shape& is = in.type().shape;
  const Shape& os = out.type().shape;
  const int64_t planes = is[0] * is[1], height = is[2], width = is[3];
  const int64_t out_h = os[2], out_w = os[3];
  dispatch_floating(in.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    const T* x = in.data<T>();
    T* y = out.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * height * width;
      T* yp = y + pl * out_h * out_w;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        int64_t h0 = oh * stride[0] - pad[0];
        int64_t h1 = std::min(h0 + kernel[0], height + pad[0]);
        const int64_t padded_h = h1 - h0;
        h0 = std::max<int64_t>(h0, 0);
        h1 = std::min(h1, height);
        for (int64_t ow = 0; ow < out_w; ++ow) {
          int64_t w0 = ow * stride[1] - pad[1];
          int64_t w1 = std::min(w0 + kernel[1], width + pad[1]);
          const int64_t padded_w = w1 - w0;
          w0 = std::max<int64_t>(w0, 0);
          w1 = std::min(w1, width);
          Acc sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw)
              sum += widen(xp[ih * width + iw]);
          const int64_t count =
              include_pad ? padded_h * padded_w : (h1 - h0) * (w1 - w0);
          yp[oh * out_w + ow] = narrow<T>(sum / static_cast<Acc>(count));
        }
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace

void register_linalg_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::matmul)] = matmul_kernel;
  t[static_cast<int>(OpKind::conv2d)] = conv2d_kernel;
  t[static_cast<int>(OpKind::max_pool2d)] = max_pool2d_kernel;
  t[static_cast<int>(OpKind::avg_pool2d)] = avg_pool2d_kernel;
}

}  // namespace mstep::ref
