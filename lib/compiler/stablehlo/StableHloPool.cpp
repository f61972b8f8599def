// max_pool2d and avg_pool2d (NCHW) and their gradients. The forwards are
// stablehlo.reduce_window (max from -inf / the lowest integer, sum from 0)
// over the input padded by `padding` before and, after, by enough for
// ceil mode's last window; padded taps never win a max and add 0 to a sum.
// avg_pool's divisor is the same reduce_window over ones: over the input
// (count_include_pad = false) or over the input with its padding, which
// clips a ceil-mode window at the padding's end (true), as the ref kernel.
//
// The gradients walk the kernel's taps: tap (kh, kw) reads a strided slice
// of the padded input, [N, C, OH, OW], and sends its share back with the
// transposed slice (a pad with interior padding s - 1); the shares are
// summed and the padding cropped. max_pool2d_grad picks each window's
// winner the ref kernel's way (RefLinalgGrad.cpp), scanning the taps in
// row-major order inside the input: the FIRST maximum wins ties, and a
// NaN wins (the last NaN of the window, where there are several), so the
// gradient lands on the element ref (and PyTorch's CPU kernel) picks;
// select_and_scatter's select region could say the same, but this form is
// plain slices, selects and pads that every consumer lowers alike.
// Sums (avg_pool, the gradients' shares) of bf16 and f16 run in f32 and
// round once, as the ref kernels.
#include <algorithm>
#include <array>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/compiler/stablehlo/StableHloOpFamilies.h"

namespace mstep::stablehlo {

namespace {

struct Window {
  std::vector<int64_t> kernel, stride, padding, dilation{1, 1};
  // Padding after the input along H and W: `padding`, or more where ceil
  // mode's last window reaches further.
  std::array<int64_t, 2> high{};
  std::array<int64_t, 2> out{};  // OH, OW
};

Window read_window(mlir::Operation* op, const std::vector<int64_t>& in_shape,
                   const std::vector<int64_t>& out_shape) {
  Window w{array_attr(op, "kernel"), array_attr(op, "stride"), array_attr(op, "padding")};
  if (op->hasAttr("dilation")) w.dilation = array_attr(op, "dilation");
  for (int s = 0; s < 2; ++s) {
    w.out[s] = out_shape[2 + s];
    const int64_t reach = (w.out[s] - 1) * w.stride[s] + w.dilation[s] * (w.kernel[s] - 1) + 1;
    w.high[s] = std::max(w.padding[s], reach - in_shape[2 + s] - w.padding[s]);
  }
  return w;
}

std::vector<int64_t> spatial(int64_t a, int64_t b) { return {1, 1, a, b}; }

Value reduce_window(FunctionText& f, const Value& x, const Window& w, Reducer reducer,
                    std::vector<int64_t> out_shape, int64_t low_h, int64_t low_w, int64_t high_h,
                    int64_t high_w) {
  const Value init = f.reduce_init(reducer, x.elem);
  Value r{"", std::move(out_shape), x.elem};
  return f.op_results("stablehlo.reduce_window", {x, init}, {r},
                      absl::StrCat("padding = ", padding_attr({0, 0, low_h, low_w}, {0, 0, high_h, high_w}),
                                   ", window_dilations = ", i64_array(spatial(w.dilation[0], w.dilation[1])),
                                   ", window_dimensions = ", i64_array(spatial(w.kernel[0], w.kernel[1])),
                                   ", window_strides = ", i64_array(spatial(w.stride[0], w.stride[1]))),
                      FunctionText::region(reducer, x.elem))[0];
}

/// What tap (kh, kw) reads of `padded` (the input with `w`'s padding):
/// [N, C, OH, OW].
Value tap(FunctionText& f, const Value& padded, const Window& w, int64_t kh, int64_t kw) {
  const std::vector<int64_t> start{0, 0, kh * w.dilation[0], kw * w.dilation[1]};
  const std::vector<int64_t> limit{padded.shape[0], padded.shape[1],
                                   start[2] + (w.out[0] - 1) * w.stride[0] + 1,
                                   start[3] + (w.out[1] - 1) * w.stride[1] + 1};
  return f.slice(padded, start, limit, spatial(w.stride[0], w.stride[1]));
}

/// The transpose of `tap`: `share` [N, C, OH, OW] placed where tap (kh,
/// kw) read it in a zero tensor of `padded_shape`.
Value untap(FunctionText& f, const Value& share, const Window& w, int64_t kh, int64_t kw,
            const std::vector<int64_t>& padded_shape) {
  const std::vector<int64_t> low{0, 0, kh * w.dilation[0], kw * w.dilation[1]};
  std::vector<int64_t> high{0, 0, 0, 0};
  for (int s = 0; s < 2; ++s)
    high[2 + s] = padded_shape[2 + s] - low[2 + s] - ((w.out[s] - 1) * w.stride[s] + 1);
  return f.pad(share, f.constant(0, share.elem), low, high,
               {0, 0, w.stride[0] - 1, w.stride[1] - 1});
}

/// The padded input's shape and the crop back to the input.
std::vector<int64_t> padded_shape(const std::vector<int64_t>& in_shape, const Window& w) {
  return {in_shape[0], in_shape[1], in_shape[2] + w.padding[0] + w.high[0],
          in_shape[3] + w.padding[1] + w.high[1]};
}

Value crop(FunctionText& f, const Value& padded, const Window& w,
           const std::vector<int64_t>& in_shape) {
  return f.slice(padded, {0, 0, w.padding[0], w.padding[1]},
                 {in_shape[0], in_shape[1], w.padding[0] + in_shape[2], w.padding[1] + in_shape[3]});
}

/// avg_pool's divisor per window, [1, 1, OH, OW]: reduce_window over ones
/// covering the input (count_include_pad = false) or the input and its
/// padding (true), so that ceil mode's overhang counts in neither.
Value divisor(FunctionText& f, mlir::Operation* op, const Window& w,
              const std::vector<int64_t>& x_shape, const std::string& elem) {
  const std::vector<int64_t> count_shape = spatial(w.out[0], w.out[1]);
  if (op->getAttrOfType<mlir::BoolAttr>("count_include_pad").getValue()) {
    const Value ones = f.splat(1, spatial(x_shape[2] + 2 * w.padding[0], x_shape[3] + 2 * w.padding[1]), elem);
    return reduce_window(f, ones, w, Reducer::add, count_shape, 0, 0, w.high[0] - w.padding[0],
                         w.high[1] - w.padding[1]);
  }
  const Value ones = f.splat(1, spatial(x_shape[2], x_shape[3]), elem);
  return reduce_window(f, ones, w, Reducer::add, count_shape, w.padding[0], w.padding[1],
                       w.high[0], w.high[1]);
}

}  // namespace

absl::StatusOr<Values> lower_max_pool2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                        const Values& out) {
  const Window w = read_window(op, in[0].shape, out[0].shape);
  return Values{reduce_window(f, in[0], w, Reducer::max, out[0].shape, w.padding[0], w.padding[1],
                              w.high[0], w.high[1])};
}

