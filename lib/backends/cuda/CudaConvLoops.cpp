// The loops of CudaConvLoops.h; each follows its ref kernel
// (RefLinalg.cpp's conv2d, RefLinalgGrad.cpp's gradients).
#include "lib/backends/cuda/CudaConvLoops.h"
#include "lib/backends/cuda/CudaConvGeometry.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;
using conv::add;
using conv::Conv;
using conv::output_at;
using conv::safe;
using conv::tap;

/// acc + x * y where `take` holds, else acc (a tap in the padding adds
/// nothing). For f32 and 16-bit elements the product of two widened
/// elements is exact, so even a contracted multiply-add rounds as ref.
Value add_product(Nest& nest, Value take, Value acc, Value x, Value y) {
  ImplicitLocOpBuilder& b = nest.b;
  Value sum = b.create<arith::AddFOp>(acc, b.create<arith::MulFOp>(x, y));
  return b.create<arith::SelectOp>(take, sum, acc);
}

/// RefLinalg.cpp's conv2d: one lane per output element (n, o, oh, ow),
/// starting at the bias and adding over the group's input channels, then
/// the kernel rows and columns.
void conv_loops(dialect::Conv2dOp op, Nest& nest) {
  const Conv conv(op.getInput(), op.getWeight(), op.getResult(), op.getStride(), op.getPadding(),
                  op.getDilation(), static_cast<int64_t>(op.getGroups()));
  const bool has_bias = static_cast<bool>(op.getBias());
  Flat x = nest.flat(0), w = nest.flat(1), y = nest.flat(has_bias ? 3 : 2);
  std::optional<Flat> bias;
  if (has_bias) bias = nest.flat(2);
  const Type element = y.element(), acc = accumulator_of(element);
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value ow = nest.rem(i, conv.out_w), oh = nest.rem(nest.div(i, conv.out_w), conv.out_h);
    Value o = nest.rem(nest.div(i, conv.out_h * conv.out_w), conv.out_channels);
    Value n = nest.div(i, conv.out_channels * conv.out_h * conv.out_w);
    Value group = nest.div(o, conv.outs_per_group());
    Value start = bias ? widen(nest, nest.load(*bias, o), element) : nest.constant(acc, 0.0);
    SmallVector<Value> sum = nest.loop(
        conv.group_channels, {start}, [&](Value gc, ValueRange s0) -> SmallVector<Value> {
          Value c = nest.affine(group, conv.group_channels, gc);
          Value plane = nest.affine(nest.affine(n, conv.channels, c), conv.height * conv.width, Value());
          Value kernel = nest.affine(nest.affine(o, conv.group_channels, gc),
                                     conv.kernel_h * conv.kernel_w, Value());
          return nest.loop(conv.kernel_h, s0, [&](Value kh, ValueRange s1) -> SmallVector<Value> {
            Value ih = tap(nest, conv, 0, oh, kh);
            Value in_h = inside(nest, ih, conv.height);
            return nest.loop(conv.kernel_w, s1, [&](Value kw, ValueRange s2) -> SmallVector<Value> {
              Value iw = tap(nest, conv, 1, ow, kw);
              Value in = both(nest, in_h, inside(nest, iw, conv.width));
              Value wv = widen(nest, nest.load(w, nest.affine(kh, conv.kernel_w, add(nest, kernel, kw))),
                               element);
              Value xv = widen(
                  nest, nest.load(x, add(nest, plane, safe(nest, in, nest.affine(ih, conv.width, iw)))),
                  element);
              return {add_product(nest, in, s2[0], wv, xv)};
            });
          });
        });
    nest.store(narrow(nest, sum[0], element), y, i);
  });
}

