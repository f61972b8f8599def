// Ref kernels for the gradients of conv2d and the 2-D pools (NCHW). Each
// walks the forward's loops and scatters (or gathers) the output gradient
// along the same taps, so padding, stride, dilation, groups and ceil mode
// follow RefLinalg.cpp by construction.
//
// Gradients accumulate in a wider type than they store: double for
// f32/f64, float for bf16/f16, rounded once per element on store.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

namespace {

template <typename T>
using Accumulator =
    std::conditional_t<std::is_same_v<T, double> || std::is_same_v<T, float>, double, float>;

template <typename T> Accumulator<T> widen(T v) {
  return static_cast<Accumulator<T>>(static_cast<Compute<T>>(v));
}

template <typename T> void store(const std::vector<Accumulator<T>>& acc, T* out) {
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<T>(static_cast<Compute<T>>(acc[i]));
}

/// The attributes shared by conv2d and its two gradients.
struct ConvParams {
  const IntList& stride;
  const IntList& pad;
  const IntList& dil;
  int64_t groups;

  explicit ConvParams(const AttrList& attrs)
      : stride(attr_ints(attrs, AttrName::stride)), pad(attr_ints(attrs, AttrName::padding)),
        dil(attr_ints(attrs, AttrName::dilation)), groups(attr_int(attrs, AttrName::groups)) {}
};

/// grad_in[n, c, ih, iw] = sum over the output channels o of c's group and
/// the taps (kh, kw) with ih = oh * sH - pH + kh * dH (and likewise iw) of
///   grad_out[n, o, oh, ow] * w[o, c', kh, kw],
/// the adjoint of the conv2d forward sum.
absl::Status conv2d_input_grad_kernel(const KernelArgs& a) {
  const HostBuffer& grad = a.in(0);
  const HostBuffer& weight = a.in(1);
  HostBuffer& out = a.out();
  const ConvParams p(a.node.attrs);
  const Shape& gs = grad.type().shape;
  const Shape& ws = weight.type().shape;
  const Shape& is = out.type().shape;
  const int64_t batch = is[0], channels = is[1], height = is[2], width = is[3];
  const int64_t out_channels = ws[0], group_channels = ws[1], kh_size = ws[2], kw_size = ws[3];
  const int64_t out_h = gs[2], out_w = gs[3];
  const int64_t outs_per_group = out_channels / p.groups;
  dispatch_floating(out.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    std::vector<Acc> acc(out.numel(), Acc(0));
    const T* g = grad.data<T>();
    const T* w = weight.data<T>();
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t oc = 0; oc < out_channels; ++oc) {
        const int64_t group = oc / outs_per_group;
        const T* gp = g + (n * out_channels + oc) * out_h * out_w;
        for (int64_t gc = 0; gc < group_channels; ++gc) {
          const int64_t c = group * group_channels + gc;
          Acc* xc = acc.data() + (n * channels + c) * height * width;
          const T* wc = w + (oc * group_channels + gc) * kh_size * kw_size;
          for (int64_t kh = 0; kh < kh_size; ++kh) {
            for (int64_t kw = 0; kw < kw_size; ++kw) {
              const Acc wv = widen(wc[kh * kw_size + kw]);
              for (int64_t oh = 0; oh < out_h; ++oh) {
                const int64_t ih = oh * p.stride[0] - p.pad[0] + kh * p.dil[0];
                if (ih < 0 || ih >= height) continue;
                Acc* xrow = xc + ih * width;
                const T* grow = gp + oh * out_w;
                for (int64_t ow = 0; ow < out_w; ++ow) {
                  const int64_t iw = ow * p.stride[1] - p.pad[1] + kw * p.dil[1];
                  if (iw >= 0 && iw < width) xrow[iw] += wv * widen(grow[ow]);
                }
              }
            }
          }
        }
      }
    }
    store(acc, out.data<T>());
  });
  return absl::OkStatus();
}

/// grad_w[o, c', kh, kw] = sum over n, oh, ow of
///   grad_out[n, o, oh, ow] * in[n, c, oh * sH - pH + kh * dH, ...]
/// with c the input channel c' of o's group; padding taps add nothing.
absl::Status conv2d_weight_grad_kernel(const KernelArgs& a) {
  const HostBuffer& in = a.in(0);
  const HostBuffer& grad = a.in(1);
  HostBuffer& out = a.out();
  const ConvParams p(a.node.attrs);
  const Shape& is = in.type().shape;
  const Shape& gs = grad.type().shape;
  const Shape& ws = out.type().shape;
  const int64_t batch = is[0], channels = is[1], height = is[2], width = is[3];
  const int64_t out_channels = ws[0], group_channels = ws[1], kh_size = ws[2], kw_size = ws[3];
  const int64_t out_h = gs[2], out_w = gs[3];
  const int64_t outs_per_group = out_channels / p.groups;
  dispatch_floating(out.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    std::vector<Acc> acc(out.numel(), Acc(0));
    const T* x = in.data<T>();
    const T* g = grad.data<T>();
    for (int64_t oc = 0; oc < out_channels; ++oc) {
      const int64_t group = oc / outs_per_group;
      for (int64_t gc = 0; gc < group_channels; ++gc) {
        const int64_t c = group * group_channels + gc;
        Acc* wc = acc.data() + (oc * group_channels + gc) * kh_size * kw_size;
        for (int64_t n = 0; n < batch; ++n) {
          const T* xc = x + (n * channels + c) * height * width;
          const T* gp = g + (n * out_channels + oc) * out_h * out_w;
          for (int64_t kh = 0; kh < kh_size; ++kh) {
            for (int64_t kw = 0; kw < kw_size; ++kw) {
              Acc sum = 0;
              for (int64_t oh = 0; oh < out_h; ++oh) {
                const int64_t ih = oh * p.stride[0] - p.pad[0] + kh * p.dil[0];
                if (ih < 0 || ih >= height) continue;
                const T* xrow = xc + ih * width;
                const T* grow = gp + oh * out_w;
                for (int64_t ow = 0; ow < out_w; ++ow) {
                  const int64_t iw = ow * p.stride[1] - p.pad[1] + kw * p.dil[1];
                  if (iw >= 0 && iw < width) sum += widen(xrow[iw]) * widen(grow[ow]);
                }
              }
              wc[kh * kw_size + kw] += sum;
            }
          }
        }
      }
    }
    store(acc, out.data<T>());
  });
  return absl::OkStatus();
}

