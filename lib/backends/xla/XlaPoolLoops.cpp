// f32, bf16 and f16 max_pool2d, avg_pool2d and their gradients (NCHW) as loops
// (XlaOpLoops.h), with the ref kernels' semantics
// (lib/backends/ref/RefLinalg.cpp, RefLinalgGrad.cpp):
// - max: the largest tap inside the input (taps in the padding skipped), a
//   NaN wins; its gradient goes to the tap PyTorch picks (the first strict
//   maximum scanning rows then columns, a NaN replacing the pick, the first
//   tap inside the input when nothing beats -inf), overlapping windows
//   adding up;
// - avg: the window's sum in f64 over PyTorch's divisor (the window clipped
//   to the padded input with count_include_pad, else its taps inside the
//   input); its gradient spreads each window's share (in f64) over the
//   taps inside the input.
// Each is a row function over the planes (n, c): a plane's outputs depend
// only on its own plane, so the split over threads changes no result. The
// gradients add into their plane of the output in f32 (the ref adds in
// f64 and rounds once: the same to f32 rounding of each addition).
// bf16 computes as the ref's bf16 kernels: elements widened to f32, the
// avg window's sum and its share in f32, and a gradient's plane summed in
// f32 (in the step's scratch, XlaLoopScratch.h) and rounded to bf16 once
// at the end of its row.
#include <algorithm>
#include <functional>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

struct Pool {
  DType dtype; // f32 or bf16, of every operand and the result
  int64_t planes, height, width, out_h, out_w;
  IntList kernel, stride, pad, dilation;
  bool include_pad = false;
};

/// The pool's sizes and attributes: the input is the forward's operand
/// or the gradient's result, the output the forward's result or the
/// gradient's operand 0 (the output gradient).
std::optional<Pool> pool_of(const TraceGraph& graph, const GraphNode& n) {
  const bool grad = n.op == OpKind::max_pool2d_grad || n.op == OpKind::avg_pool2d_grad;
  const TensorType& input = grad ? n.results[0] : graph.type_of(n.operands[0]);
  const TensorType& output = grad ? graph.type_of(n.operands[0]) : n.results[0];
  if (!is_loop_float(input.dtype) || output.dtype != input.dtype || input.shape.rank() != 4 ||
      output.shape.rank() != 4 || input.numel() == 0 || output.numel() == 0)
    return std::nullopt;
  for (ValueRef v : n.operands)
    if (graph.type_of(v).dtype != input.dtype) return std::nullopt;
  Pool p;
  p.dtype = input.dtype;
  p.planes = input.shape[0] * input.shape[1];
  p.height = input.shape[2];
  p.width = input.shape[3];
  p.out_h = output.shape[2];
  p.out_w = output.shape[3];
  p.kernel = attr_ints(n.attrs, AttrName::kernel);
  p.stride = attr_ints(n.attrs, AttrName::stride);
  p.pad = attr_ints(n.attrs, AttrName::padding);
  const bool max = n.op == OpKind::max_pool2d || n.op == OpKind::max_pool2d_grad;
  p.dilation = max ? attr_ints(n.attrs, AttrName::dilation) : IntList{1, 1};
  if (!max) p.include_pad = attr_int(n.attrs, AttrName::count_include_pad) != 0;
  if (p.kernel.size() != 2 || p.stride.size() != 2 || p.pad.size() != 2 || p.dilation.size() != 2)
    return std::nullopt;
  return p;
}

/// The taps of window (oh, ow) of a max pool, in the ref's scan order:
/// `tap(in_range, at)` with `at` the tap's offset in its plane (clamped
/// to 0 outside the input).
void for_each_tap(LoopBuilder& lb, const Pool& p, llvm::Value* oh, llvm::Value* ow,
                  const std::function<void(llvm::Value*, llvm::Value*)>& tap) {
  auto& b = lb.b();
  lb.loop(p.kernel[0], [&](llvm::Value* kh) {
    llvm::Value* ih = b.CreateAdd(b.CreateSub(b.CreateMul(oh, lb.i64(p.stride[0])), lb.i64(p.pad[0])),
                     b.CreateMul(kh, lb.i64(p.dilation[0])));
    llvm::Value* row_in =
        b.CreateAnd(b.CreateICmpSGE(ih, lb.i64(0)), b.CreateICmpSLT(ih, lb.i64(p.height)));
    lb.loop(p.kernel[1], [&](llvm::Value* kw) {
      llvm::Value* iw =
          b.CreateAdd(b.CreateSub(b.CreateMul(ow, lb.i64(p.stride[1])), lb.i64(p.pad[1])),
                      b.CreateMul(kw, lb.i64(p.dilation[1])));
      llvm::Value* in_range = b.CreateAnd(
          row_in,
          b.CreateAnd(b.CreateICmpSGE(iw, lb.i64(0)), b.CreateICmpSLT(iw, lb.i64(p.width))));
      llvm::Value* at = b.CreateSelect(
          in_range, b.CreateAdd(b.CreateMul(ih, lb.i64(p.width)), iw), lb.i64(0));
      tap(in_range, at);
    });
  });
}