/// RefLinalgGrad.cpp's input gradient, gathered: one lane per input
/// element (n, c, ih, iw) adding grad_out[n, o, oh, ow] * w[o, c', kh, kw]
/// over the output channels o of c's group, then the kernel rows and
/// columns, the output position (oh, ow) the one whose tap (kh, kw) is
/// (ih, iw): ref's scatter reaches this element in that order.
void conv_input_grad_loops(dialect::Conv2dInputGradOp op, Nest& nest) {
  const Conv conv(op.getResult(), op.getWeight(), op.getGradOutput(), op.getStride(),
                  op.getPadding(), op.getDilation(), static_cast<int64_t>(op.getGroups()));
  Flat g = nest.flat(0), w = nest.flat(1), y = nest.flat(2);
  const Type element = y.element(), acc = accumulator_of(element);
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value iw = nest.rem(i, conv.width), ih = nest.rem(nest.div(i, conv.width), conv.height);
    Value c = nest.rem(nest.div(i, conv.height * conv.width), conv.channels);
    Value n = nest.div(i, conv.channels * conv.height * conv.width);
    Value group = nest.div(c, conv.group_channels), gc = nest.rem(c, conv.group_channels);
    SmallVector<Value> sum = nest.loop(
        conv.outs_per_group(), {nest.constant(acc, 0.0)},
        [&](Value k, ValueRange s0) -> SmallVector<Value> {
          Value o = nest.affine(group, conv.outs_per_group(), k);
          Value plane = nest.affine(nest.affine(n, conv.out_channels, o), conv.out_h * conv.out_w,
                                    Value());
          Value kernel = nest.affine(nest.affine(o, conv.group_channels, gc),
                                     conv.kernel_h * conv.kernel_w, Value());
          return nest.loop(conv.kernel_h, s0, [&](Value kh, ValueRange s1) -> SmallVector<Value> {
            auto [oh, has_h] = output_at(nest, conv, 0, ih, kh);
            return nest.loop(conv.kernel_w, s1, [&](Value kw, ValueRange s2) -> SmallVector<Value> {
              auto [ow, has_w] = output_at(nest, conv, 1, iw, kw);
              Value has = both(nest, has_h, has_w);
              Value wv = widen(nest, nest.load(w, nest.affine(kh, conv.kernel_w, add(nest, kernel, kw))),
                               element);
              Value gv = widen(
                  nest, nest.load(g, add(nest, plane, safe(nest, has, nest.affine(oh, conv.out_w, ow)))),
                  element);
              return {add_product(nest, has, s2[0], wv, gv)};
            });
          });
        });
    nest.store(narrow(nest, sum[0], element), y, i);
  });
}

/// RefLinalgGrad.cpp's weight gradient: one lane per weight element (o,
/// c', kh, kw), a sum per batch element over the output rows and columns
/// (taps in the padding skipped), the sums added in batch order.
void conv_weight_grad_loops(dialect::Conv2dWeightGradOp op, Nest& nest) {
  const Conv conv(op.getInput(), op.getResult(), op.getGradOutput(), op.getStride(),
                  op.getPadding(), op.getDilation(), static_cast<int64_t>(op.getGroups()));
  Flat x = nest.flat(0), g = nest.flat(1), y = nest.flat(2);
  const Type element = y.element(), acc = accumulator_of(element);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(numel(op.getResult()), [&](Value i) {
    Value kw = nest.rem(i, conv.kernel_w), kh = nest.rem(nest.div(i, conv.kernel_w), conv.kernel_h);
    Value gc = nest.rem(nest.div(i, conv.kernel_h * conv.kernel_w), conv.group_channels);
    Value o = nest.div(i, conv.group_channels * conv.kernel_h * conv.kernel_w);
    Value c = nest.affine(nest.div(o, conv.outs_per_group()), conv.group_channels, gc);
    SmallVector<Value> total = nest.loop(
        conv.batch, {nest.constant(acc, 0.0)}, [&](Value n, ValueRange t) -> SmallVector<Value> {
          Value in_plane = nest.affine(nest.affine(n, conv.channels, c), conv.height * conv.width, Value());
          Value out_plane = nest.affine(nest.affine(n, conv.out_channels, o), conv.out_h * conv.out_w,
                                        Value());
          SmallVector<Value> sum = nest.loop(
              conv.out_h, {nest.constant(acc, 0.0)}, [&](Value oh, ValueRange s0) -> SmallVector<Value> {
                Value ih = tap(nest, conv, 0, oh, kh);
                Value in_h = inside(nest, ih, conv.height);
                return nest.loop(conv.out_w, s0, [&](Value ow, ValueRange s1) -> SmallVector<Value> {
                  Value iw = tap(nest, conv, 1, ow, kw);
                  Value in = both(nest, in_h, inside(nest, iw, conv.width));
                  Value xv = widen(
                      nest,
                      nest.load(x, add(nest, in_plane, safe(nest, in, nest.affine(ih, conv.width, iw)))),
                      element);
                  Value gv = widen(nest, nest.load(g, add(nest, out_plane, nest.affine(oh, conv.out_w, ow))),
                                   element);
                  return {add_product(nest, in, s1[0], xv, gv)};
                });
              });
          return {b.create<arith::AddFOp>(t[0], sum[0])};
        });
    nest.store(narrow(nest, total[0], element), y, i);
  });
}

}  // namespace

bool builds_conv_loops(Operation* op) {
  return isa<dialect::Conv2dOp, dialect::Conv2dInputGradOp, dialect::Conv2dWeightGradOp>(op);
}

void build_conv_loops(Operation* op, Nest& nest) {
  if (auto conv = dyn_cast<dialect::Conv2dOp>(op))
    conv_loops(conv, nest);
  else if (auto input_grad = dyn_cast<dialect::Conv2dInputGradOp>(op))
    conv_input_grad_loops(input_grad, nest);
  else if (auto weight_grad = dyn_cast<dialect::Conv2dWeightGradOp>(op))
    conv_weight_grad_loops(weight_grad, nest);
}

}  // namespace mstep::cuda