template <typename V> bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>)
    return std::isnan(v);
  else
    return false;
}

/// Each window's gradient goes to the tap PyTorch's max_pool2d picks as
/// its index: the first strict maximum scanning rows then columns, any
/// NaN replacing the pick (so the last NaN wins), and the first tap inside
/// the input when nothing beats -inf. Overlapping windows accumulate.
absl::Status max_pool2d_grad_kernel(const KernelArgs& a) {
  const HostBuffer& grad = a.in(0);
  const HostBuffer& in = a.in(1);
  HostBuffer& out = a.out();
  const IntList& kernel = attr_ints(a.node.attrs, AttrName::kernel);
  const IntList& stride = attr_ints(a.node.attrs, AttrName::stride);
  const IntList& pad = attr_ints(a.node.attrs, AttrName::padding);
  const IntList& dil = attr_ints(a.node.attrs, AttrName::dilation);
  const Shape& is = in.type().shape;
  const Shape& gs = grad.type().shape;
  const int64_t planes = is[0] * is[1], height = is[2], width = is[3];
  const int64_t out_h = gs[2], out_w = gs[3];
  dispatch_floating(out.type().dtype, [&]<typename T>() {
    using V = Compute<T>;
    using Acc = Accumulator<T>;
    std::vector<Acc> acc(out.numel(), Acc(0));
    const T* x = in.data<T>();
    const T* g = grad.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* xp = x + pl * height * width;
      const T* gp = g + pl * out_h * out_w;
      Acc* ap = acc.data() + pl * height * width;
      for (int64_t oh = 0; oh < out_h; ++oh) {
        for (int64_t ow = 0; ow < out_w; ++ow) {
          V best = -std::numeric_limits<V>::infinity();
          int64_t best_index = -1;
          for (int64_t kh = 0; kh < kernel[0]; ++kh) {
            const int64_t ih = oh * stride[0] - pad[0] + kh * dil[0];
            if (ih < 0 || ih >= height) continue;
            for (int64_t kw = 0; kw < kernel[1]; ++kw) {
              const int64_t iw = ow * stride[1] - pad[1] + kw * dil[1];
              if (iw < 0 || iw >= width) continue;
              const V v = static_cast<V>(xp[ih * width + iw]);
              if (best_index < 0) best_index = ih * width + iw;
              if (v > best || is_nan(v)) {
                best = v;
                best_index = ih * width + iw;
              }
            }
          }
          // A window always holds a tap inside the input (the forward
          // rejects padding > kernel / 2), but stay in bounds regardless.
          if (best_index >= 0) ap[best_index] += widen(gp[oh * out_w + ow]);
        }
      }
    }
    store(acc, out.data<T>());
  });
  return absl::OkStatus();
}

/// Spreads each window's gradient evenly over its taps inside the input,
/// divided by the forward's divisor: the window clipped to the padded
/// input with count_include_pad, else the number of taps inside the input.
absl::Status avg_pool2d_grad_kernel(const KernelArgs& a) {
  const HostBuffer& grad = a.in(0);
  HostBuffer& out = a.out();
  const IntList& kernel = attr_ints(a.node.attrs, AttrName::kernel);
  const IntList& stride = attr_ints(a.node.attrs, AttrName::stride);
  const IntList& pad = attr_ints(a.node.attrs, AttrName::padding);
  const bool include_pad = attr_int(a.node.attrs, AttrName::count_include_pad) != 0;
  const Shape& is = out.type().shape;
  const Shape& gs = grad.type().shape;
  const int64_t planes = is[0] * is[1], height = is[2], width = is[3];
  const int64_t out_h = gs[2], out_w = gs[3];
  dispatch_floating(out.type().dtype, [&]<typename T>() {
    using Acc = Accumulator<T>;
    std::vector<Acc> acc(out.numel(), Acc(0));
    const T* g = grad.data<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* gp = g + pl * out_h * out_w;
      Acc* ap = acc.data() + pl * height * width;
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
          const int64_t count = include_pad ? padded_h * padded_w : (h1 - h0) * (w1 - w0);
          if (count <= 0) continue;
          const Acc share = widen(gp[oh * out_w + ow]) / static_cast<Acc>(count);
          for (int64_t ih = h0; ih < h1; ++ih)
            for (int64_t iw = w0; iw < w1; ++iw) ap[ih * width + iw] += share;
        }
      }
    }
    store(acc, out.data<T>());
  });
  return absl::OkStatus();
}

}  // namespace

void register_linalg_grad_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::conv2d_input_grad)] = conv2d_input_grad_kernel;
  t[static_cast<int>(OpKind::conv2d_weight_grad)] = conv2d_weight_grad_kernel;
  t[static_cast<int>(OpKind::max_pool2d_grad)] = max_pool2d_grad_kernel;
  t[static_cast<int>(OpKind::avg_pool2d_grad)] = avg_pool2d_grad_kernel;
}

}  // namespace mstep::ref
