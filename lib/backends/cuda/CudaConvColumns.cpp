// The loops of CudaConvColumns.h.
#include "lib/backends/cuda/CudaConvColumns.h"

namespace mstep::cuda::conv {

namespace {

using loops::Flat;

/// The linear index of column element (n, g, r, p) in `layout`.
Value column_at(Nest& nest, const Conv& conv, ColumnLayout layout, Value n, Value g, Value r,
                Value p) {
  const int64_t rows = conv.column_rows(), positions = conv.positions();
  if (layout == ColumnLayout::by_batch)
    return nest.affine(nest.affine(nest.affine(n, conv.groups, g), rows, r), positions, p);
  return nest.affine(nest.affine(nest.affine(g, rows, r), conv.batch, n), positions, p);
}

/// `v` (an `element`, or already in its accumulator: f16's f32 matmul
/// results) in ref's accumulator for `element`.
Value in_accumulator(Nest& nest, Value v, Type element) {
  return v.getType() == loops::accumulator_of(element) ? v : loops::widen(nest, v, element);
}

/// x + y in ref's accumulator for `element`, rounded to `element`.
Value add_in_accumulator(Nest& nest, Value x, Value y, Type element) {
  Value sum = nest.b.create<arith::AddFOp>(in_accumulator(nest, x, element),
                                           in_accumulator(nest, y, element));
  return loops::narrow(nest, sum, element);
}

}  // namespace

void build_im2col(const Conv& conv, ColumnLayout layout, func::FuncOp func) {
  Nest nest(func);
  Flat x = nest.flat(0), columns = nest.flat(1);
  const Type element = columns.element();
  const int64_t rows = conv.column_rows(), positions = conv.positions();
  const int64_t taps = conv.kernel_h * conv.kernel_w;
  nest.parallel(column_elements(conv), [&](Value i) {
    Value p = nest.rem(i, positions), n, g, r;
    if (layout == ColumnLayout::by_batch) {
      r = nest.rem(nest.div(i, positions), rows);
      g = nest.rem(nest.div(i, positions * rows), conv.groups);
      n = nest.div(i, positions * rows * conv.groups);
    } else {
      n = nest.rem(nest.div(i, positions), conv.batch);
      r = nest.rem(nest.div(i, positions * conv.batch), rows);
      g = nest.div(i, positions * conv.batch * rows);
    }
    Value gc = nest.div(r, taps), t = nest.rem(r, taps);
    Value kh = nest.div(t, conv.kernel_w), kw = nest.rem(t, conv.kernel_w);
    Value oh = nest.div(p, conv.out_w), ow = nest.rem(p, conv.out_w);
    Value ih = tap(nest, conv, 0, oh, kh), iw = tap(nest, conv, 1, ow, kw);
    Value in = loops::both(nest, loops::inside(nest, ih, conv.height),
                           loops::inside(nest, iw, conv.width));
    Value c = nest.affine(g, conv.group_channels, gc);
    Value plane = nest.affine(nest.affine(n, conv.channels, c), conv.height * conv.width, Value());
    Value v = nest.load(x, add(nest, plane, safe(nest, in, nest.affine(ih, conv.width, iw))));
    nest.store(nest.b.create<arith::SelectOp>(in, v, nest.constant(element, 0.0)), columns, i);
  });
  nest.b.create<func::ReturnOp>();
}

void build_col2im(const Conv& conv, ColumnLayout layout, func::FuncOp func) {
  Nest nest(func);
  Flat columns = nest.flat(0), dx = nest.flat(1);
  const Type element = dx.element(), acc = loops::accumulator_of(element);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(conv.batch * conv.channels * conv.height * conv.width, [&](Value i) {
    Value iw = nest.rem(i, conv.width), ih = nest.rem(nest.div(i, conv.width), conv.height);
    Value c = nest.rem(nest.div(i, conv.height * conv.width), conv.channels);
    Value n = nest.div(i, conv.channels * conv.height * conv.width);
    Value g = nest.div(c, conv.group_channels), gc = nest.rem(c, conv.group_channels);
    Value first_row = nest.affine(gc, conv.kernel_h * conv.kernel_w, Value());
    SmallVector<Value> sum = nest.loop(
        conv.kernel_h, {nest.constant(acc, 0.0)}, [&](Value kh, ValueRange s0) -> SmallVector<Value> {
          auto [oh, has_h] = output_at(nest, conv, 0, ih, kh);
          return nest.loop(conv.kernel_w, s0, [&](Value kw, ValueRange s1) -> SmallVector<Value> {
            auto [ow, has_w] = output_at(nest, conv, 1, iw, kw);
            Value has = loops::both(nest, has_h, has_w);
            Value r = nest.affine(kh, conv.kernel_w, add(nest, first_row, kw));
            Value p = safe(nest, has, nest.affine(oh, conv.out_w, ow));
            Value v = in_accumulator(
                nest, nest.load(columns, column_at(nest, conv, layout, n, g, r, p)), element);
            Value next = b.create<arith::AddFOp>(s1[0], v);
            return {b.create<arith::SelectOp>(has, next, s1[0])};
          });
        });
    nest.store(loops::narrow(nest, sum[0], element), dx, i);
  });
  b.create<func::ReturnOp>();
}

void build_swap_outer_dims(int64_t outer, int64_t inner, int64_t positions, bool bias,
                           func::FuncOp func) {
  Nest nest(func);
  Flat x = nest.flat(0), y = nest.flat(bias ? 2 : 1);
  std::optional<Flat> b;
  if (bias) b = nest.flat(1);
  const Type element = y.element();
  nest.parallel(outer * inner * positions, [&](Value i) {
    Value p = nest.rem(i, positions), in = nest.rem(nest.div(i, positions), inner);
    Value out = nest.div(i, positions * inner);
    Value v = nest.load(x, nest.affine(nest.affine(in, outer, out), positions, p));
    v = b ? add_in_accumulator(nest, v, nest.load(*b, in), element) : loops::narrow(nest, v, element);
    nest.store(v, y, i);
  });
  nest.b.create<func::ReturnOp>();
}

void build_add_bias(int64_t channels, int64_t positions, func::FuncOp func) {
  Nest nest(func);
  const unsigned bias_arg = func.getNumArguments() == 2 ? 0 : 1;
  Flat bias = nest.flat(bias_arg), y = nest.flat(bias_arg + 1);
  const Flat product = bias_arg == 0 ? y : nest.flat(0);
  const Type element = y.element();
  nest.parallel(loops::numel(nest.param(bias_arg + 1)), [&](Value i) {
    Value o = nest.rem(nest.div(i, positions), channels);
    nest.store(add_in_accumulator(nest, nest.load(product, i), nest.load(bias, o), element), y, i);
  });
  nest.b.create<func::ReturnOp>();
}

}  // namespace mstep::cuda::conv