/// An avg window along one dim: [lo, hi) inside the input and the clipped
/// padded extent (the ref's h0, h1, padded_h).
struct Span {
  llvm::Value *lo, *hi, *padded;
};

Span avg_span(LoopBuilder& lb, llvm::Value* o, int64_t stride, int64_t pad, int64_t kernel,
              int64_t size) {
  auto& b = lb.b();
  auto min = [&](llvm::Value* x, llvm::Value* y) {
    return b.CreateSelect(b.CreateICmpSLT(x, y), x, y);
  };
  llvm::Value* start = b.CreateSub(b.CreateMul(o, lb.i64(stride)), lb.i64(pad));
  llvm::Value* end = min(b.CreateAdd(start, lb.i64(kernel)), lb.i64(size + pad));
  llvm::Value* padded = b.CreateSub(end, start);
  llvm::Value* lo = b.CreateSelect(b.CreateICmpSLT(start, lb.i64(0)), lb.i64(0), start);
  return {lo, min(end, lb.i64(size)), padded};
}

/// The divisor of an avg window.
llvm::Value* avg_count(LoopBuilder& lb, const Pool& p, const Span& h, const Span& w) {
  auto& b = lb.b();
  if (p.include_pad) return b.CreateMul(h.padded, w.padded);
  return b.CreateMul(b.CreateSub(h.hi, h.lo), b.CreateSub(w.hi, w.lo));
}

} // namespace

