// The geometry of an mstep.conv2d (NCHW) or one of its gradients, and the
// index arithmetic its cuda loops share: the direct loop nests
// (CudaConvLoops.cpp) and the im2col form's kernels (CudaConvColumns.cpp).
// Library-internal; MLIR.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaPoolLoops.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda::conv {

using namespace mlir;
using loops::Nest;

/// The geometry of a conv2d: batch, channels, H x W in, O output channels
/// in `groups` groups (each of `group_channels` input channels), a
/// kernel_h x kernel_w kernel, OH x OW out, stride, padding, dilation.
struct Conv {
  int64_t batch, channels, height, width, out_channels, group_channels, kernel_h, kernel_w, out_h,
      out_w, groups;
  std::array<int64_t, 2> stride, pad, dilation;

  Conv(Value input, Value weight, Value output, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
       ArrayRef<int64_t> d, int64_t g) {
    auto in = cast<ShapedType>(input.getType()).getShape();
    auto w = cast<ShapedType>(weight.getType()).getShape();
    auto out = cast<ShapedType>(output.getType()).getShape();
    batch = in[0], channels = in[1], height = in[2], width = in[3];
    out_channels = w[0], group_channels = w[1], kernel_h = w[2], kernel_w = w[3];
    out_h = out[2], out_w = out[3], groups = g;
    stride = {s[0], s[1]}, pad = {p[0], p[1]}, dilation = {d[0], d[1]};
  }
  int64_t outs_per_group() const { return out_channels / groups; }
  /// The rows of a group's column matrix: its input channels times the taps.
  int64_t column_rows() const { return group_channels * kernel_h * kernel_w; }
  /// Output positions per image.
  int64_t positions() const { return out_h * out_w; }
  /// A 1x1 kernel at stride 1 without padding: the columns are the input.
  bool pointwise() const {
    return kernel_h == 1 && kernel_w == 1 && stride == std::array<int64_t, 2>{1, 1} &&
           pad == std::array<int64_t, 2>{0, 0};
  }
};

/// The geometry of `op`: an mstep.conv2d, conv2d_input_grad or
/// conv2d_weight_grad.
inline Conv geometry_of(Operation* op) {
  if (auto c = dyn_cast<dialect::Conv2dOp>(op))
    return Conv(c.getInput(), c.getWeight(), c.getResult(), c.getStride(), c.getPadding(),
                c.getDilation(), static_cast<int64_t>(c.getGroups()));
  if (auto c = dyn_cast<dialect::Conv2dInputGradOp>(op))
    return Conv(c.getResult(), c.getWeight(), c.getGradOutput(), c.getStride(), c.getPadding(),
                c.getDilation(), static_cast<int64_t>(c.getGroups()));
  auto c = cast<dialect::Conv2dWeightGradOp>(op);
  return Conv(c.getInput(), c.getResult(), c.getGradOutput(), c.getStride(), c.getPadding(),
              c.getDilation(), static_cast<int64_t>(c.getGroups()));
}

inline Value add(Nest& nest, Value a, Value b) { return nest.b.create<arith::AddIOp>(a, b); }

/// Input position o * stride - pad + k * dilation along dim `d` (signed).
inline Value tap(Nest& nest, const Conv& conv, int d, Value o, Value k) {
  Value start = nest.b.create<arith::SubIOp>(nest.affine(o, conv.stride[d], Value()),
                                             nest.index(conv.pad[d]));
  return nest.affine(k, conv.dilation[d], start);
}

/// `at` if `in`, else 0: an address that is always in bounds.
inline Value safe(Nest& nest, Value in, Value at) {
  return nest.b.create<arith::SelectOp>(in, at, nest.index(0));
}

/// The output position o with o * stride - pad + k * dilation == at along
/// dim `d`, and whether there is one (inside the output).
inline std::pair<Value, Value> output_at(Nest& nest, const Conv& conv, int d, Value at, Value k) {
  ImplicitLocOpBuilder& b = nest.b;
  Value distance = b.create<arith::SubIOp>(add(nest, at, nest.index(conv.pad[d])),
                                           nest.affine(k, conv.dilation[d], Value()));
  Value ahead = b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, distance, nest.index(0));
  Value nonneg = safe(nest, ahead, distance);
  Value o = nest.div(nonneg, conv.stride[d]);
  Value on_grid = b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, nest.rem(nonneg, conv.stride[d]),
                                          nest.index(0));
  Value within = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, o,
                                         nest.index(d == 0 ? conv.out_h : conv.out_w));
  return {o, loops::both(nest, loops::both(nest, ahead, on_grid), within)};
}

}  // namespace mstep::cuda::conv
