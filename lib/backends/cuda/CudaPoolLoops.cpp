// The loops of CudaPoolLoops.h; each follows its ref kernel
// (RefLinalg.cpp's max_pool2d and avg_pool2d, RefLinalgGrad.cpp's
// gradients), whose comments give the window rules.
#include "lib/backends/cuda/CudaPoolLoops.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpLoops.h"

#include <array>
#include <limits>

#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace loops {

Type accumulator_of(Type element) {
  Builder b(element.getContext());
  return element.isF32() || element.isF64() ? b.getF64Type() : b.getF32Type();
}

Value widen(Nest& nest, Value v, Type element) {
  Type acc = accumulator_of(element);
  return element == acc ? v : nest.b.create<arith::ExtFOp>(acc, v).getResult();
}

Value narrow(Nest& nest, Value v, Type element) {
  if (v.getType() == element) return v;
  if (v.getType().isF64()) return nest.round_to(v, element);
  return nest.b.create<arith::TruncFOp>(element, v);
}

Value both(Nest& nest, Value a, Value b) { return nest.b.create<arith::AndIOp>(a, b); }

Value inside(Nest& nest, Value i, int64_t n) {
  ImplicitLocOpBuilder& b = nest.b;
  return both(nest, b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, i, nest.index(0)),
              b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, i, nest.index(n)));
}

}  // namespace loops

namespace {

using namespace mlir;
using namespace loops;

/// The geometry of a 2-D pool: planes (N * C) of H x W in, OH x OW out,
/// and per spatial dim the kernel, stride, padding and dilation.
struct Pool {
  int64_t planes, height, width, out_h, out_w;
  std::array<int64_t, 2> kernel, stride, pad, dilation;

  Pool(Value input, Value output, ArrayRef<int64_t> k, ArrayRef<int64_t> s, ArrayRef<int64_t> p,
       ArrayRef<int64_t> d) {
    auto in = cast<ShapedType>(input.getType()).getShape();
    auto out = cast<ShapedType>(output.getType()).getShape();
    planes = in[0] * in[1], height = in[2], width = in[3], out_h = out[2], out_w = out[3];
    kernel = {k[0], k[1]}, stride = {s[0], s[1]}, pad = {p[0], p[1]};
    dilation = d.empty() ? std::array<int64_t, 2>{1, 1} : std::array<int64_t, 2>{d[0], d[1]};
  }
};

/// Signed index arithmetic (window starts go negative in the padding).
Value sub(Nest& nest, Value a, Value b) { return nest.b.create<arith::SubIOp>(a, b); }
Value add(Nest& nest, Value a, Value b) { return nest.b.create<arith::AddIOp>(a, b); }
Value smin(Nest& nest, Value a, Value b) { return nest.b.create<arith::MinSIOp>(a, b); }
Value smax(Nest& nest, Value a, Value b) { return nest.b.create<arith::MaxSIOp>(a, b); }
/// A serial loop for j in [lo, hi) (none when lo >= hi) carrying `init`.
SmallVector<Value> range_loop(Nest& nest, Value lo, Value hi, ValueRange init,
                              function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  ImplicitLocOpBuilder& b = nest.b;
  auto loop = b.create<scf::ForOp>(lo, hi, nest.index(1), init,
                                   [&](OpBuilder& nested, Location, Value j, ValueRange acc) {
                                     OpBuilder::InsertionGuard guard(b);
                                     b.setInsertionPointToEnd(nested.getInsertionBlock());
                                     b.create<scf::YieldOp>(body(j, acc));
                                   });
  return SmallVector<Value>(loop.getResults());
}

/// The windows along one spatial dim (`d`: 0 rows, 1 columns) that hold
/// input position `at` at one of their taps: output positions o in
/// [first, end) with o * stride - pad <= at <= o * stride - pad +
/// (kernel - 1) * dilation (a tap there only where the distance is a
/// multiple of the dilation: on_tap).
std::pair<Value, Value> windows_holding(Nest& nest, const Pool& pool, int d, Value at) {
  const int64_t reach = (pool.kernel[d] - 1) * pool.dilation[d];
  const int64_t outs = d == 0 ? pool.out_h : pool.out_w;
  Value padded = add(nest, at, nest.index(pool.pad[d]));
  // first = ceil(max(at + pad - reach, 0) / stride), all non-negative.
  Value low = smax(nest, sub(nest, padded, nest.index(reach)), nest.index(0));
  Value first = nest.div(add(nest, low, nest.index(pool.stride[d] - 1)), pool.stride[d]);
  Value end = smin(nest, add(nest, nest.div(padded, pool.stride[d]), nest.index(1)),
                   nest.index(outs));
  return {first, end};
}

/// Whether window `o` along dim `d` has a tap at input position `at`
/// (inside its reach: the distance from its start is a multiple of the
/// dilation).
Value on_tap(Nest& nest, const Pool& pool, int d, Value at, Value o) {
  if (pool.dilation[d] == 1) return nest.integer(nest.b.getI1Type(), 1);
  Value distance =
      sub(nest, add(nest, at, nest.index(pool.pad[d])), nest.affine(o, pool.stride[d], Value()));
  return nest.b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, nest.rem(distance, pool.dilation[d]),
                                      nest.index(0));
}