std::optional<OpLoop> emit_pool_loop(llvm::Module& module, const TraceGraph& graph,
                                     uint32_t node) {
  const GraphNode& n = graph.nodes[node];
  const OpKind op = n.op;
  const size_t operands = op == OpKind::max_pool2d_grad ? 2 : 1;
  if (op != OpKind::max_pool2d && op != OpKind::avg_pool2d && op != OpKind::max_pool2d_grad &&
      op != OpKind::avg_pool2d_grad)
    return std::nullopt;
  if (n.operands.size() != operands || n.results.size() != 1) return std::nullopt;
  const std::optional<Pool> pool = pool_of(graph, n);
  if (!pool) return std::nullopt;
  const Pool& p = *pool;
  const bool half = is_half(p.dtype); // bf16 or f16: the same f32 arithmetic
  const bool grad = op == OpKind::max_pool2d_grad || op == OpKind::avg_pool2d_grad;
  // A bf16 gradient's f32 sums live in the scratch after the operands.
  const bool sums_in_scratch = grad && half;
  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(op), "_", node),
                 operands + (sums_in_scratch ? kRuntimeOperands : 0), 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* y = lb.result(0);
  llvm::Value* sums = sums_in_scratch ? lb.operand(operands) : y; // a gradient's, f32
  auto load = [&](llvm::Value* base, llvm::Value* at) { return load_f32(lb, p.dtype, base, at); };
  const int64_t plane = p.height * p.width, out_plane = p.out_h * p.out_w;
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* pl) {
    llvm::Value* in_base = b.CreateMul(pl, lb.i64(plane));
    llvm::Value* out_base = b.CreateMul(pl, lb.i64(out_plane));
    // A gradient's plane starts at zero and windows add into it.
    if (grad)
      lb.loop(plane, [&](llvm::Value* i) { lb.store(lb.f32(0), sums, b.CreateAdd(in_base, i)); },
              /*parallel=*/true);
    lb.loop(p.out_h, [&](llvm::Value* oh) {
      lb.loop(p.out_w, [&](llvm::Value* ow) {
        llvm::Value* out_at = b.CreateAdd(out_base, b.CreateAdd(b.CreateMul(oh, lb.i64(p.out_w)), ow));
        if (op == OpKind::max_pool2d || op == OpKind::max_pool2d_grad) {
          llvm::Value* x = lb.operand(op == OpKind::max_pool2d ? 0 : 1);
          llvm::AllocaInst* best =
              lb.local(lb.f32(), lb.f32(-std::numeric_limits<float>::infinity()));
          llvm::AllocaInst* pick = lb.local(lb.i64(), lb.i64(-1));
          for_each_tap(lb, p, oh, ow, [&](llvm::Value* in_range, llvm::Value* at) {
            llvm::Value* v = load(x, b.CreateAdd(in_base, at));
            llvm::Value* take = b.CreateAnd(
                in_range, b.CreateOr(b.CreateFCmpOGT(v, lb.get(best)), lb.is_nan(v)));
            llvm::Value* first = b.CreateAnd(in_range, b.CreateICmpSLT(lb.get(pick), lb.i64(0)));
            lb.set(best, b.CreateSelect(take, v, lb.get(best)));
            lb.set(pick, b.CreateSelect(b.CreateOr(take, first), at, lb.get(pick)));
          });
          if (op == OpKind::max_pool2d) {
            store_f32(lb, p.dtype, lb.get(best), y, out_at);
            return;
          }
          // The window's gradient into its pick (every window holds a tap
          // inside the input; one that did not would add nowhere).
          llvm::Value* at = b.CreateAdd(
              in_base, b.CreateSelect(b.CreateICmpSLT(lb.get(pick), lb.i64(0)), lb.i64(0),
                                      lb.get(pick)));
          llvm::Value* g = b.CreateSelect(b.CreateICmpSLT(lb.get(pick), lb.i64(0)), lb.f32(0),
                                          load(lb.operand(0), out_at));
          lb.store(b.CreateFAdd(lb.load(lb.f32(), sums, at), g), sums, at);
          return;
        }
        const Span h = avg_span(lb, oh, p.stride[0], p.pad[0], p.kernel[0], p.height);
        const Span w = avg_span(lb, ow, p.stride[1], p.pad[1], p.kernel[1], p.width);
        llvm::Value* count = avg_count(lb, p, h, w);
        // The ref's accumulator: f64 for f32, f32 for bf16.
        llvm::Type* acc = half ? lb.f32() : lb.f64();
        auto widen = [&](llvm::Value* v) { return half ? v : lb.to_f64(v); };
        llvm::Value* divisor = b.CreateSIToFP(count, acc);
        if (op == OpKind::avg_pool2d) {
          llvm::AllocaInst* sum = lb.local(acc, llvm::ConstantFP::get(acc, 0.0));
          lb.loop(h.lo, h.hi, [&](llvm::Value* ih) {
            lb.loop(w.lo, w.hi, [&](llvm::Value* iw) {
              llvm::Value* at =
                  b.CreateAdd(in_base, b.CreateAdd(b.CreateMul(ih, lb.i64(p.width)), iw));
              lb.set(sum, b.CreateFAdd(lb.get(sum), widen(load(lb.operand(0), at))));
            });
          });
          llvm::Value* mean = b.CreateFDiv(lb.get(sum), divisor);
          store_f32(lb, p.dtype, half ? mean : lb.to_f32(mean), y, out_at);
          return;
        }
        // avg grad: no taps when the count is not positive.
        llvm::Value* share = b.CreateFDiv(widen(load(lb.operand(0), out_at)), divisor);
        llvm::Value* h_end =
            b.CreateSelect(b.CreateICmpSGT(count, lb.i64(0)), h.hi, h.lo);
        lb.loop(h.lo, h_end, [&](llvm::Value* ih) {
          lb.loop(w.lo, w.hi, [&](llvm::Value* iw) {
            llvm::Value* at =
                b.CreateAdd(in_base, b.CreateAdd(b.CreateMul(ih, lb.i64(p.width)), iw));
            llvm::Value* sum = b.CreateFAdd(widen(lb.load(lb.f32(), sums, at)), share);
            lb.store(half ? sum : lb.to_f32(sum), sums, at);
          });
        });
      });
    });
    // bf16: the plane's f32 sums rounded once.
    if (sums_in_scratch)
      lb.loop(
          plane,
          [&](llvm::Value* i) {
            llvm::Value* at = b.CreateAdd(in_base, i);
            store_f32(lb, p.dtype, lb.load(lb.f32(), sums, at), y, at);
          },
          /*parallel=*/true);
  });
  OpLoop loop{lb.finish(), false, p.planes, 1, p.planes * std::max(plane, out_plane)};
  loop.calls_runtime = sums_in_scratch;
  return loop;
}

} // namespace mstep::xla