absl::StatusOr<Values> lower_avg_pool2d(FunctionText& f, mlir::Operation* op, const Values& in,
                                        const Values& out) {
  const Value x = f.convert(in[0], accumulator_type(in[0].elem));
  const Window w = read_window(op, x.shape, out[0].shape);
  const Value sum = reduce_window(f, x, w, Reducer::add, out[0].shape, w.padding[0], w.padding[1],
                                 w.high[0], w.high[1]);
  const Value count = divisor(f, op, w, x.shape, x.elem);
  return Values{f.convert(f.same("stablehlo.divide", {sum, f.broadcast(count, out[0].shape)}), out[0].elem)};
}

absl::StatusOr<Values> lower_max_pool2d_grad(FunctionText& f, mlir::Operation* op,
                                             const Values& in, const Values& out) {
  const Value grad = f.convert(in[0], accumulator_type(in[0].elem));
  const Value& x = in[1];
  const Window w = read_window(op, x.shape, grad.shape);
  const std::vector<int64_t> low{0, 0, w.padding[0], w.padding[1]};
  const std::vector<int64_t> high{0, 0, w.high[0], w.high[1]};
  const double inf = std::numeric_limits<double>::infinity();
  const Value padded = f.pad(x, f.constant(-inf, x.elem), low, high, {0, 0, 0, 0});
  // Which padded positions are inside the input ([1, 1, Hp, Wp]).
  const Value inside = f.pad(f.splat(1, spatial(x.shape[2], x.shape[3]), "i1"),
                             f.constant(0, "i1"), low, high, {0, 0, 0, 0});
  const std::vector<int64_t>& g_shape = grad.shape;
  // The scan: `best` and its tap number `winner` so far, `found` once a
  // tap inside the input was seen.
  Value best = f.splat(-inf, g_shape, x.elem), winner = f.splat(0, g_shape, "i32"),
        found = f.splat(0, g_shape, "i1");
  for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      const Value v = tap(f, padded, w, kh, kw);
      const Value valid = f.broadcast(tap(f, inside, w, kh, kw), g_shape);
      const Value better = f.same("stablehlo.or", {f.compare(v, best, "GT"), f.compare(v, v, "NE")});
      const Value take =
          f.same("stablehlo.and", {valid, f.same("stablehlo.or", {f.same("stablehlo.not", {found}), better})});
      best = f.select(take, v, best);
      winner = f.select(take, f.splat(static_cast<double>(kh * w.kernel[1] + kw), g_shape, "i32"), winner);
      found = f.same("stablehlo.or", {found, valid});
    }
  const std::vector<int64_t> p_shape = padded_shape(x.shape, w);
  Value acc;
  for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      const Value mine = f.compare(winner, f.splat(static_cast<double>(kh * w.kernel[1] + kw), g_shape, "i32"), "EQ");
      const Value share = untap(f, f.select(mine, grad, f.splat(0, g_shape, grad.elem)), w, kh, kw, p_shape);
      acc = acc.name.empty() ? share : f.same("stablehlo.add", {acc, share});
    }
  return Values{f.convert(crop(f, acc, w, out[0].shape), out[0].elem)};
}

absl::StatusOr<Values> lower_avg_pool2d_grad(FunctionText& f, mlir::Operation* op,
                                             const Values& in, const Values& out) {
  const Value grad = f.convert(in[0], accumulator_type(in[0].elem));
  const std::vector<int64_t>& x_shape = out[0].shape;
  const Window w = read_window(op, x_shape, grad.shape);
  const Value count = divisor(f, op, w, x_shape, grad.elem);
  const Value share = f.same("stablehlo.divide", {grad, f.broadcast(count, grad.shape)});
  const std::vector<int64_t> p_shape = padded_shape(x_shape, w);
  Value acc;
  for (int64_t kh = 0; kh < w.kernel[0]; ++kh)
    for (int64_t kw = 0; kw < w.kernel[1]; ++kw) {
      const Value part = untap(f, share, w, kh, kw, p_shape);
      acc = acc.name.empty() ? part : f.same("stablehlo.add", {acc, part});
    }
  return Values{f.convert(crop(f, acc, w, x_shape), out[0].elem)};
}

}  // namespace mstep::stablehlo