/// ref's max scan of window (oh, ow) in plane `base` (Compute<T>: f32 for
/// the 16-bit floats): rows then columns, a tap outside the input
/// skipped, a greater value or a NaN taking the pick. {best, the index of
/// the pick in the plane (the first tap inside the input when nothing
/// beats the start; -1 when no tap is inside)}.
std::pair<Value, Value> window_max(Nest& nest, const Pool& pool, const Flat& x, Value base,
                                   Value oh, Value ow, Type compute) {
  ImplicitLocOpBuilder& b = nest.b;
  const bool is_float = isa<FloatType>(compute);
  Value lowest = is_float ? nest.constant(compute, -std::numeric_limits<double>::infinity())
                          : b.create<arith::ConstantOp>(b.getIntegerAttr(
                                compute, APInt::getSignedMinValue(compute.getIntOrFloatBitWidth())))
                                .getResult();
  Value h0 = sub(nest, nest.affine(oh, pool.stride[0], Value()), nest.index(pool.pad[0]));
  Value w0 = sub(nest, nest.affine(ow, pool.stride[1], Value()), nest.index(pool.pad[1]));
  SmallVector<Value> pick = nest.loop(
      pool.kernel[0], {lowest, nest.index(-1)}, [&](Value kh, ValueRange row) -> SmallVector<Value> {
        Value ih = nest.affine(kh, pool.dilation[0], h0);
        Value in_h = inside(nest, ih, pool.height);
        return nest.loop(
            pool.kernel[1], row, [&](Value kw, ValueRange acc) -> SmallVector<Value> {
              Value iw = nest.affine(kw, pool.dilation[1], w0);
              Value in = both(nest, in_h, inside(nest, iw, pool.width));
              Value at = b.create<arith::SelectOp>(in, nest.affine(ih, pool.width, iw),
                                                   nest.index(0));
              Value v = nest.load(x, add(nest, base, at));
              if (v.getType() != compute) v = b.create<arith::ExtFOp>(compute, v);
              Value better =
                  is_float ? b.create<arith::OrIOp>(
                                 b.create<arith::CmpFOp>(arith::CmpFPredicate::OGT, v, acc[0]),
                                 b.create<arith::CmpFOp>(arith::CmpFPredicate::UNO, v, v))
                                 .getResult()
                           : b.create<arith::CmpIOp>(arith::CmpIPredicate::sgt, v, acc[0]).getResult();
              Value first = b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, acc[1], nest.index(0));
              Value take = both(nest, in, better);
              Value index = b.create<arith::SelectOp>(
                  both(nest, in, b.create<arith::OrIOp>(better, first)), at, acc[1]);
              return {b.create<arith::SelectOp>(take, v, acc[0]), index};
            });
      });
  return {pick[0], pick[1]};
}

/// The type max_pool2d compares in (ref's Compute<T>): f32 for the 16-bit
/// floats, else the element type.
Type compute_of(Type element) {
  return element.isBF16() || element.isF16() ? Float32Type::get(element.getContext()) : element;
}

/// RefLinalg.cpp's max_pool2d: one lane per output element.
void max_pool_loops(dialect::MaxPool2dOp op, Nest& nest) {
  const Pool pool(op.getInput(), op.getResult(), op.getKernel(), op.getStride(), op.getPadding(),
                  op.getDilation());
  Flat x = nest.flat(0), y = nest.flat(1);
  const Type compute = compute_of(y.element());
  nest.parallel(pool.planes * pool.out_h * pool.out_w, [&](Value i) {
    Value ow = nest.rem(i, pool.out_w), oh = nest.rem(nest.div(i, pool.out_w), pool.out_h);
    Value base = nest.affine(nest.div(i, pool.out_h * pool.out_w), pool.height * pool.width, Value());
    Value best = window_max(nest, pool, x, base, oh, ow, compute).first;
    if (best.getType() != y.element()) best = nest.b.create<arith::TruncFOp>(y.element(), best);
    nest.store(best, y, i);
  });
}

