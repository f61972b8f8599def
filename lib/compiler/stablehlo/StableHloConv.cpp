// conv2d and its two gradients as stablehlo.convolution (NCHW input, OIHW
// weight), the gradients written as JAX's autodiff writes them
// (jax/_src/lax/convolution.py, _conv_general_dilated_transpose_lhs/_rhs;
// checked against jax.vjp's lowering). With H the input size, k the
// kernel, s/p/d stride/padding/dilation, K = d (k - 1) and OH the output
// size along one spatial dim:
//   input grad  = conv(grad, reverse(w) with O and C swapped per group),
//                 lhs_dilation s, rhs_dilation d, padding (K - p,
//                 H - 1 - (OH - 1) s + p): the adjoint of the strided
//                 window walk;
//   weight grad = conv(x as [C, N, H, W], grad as [N, O, OH, OW]),
//                 window stride d, rhs_dilation s, batch_group_count
//                 groups, padding (p, (OH - 1) s + 1 + K - H - p).
// Negative padding (rows the forward never read) is a crop instead: the
// input grad's output is sliced, the weight grad's input is sliced, so
// every padding the consumers see is >= 0. bf16 and f16 convolve in f32
// and round once, as the ref kernels accumulate (a consumer's own 16-bit
// accumulation would differ by far more than one ulp).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/compiler/stablehlo/StableHloOpFamilies.h"

namespace mstep::stablehlo {

namespace {

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

ConvParams read_conv(mlir::Operation* op) {
  return {array_attr(op, "stride"), array_attr(op, "padding"), array_attr(op, "dilation"),
          i64_attr(op, "groups")};
}

struct ConvCall {
  std::string dims;  // "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]"
  std::vector<int64_t> window_strides{1, 1}, low{0, 0}, high{0, 0}, lhs_dilation{1, 1},
      rhs_dilation{1, 1};
  int64_t feature_groups = 1, batch_groups = 1;
};

/// The convolution in the accumulator type (accumulator_type); the
/// callers round once at the end.
Value convolution(FunctionText& f, const Value& lhs_in, const Value& rhs_in, std::vector<int64_t> shape,
                  const ConvCall& c) {
  const std::string acc = accumulator_type(lhs_in.elem);
  const Value lhs = f.convert(lhs_in, acc), rhs = f.convert(rhs_in, acc);
  return f.op("stablehlo.convolution", {lhs, rhs}, std::move(shape), acc,
              absl::StrCat("batch_group_count = ", c.batch_groups,
                           " : i64, dimension_numbers = #stablehlo.conv<", c.dims,
                           ">, feature_group_count = ", c.feature_groups,
                           " : i64, lhs_dilation = ", i64_array(c.lhs_dilation),
                           ", padding = ", padding_attr(c.low, c.high),
                           ", precision_config = [#stablehlo<precision HIGHEST>, "
                           "#stablehlo<precision HIGHEST>], rhs_dilation = ",
                           i64_array(c.rhs_dilation), ", window_strides = ",
                           i64_array(c.window_strides)));
}

}  // namespace

absl::StatusOr<Values> lower_conv2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out) {
  const ConvParams p = read_conv(op);
  ConvCall c{.dims = "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]",
             .window_strides = p.stride,
             .low = p.padding,
             .high = p.padding,
             .rhs_dilation = p.dilation,
             .feature_groups = p.groups};
  Value y = convolution(f, in[0], in[1], out[0].shape, c);
  if (in.size() > 2)
    y = f.same("stablehlo.add", {y, f.broadcast_in_dim(f.convert(in[2], y.elem), out[0].shape, {1})});
  return Values{f.convert(y, out[0].elem)};
}

absl::StatusOr<Values> lower_conv2d_input_grad(FunctionText& f, mlir::Operation* op,
                                               const Values& in, const Values& out) {
  const ConvParams p = read_conv(op);
  const Value &grad = in[0], &w = in[1];
  const std::vector<int64_t>& x_shape = out[0].shape;
  const int64_t o = w.shape[0], cg = w.shape[1], g = p.groups;
  // [O, C/g, kh, kw] -> [O/g, C, kh, kw]: each group's output channels
  // become the transposed convolution's input features, its input
  // channels (group-major) the output features; the taps reversed.
  Value k = f.reshape(w, {g, o / g, cg, w.shape[2], w.shape[3]});
  k = f.transpose(k, {1, 0, 2, 3, 4});
  k = f.reshape(k, {o / g, g * cg, w.shape[2], w.shape[3]});
  k = f.op("stablehlo.reverse", {k}, k.shape, k.elem, "dimensions = array<i64: 2, 3>");
  ConvCall c{.dims = "[b, f, 0, 1]x[i, o, 0, 1]->[b, f, 0, 1]",
             .lhs_dilation = p.stride,
             .rhs_dilation = p.dilation,
             .feature_groups = g};
  std::vector<int64_t> shape = x_shape, crop_low(4, 0), crop_high(4, 0);
  for (int s = 0; s < 2; ++s) {
    const int64_t extent = p.dilation[s] * (w.shape[2 + s] - 1);
    const int64_t lo = extent - p.padding[s];
    const int64_t hi = x_shape[2 + s] - 1 - (grad.shape[2 + s] - 1) * p.stride[s] + p.padding[s];
    c.low[s] = std::max<int64_t>(lo, 0);
    c.high[s] = std::max<int64_t>(hi, 0);
    crop_low[2 + s] = c.low[s] - lo;
    crop_high[2 + s] = c.high[s] - hi;
    shape[2 + s] += crop_low[2 + s] + crop_high[2 + s];
  }
  const Value full = convolution(f, grad, k, shape, c);
  std::vector<int64_t> limit = shape;
  for (int d = 0; d < 4; ++d) limit[d] -= crop_high[d];
  return Values{f.convert(f.slice(full, crop_low, limit), out[0].elem)};
}

absl::StatusOr<Values> lower_conv2d_weight_grad(FunctionText& f, mlir::Operation* op,
                                                const Values& in, const Values& out) {
  const ConvParams p = read_conv(op);
  Value x = in[0];
  const Value& grad = in[1];
  const std::vector<int64_t>& w_shape = out[0].shape;
  ConvCall c{.dims = "[f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1]",
             .window_strides = p.dilation,
             .rhs_dilation = p.stride,
             .batch_groups = p.groups};
  std::vector<int64_t> limit = x.shape;
  for (int s = 0; s < 2; ++s) {
    const int64_t extent = p.dilation[s] * (w_shape[2 + s] - 1);
    const int64_t hi =
        (grad.shape[2 + s] - 1) * p.stride[s] + 1 + extent - x.shape[2 + s] - p.padding[s];
    c.low[s] = p.padding[s];
    c.high[s] = std::max<int64_t>(hi, 0);
    if (hi < 0) limit[2 + s] += hi;  // input rows past the last window
  }
  x = f.slice(x, std::vector<int64_t>(4, 0), limit);
  return Values{f.convert(convolution(f, x, grad, w_shape, c), out[0].elem)};
}

}  // namespace mstep::stablehlo