/// Window (oh, ow)'s extent of an avg pool along one dim: {start clipped
/// to the input, end clipped to the input, the size of the window clipped
/// to the padded input} (RefLinalg.cpp's avg_pool2d).
std::array<Value, 3> avg_extent(Nest& nest, const Pool& pool, int d, Value o) {
  const int64_t size = d == 0 ? pool.height : pool.width;
  Value start = sub(nest, nest.affine(o, pool.stride[d], Value()), nest.index(pool.pad[d]));
  Value end = smin(nest, add(nest, start, nest.index(pool.kernel[d])),
                   nest.index(size + pool.pad[d]));
  return {smax(nest, start, nest.index(0)), smin(nest, end, nest.index(size)),
          sub(nest, end, start)};
}

/// The divisor of window (oh, ow) as an accumulator: the window clipped to
/// the padded input with count_include_pad, else its taps inside the input.
Value avg_divisor(Nest& nest, const std::array<Value, 3>& h, const std::array<Value, 3>& w,
                  bool include_pad, Type acc) {
  ImplicitLocOpBuilder& b = nest.b;
  Value count = include_pad ? b.create<arith::MulIOp>(h[2], w[2]).getResult()
                            : b.create<arith::MulIOp>(sub(nest, h[1], h[0]), sub(nest, w[1], w[0]))
                                  .getResult();
  return b.create<arith::SIToFPOp>(acc, b.create<arith::IndexCastOp>(b.getI64Type(), count));
}

/// RefLinalg.cpp's avg_pool2d: one lane per output element, the clipped
/// window summed rows then columns in the accumulator, then divided.
void avg_pool_loops(dialect::AvgPool2dOp op, Nest& nest) {
  const Pool pool(op.getInput(), op.getResult(), op.getKernel(), op.getStride(), op.getPadding(), {});
  Flat x = nest.flat(0), y = nest.flat(1);
  const Type element = y.element(), acc = accumulator_of(element);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(pool.planes * pool.out_h * pool.out_w, [&](Value i) {
    Value ow = nest.rem(i, pool.out_w), oh = nest.rem(nest.div(i, pool.out_w), pool.out_h);
    Value base = nest.affine(nest.div(i, pool.out_h * pool.out_w), pool.height * pool.width, Value());
    const std::array<Value, 3> h = avg_extent(nest, pool, 0, oh), w = avg_extent(nest, pool, 1, ow);
    SmallVector<Value> sum = range_loop(
        nest, h[0], h[1], {nest.constant(acc, 0.0)}, [&](Value ih, ValueRange row) {
          return range_loop(nest, w[0], w[1], row, [&](Value iw, ValueRange s) -> SmallVector<Value> {
            Value v = nest.load(x, add(nest, base, nest.affine(ih, pool.width, iw)));
            return {b.create<arith::AddFOp>(s[0], widen(nest, v, element))};
          });
        });
    Value mean = b.create<arith::DivFOp>(sum[0], avg_divisor(nest, h, w, op.getCountIncludePad(), acc));
    nest.store(narrow(nest, mean, element), y, i);
  });
}

/// RefLinalgGrad.cpp's max_pool2d gradient without atomics: one lane per
/// input element, walking the windows that hold it in ref's order (rows,
/// then columns) and adding each one's gradient where the window's pick
/// (window_max, ref's tie rule) is this element.
void max_pool_grad_loops(dialect::MaxPool2dGradOp op, Nest& nest) {
  const Pool pool(op.getInput(), op.getGradOutput(), op.getKernel(), op.getStride(),
                  op.getPadding(), op.getDilation());
  Flat g = nest.flat(0), x = nest.flat(1), y = nest.flat(2);
  const Type element = y.element(), acc = accumulator_of(element), compute = compute_of(element);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(pool.planes * pool.height * pool.width, [&](Value e) {
    Value iw = nest.rem(e, pool.width), ih = nest.rem(nest.div(e, pool.width), pool.height);
    Value plane = nest.div(e, pool.height * pool.width);
    Value base = nest.affine(plane, pool.height * pool.width, Value());
    Value grad_base = nest.affine(plane, pool.out_h * pool.out_w, Value());
    Value mine = nest.affine(ih, pool.width, iw);
    auto [h_first, h_end] = windows_holding(nest, pool, 0, ih);
    auto [w_first, w_end] = windows_holding(nest, pool, 1, iw);
    SmallVector<Value> sum = range_loop(
        nest, h_first, h_end, {nest.constant(acc, 0.0)}, [&](Value oh, ValueRange row) {
          Value tap_h = on_tap(nest, pool, 0, ih, oh);
          return range_loop(nest, w_first, w_end, row, [&](Value ow, ValueRange s) -> SmallVector<Value> {
            Value pick = window_max(nest, pool, x, base, oh, ow, compute).second;
            Value picked = both(nest, both(nest, tap_h, on_tap(nest, pool, 1, iw, ow)),
                                b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, pick, mine));
            Value gv = nest.load(g, add(nest, grad_base, nest.affine(oh, pool.out_w, ow)));
            Value added = b.create<arith::AddFOp>(s[0], widen(nest, gv, element));
            return {b.create<arith::SelectOp>(picked, added, s[0])};
          });
        });
    nest.store(narrow(nest, sum[0], element), y, e);
  });
}

/// RefLinalgGrad.cpp's avg_pool2d gradient without atomics: one lane per
/// input element, adding each holding window's gradient / divisor in
/// ref's window order.
void avg_pool_grad_loops(dialect::AvgPool2dGradOp op, Nest& nest) {
  const Pool pool(op.getResult(), op.getGradOutput(), op.getKernel(), op.getStride(),
                  op.getPadding(), {});
  Flat g = nest.flat(0), y = nest.flat(1);
  const Type element = y.element(), acc = accumulator_of(element);
  ImplicitLocOpBuilder& b = nest.b;
  nest.parallel(pool.planes * pool.height * pool.width, [&](Value e) {
    Value iw = nest.rem(e, pool.width), ih = nest.rem(nest.div(e, pool.width), pool.height);
    Value grad_base = nest.affine(nest.div(e, pool.height * pool.width), pool.out_h * pool.out_w, Value());
    auto [h_first, h_end] = windows_holding(nest, pool, 0, ih);
    auto [w_first, w_end] = windows_holding(nest, pool, 1, iw);
    SmallVector<Value> sum = range_loop(
        nest, h_first, h_end, {nest.constant(acc, 0.0)}, [&](Value oh, ValueRange row) {
          const std::array<Value, 3> h = avg_extent(nest, pool, 0, oh);
          return range_loop(nest, w_first, w_end, row, [&](Value ow, ValueRange s) -> SmallVector<Value> {
            const std::array<Value, 3> w = avg_extent(nest, pool, 1, ow);
            Value gv = nest.load(g, add(nest, grad_base, nest.affine(oh, pool.out_w, ow)));
            Value share = b.create<arith::DivFOp>(
                widen(nest, gv, element), avg_divisor(nest, h, w, op.getCountIncludePad(), acc));
            return {b.create<arith::AddFOp>(s[0], share)};
          });
        });
    nest.store(narrow(nest, sum[0], element), y, e);
  });
}

}  // namespace

bool builds_pool_loops(Operation* op) {
  return isa<dialect::MaxPool2dOp, dialect::AvgPool2dOp, dialect::MaxPool2dGradOp,
             dialect::AvgPool2dGradOp>(op);
}

absl::Status build_pool_loops(Operation* op, Nest& nest) {
  if (auto max = dyn_cast<dialect::MaxPool2dOp>(op)) {
    Type element = cast<ShapedType>(max.getInput().getType()).getElementType();
    if (element.isInteger(1))
      return not_lowered_for_cuda(op, "a max_pool2d of bool (ref refuses it too)");
    max_pool_loops(max, nest);
  } else if (auto avg = dyn_cast<dialect::AvgPool2dOp>(op)) {
    avg_pool_loops(avg, nest);
  } else if (auto max_grad = dyn_cast<dialect::MaxPool2dGradOp>(op)) {
    max_pool_grad_loops(max_grad, nest);
  } else if (auto avg_grad = dyn_cast<dialect::AvgPool2dGradOp>(op)) {
    avg_pool_grad_loops(avg_grad, nest);
  }
  return absl::OkStatus();
}

}  // namespace mstep::cuda
