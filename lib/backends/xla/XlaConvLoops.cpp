// f32 conv2d and its two gradients (NCHW, stride, padding, dilation,
// groups) as direct loops (XlaOpLoops.h), for a conv whose im2col + gemm
// path (XlaConvGemm.cpp, faster on every shape measured) would need more
// than its cap of scratch per sample (conv_gemm_plan), and every f16 conv,
// with the ref kernels' sums (lib/backends/ref/RefLinalg.cpp,
// RefLinalgGrad.cpp), each output accumulated in f64 (f16: in f32, each
// product and sum an f32 operation, as the ref's f16 instantiation) and
// rounded once:
// - conv2d: out[n, o, oh, ow] = bias[o] + sum over the group's channels
//   c', then the taps (kh, kw) inside the input, of w * in;
// - conv2d_input_grad: grad_in[n, c, ih, iw] = sum over o in c's group and
//   the taps whose window position lands on (ih, iw) of w * grad_out;
// - conv2d_weight_grad: grad_w[o, c', kh, kw] = sum over n of (sum over
//   oh, ow of in * grad_out).
// The first two keep a plane of f64 sums per row on the stack (up to
// kMaxPlane elements) and walk the ref's loops over it, the window columns
// as vector loops, so every sum is the ref's, in the ref's order, bit for
// bit; larger planes sum each element on its own (the same order for
// conv2d, a gather for the input gradient: the same to f64 rounding).
// Row functions over (n, o) planes, (n, c) planes and output channels: no
// two rows write the same element, so the split over threads changes no
// result.
#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaConvShape.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

using Conv = ConvShape;

/// `at(o, k)` = o * stride - pad + k * dilation along dim `d` and
/// whether it is inside [0, size).
std::pair<llvm::Value*, llvm::Value*> tap(LoopBuilder& lb, const Conv& c, int d, llvm::Value* o,
                                          llvm::Value* k) {
  auto& b = lb.b();
  llvm::Value* at = b.CreateAdd(b.CreateSub(b.CreateMul(o, lb.i64(c.stride[d])), lb.i64(c.pad[d])),
                                b.CreateMul(k, lb.i64(c.dilation[d])));
  const int64_t size = d == 0 ? c.height : c.width;
  return {at, b.CreateAnd(b.CreateICmpSGE(at, lb.i64(0)), b.CreateICmpSLT(at, lb.i64(size)))};
}

/// The window position o whose tap k lands on input position i along dim
/// `d` (i = o * stride - pad + k * dilation), and whether there is one.
std::pair<llvm::Value*, llvm::Value*> window_of(LoopBuilder& lb, const Conv& c, int d,
                                                llvm::Value* i, llvm::Value* k) {
  auto& b = lb.b();
  llvm::Value* scaled =
      b.CreateSub(b.CreateAdd(i, lb.i64(c.pad[d])), b.CreateMul(k, lb.i64(c.dilation[d])));
  llvm::Value* o = b.CreateSDiv(scaled, lb.i64(c.stride[d]));
  const int64_t size = d == 0 ? c.out_h : c.out_w;
  llvm::Value* valid = b.CreateAnd(
      b.CreateICmpEQ(b.CreateSRem(scaled, lb.i64(c.stride[d])), lb.i64(0)),
      b.CreateAnd(b.CreateICmpSGE(scaled, lb.i64(0)), b.CreateICmpSLT(o, lb.i64(size))));
  return {b.CreateSelect(valid, o, lb.i64(0)), valid};
}

/// The ref's accumulator for a conv of `dtype`: f64 for f32, f32 for f16.
struct Accumulator {
  LoopBuilder& lb;
  bool f32;
  llvm::Type* type() const { return f32 ? lb.f32() : lb.f64(); }
  llvm::Value* zero() const { return f32 ? lb.f32(0.0f) : lb.f64(0); }
  /// An element loaded as f32, widened to the accumulator.
  llvm::Value* widen(llvm::Value* v) const { return f32 ? v : lb.to_f64(v); }
  /// A sum as f32 (then rounded to the dtype on store).
  llvm::Value* narrow(llvm::Value* v) const { return f32 ? v : lb.to_f32(v); }
};

/// acc += a * b in the accumulator's type where `valid`.
void add_product(const Accumulator& a, llvm::AllocaInst* acc, llvm::Value* valid, llvm::Value* x,
                 llvm::Value* y) {
  LoopBuilder& lb = a.lb;
  auto& b = lb.b();
  llvm::Value* sum = b.CreateFAdd(lb.get(acc), b.CreateFMul(a.widen(x), a.widen(y)));
  lb.set(acc, b.CreateSelect(valid, sum, lb.get(acc)));
}

/// Planes of f64 sums up to this many elements live on the stack of a row
/// function (128 KiB per thread); larger ones take the per-element loops.
constexpr int64_t kMaxPlane = 16384;

} // namespace

// XlaOpLoops.h.
std::pair<llvm::Value*, llvm::Value*> conv_tap_range(LoopBuilder& lb, const ConvShape& c, int d,
                                                     llvm::Value* k) {
  auto& b = lb.b();
  const int64_t size = d == 0 ? c.height : c.width, windows = d == 0 ? c.out_h : c.out_w;
  const int64_t stride = c.stride[d];
  llvm::Value* shift = b.CreateSub(lb.i64(c.pad[d]), b.CreateMul(k, lb.i64(c.dilation[d])));
  // lo = ceil(shift / stride) when shift > 0, else 0.
  llvm::Value* lo = b.CreateSelect(
      b.CreateICmpSGT(shift, lb.i64(0)),
      b.CreateSDiv(b.CreateAdd(shift, lb.i64(stride - 1)), lb.i64(stride)), lb.i64(0));
  // hi = floor((size - 1 + shift) / stride) + 1, at most `windows`; 0 when negative.
  llvm::Value* last = b.CreateAdd(lb.i64(size - 1), shift);
  llvm::Value* hi = b.CreateSelect(b.CreateICmpSLT(last, lb.i64(0)), lb.i64(0),
                                   b.CreateAdd(b.CreateSDiv(last, lb.i64(stride)), lb.i64(1)));
  hi = b.CreateSelect(b.CreateICmpSGT(hi, lb.i64(windows)), lb.i64(windows), hi);
  return {lo, hi};
}

std::optional<OpLoop> emit_conv_loop(llvm::Module& module, const TraceGraph& graph,
                                     uint32_t node) {
  const GraphNode& n = graph.nodes[node];
  const OpKind op = n.op;
  if (op != OpKind::conv2d && op != OpKind::conv2d_input_grad && op != OpKind::conv2d_weight_grad)
    return std::nullopt;
  const bool bias = op == OpKind::conv2d && attr_int(n.attrs, AttrName::has_bias) != 0;
  const std::optional<Conv> conv = conv_shape(graph, n);
  // bf16 convs take the im2col + gemm path or stay callouts.
  if (!conv || conv->dtype == DType::bf16) return std::nullopt;
  const Conv& c = *conv;
  const DType dtype = c.dtype;
  const int64_t outs_per_group = c.out_channels / c.groups;
  const int64_t taps = c.kh * c.kw;
  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(op), "_", node), n.operands.size(), 1,
                 LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* y = lb.result(0);
  const Accumulator acc_of{lb, dtype == DType::f16};
  llvm::Type* acc_type = acc_of.type();
  // Element `at` of operand `i` as f32; `v` (f32) stored as result element `at`.
  auto load = [&](unsigned i, llvm::Value* at) { return load_f32(lb, dtype, lb.operand(i), at); };
  auto store = [&](llvm::Value* v, llvm::Value* at) { store_f32(lb, dtype, v, y, at); };
  // Element offsets in NCHW tensors.
  auto nchw = [&](llvm::Value* i0, int64_t d1, llvm::Value* i1, int64_t d2, llvm::Value* i2,
                  int64_t d3, llvm::Value* i3) {
    return b.CreateAdd(
        b.CreateMul(b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(i0, lb.i64(d1)), i1),
                                            lb.i64(d2)),
                                i2),
                    lb.i64(d3)),
        i3);
  };
  auto input_at = [&](llvm::Value* batch, llvm::Value* channel, llvm::Value* h, llvm::Value* w) {
    return nchw(batch, c.channels, channel, c.height, h, c.width, w);
  };
  auto output_at = [&](llvm::Value* batch, llvm::Value* channel, llvm::Value* h, llvm::Value* w) {
    return nchw(batch, c.out_channels, channel, c.out_h, h, c.out_w, w);
  };
  auto weight_at = [&](llvm::Value* o, llvm::Value* gc, llvm::Value* kh, llvm::Value* kw) {
    return nchw(o, c.group_channels, gc, c.kh, kh, c.kw, kw);
  };
  // For each tap (kh, kw) of output channel o on group channel gc, the
  // windows (oh, ow) whose tap is inside the input: accumulate(w, oh, ow,
  // ih, iw) with w that tap's weight, the columns a vector loop.
  auto for_taps = [&](llvm::Value* o, llvm::Value* gc, auto accumulate) {
    lb.loop(c.kh, [&](llvm::Value* kh) {
      auto [oh_lo, oh_hi] = conv_tap_range(lb, c, 0, kh);
      lb.loop(c.kw, [&](llvm::Value* kw) {
        auto [ow_lo, ow_hi] = conv_tap_range(lb, c, 1, kw);
        llvm::Value* wv = acc_of.widen(load(1, weight_at(o, gc, kh, kw)));
        lb.loop(oh_lo, oh_hi, [&](llvm::Value* oh) {
          llvm::Value* ih = tap(lb, c, 0, oh, kh).first;
          lb.loop(
              ow_lo, ow_hi,
              [&](llvm::Value* ow) { accumulate(wv, oh, ow, ih, tap(lb, c, 1, ow, kw).first); },
              /*parallel=*/true);
        });
      });
    });
  };
  // plane[at] += w * v in the accumulator's type.
  auto add_to_plane = [&](llvm::Value* plane, llvm::Value* at, llvm::Value* w, llvm::Value* v) {
    lb.store(b.CreateFAdd(lb.load(acc_type, plane, at), b.CreateFMul(w, acc_of.widen(v))), plane,
             at);
  };
  // y[base + i] = plane[i] rounded, for i < count.
  auto store_plane = [&](llvm::Value* plane, int64_t count, llvm::Value* base) {
    lb.loop(
        count,
        [&](llvm::Value* i) {
          store(acc_of.narrow(lb.load(acc_type, plane, i)), b.CreateAdd(base, i));
        },
        /*parallel=*/true);
  };
  int64_t rows = 0;
  const int64_t out_plane = c.out_h * c.out_w, in_plane = c.height * c.width;
  if (op == OpKind::conv2d && out_plane <= kMaxPlane) {
    // The ref's loops: a plane of f64 sums from the bias, then for each
    // channel and tap the rows of windows whose tap is inside the input,
    // the columns a vector loop (each window's sum in the ref's order).
    rows = c.batch * c.out_channels;
    llvm::Value* plane = b.CreateAlloca(acc_type, lb.i64(out_plane));
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (n, o)
      llvm::Value* batch = b.CreateSDiv(row, lb.i64(c.out_channels));
      llvm::Value* o = b.CreateSRem(row, lb.i64(c.out_channels));
      llvm::Value* first = b.CreateMul(b.CreateSDiv(o, lb.i64(outs_per_group)),
                                       lb.i64(c.group_channels));
      llvm::Value* init = bias ? acc_of.widen(load(2, o)) : acc_of.zero();
      lb.loop(out_plane, [&](llvm::Value* i) { lb.store(init, plane, i); }, /*parallel=*/true);
      lb.loop(c.group_channels, [&](llvm::Value* gc) {
        llvm::Value* channel = b.CreateAdd(first, gc);
        for_taps(o, gc, [&](llvm::Value* wv, llvm::Value* oh, llvm::Value* ow, llvm::Value* ih,
                            llvm::Value* iw) {
          add_to_plane(plane, b.CreateAdd(b.CreateMul(oh, lb.i64(c.out_w)), ow), wv,
                      load(0, input_at(batch, channel, ih, iw)));
        });
      });
      store_plane(plane, out_plane, output_at(batch, o, lb.i64(0), lb.i64(0)));
    });
  } else if (op == OpKind::conv2d_input_grad && in_plane <= kMaxPlane) {
    // The ref's scatter: a plane of f64 sums per (n, c), then for each
    // output channel of c's group and tap, the windows whose tap is inside
    // the input add w * grad_out into it (each element's sum in the ref's
    // order).
    rows = c.batch * c.channels;
    llvm::Value* plane = b.CreateAlloca(acc_type, lb.i64(in_plane));
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (n, c)
      llvm::Value* batch = b.CreateSDiv(row, lb.i64(c.channels));
      llvm::Value* channel = b.CreateSRem(row, lb.i64(c.channels));
      llvm::Value* gc = b.CreateSRem(channel, lb.i64(c.group_channels));
      llvm::Value* first = b.CreateMul(b.CreateSDiv(channel, lb.i64(c.group_channels)),
                                       lb.i64(outs_per_group));
      lb.loop(in_plane, [&](llvm::Value* i) { lb.store(acc_of.zero(), plane, i); },
              /*parallel=*/true);
      lb.loop(outs_per_group, [&](llvm::Value* k) {
        llvm::Value* o = b.CreateAdd(first, k);
        for_taps(o, gc, [&](llvm::Value* wv, llvm::Value* oh, llvm::Value* ow, llvm::Value* ih,
                            llvm::Value* iw) {
          add_to_plane(plane, b.CreateAdd(b.CreateMul(ih, lb.i64(c.width)), iw), wv,
                      load(0, output_at(batch, o, oh, ow)));
        });
      });
      store_plane(plane, in_plane, input_at(batch, channel, lb.i64(0), lb.i64(0)));
    });
  } else if (op == OpKind::conv2d) {
    rows = c.batch * c.out_channels;
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (n, o)
      llvm::Value* batch = b.CreateSDiv(row, lb.i64(c.out_channels));
      llvm::Value* o = b.CreateSRem(row, lb.i64(c.out_channels));
      llvm::Value* first = b.CreateMul(b.CreateSDiv(o, lb.i64(outs_per_group)),
                                       lb.i64(c.group_channels));
      lb.loop(c.out_h, [&](llvm::Value* oh) {
        lb.loop(c.out_w, [&](llvm::Value* ow) {
          llvm::AllocaInst* acc =
              lb.local(acc_type, bias ? acc_of.widen(load(2, o)) : acc_of.zero());
          lb.loop(c.group_channels, [&](llvm::Value* gc) {
            llvm::Value* channel = b.CreateAdd(first, gc);
            lb.loop(c.kh, [&](llvm::Value* kh) {
              auto [ih, h_in] = tap(lb, c, 0, oh, kh);
              lb.loop(c.kw, [&](llvm::Value* kw) {
                auto [iw, w_in] = tap(lb, c, 1, ow, kw);
                llvm::Value* valid = b.CreateAnd(h_in, w_in);
                llvm::Value* at = b.CreateSelect(valid, input_at(batch, channel, ih, iw), lb.i64(0));
                add_product(acc_of, acc, valid, load(1, weight_at(o, gc, kh, kw)), load(0, at));
              });
            });
          });
          store(acc_of.narrow(lb.get(acc)), output_at(batch, o, oh, ow));
        });
      });
    });
  } else if (op == OpKind::conv2d_input_grad) {
    rows = c.batch * c.channels;
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (n, c)
      llvm::Value* batch = b.CreateSDiv(row, lb.i64(c.channels));
      llvm::Value* channel = b.CreateSRem(row, lb.i64(c.channels));
      llvm::Value* gc = b.CreateSRem(channel, lb.i64(c.group_channels));
      llvm::Value* first = b.CreateMul(b.CreateSDiv(channel, lb.i64(c.group_channels)),
                                       lb.i64(outs_per_group));
      lb.loop(c.height, [&](llvm::Value* ih) {
        lb.loop(c.width, [&](llvm::Value* iw) {
          llvm::AllocaInst* acc = lb.local(acc_type, acc_of.zero());
          lb.loop(outs_per_group, [&](llvm::Value* k) {
            llvm::Value* o = b.CreateAdd(first, k);
            lb.loop(c.kh, [&](llvm::Value* kh) {
              auto [oh, h_ok] = window_of(lb, c, 0, ih, kh);
              lb.loop(c.kw, [&](llvm::Value* kw) {
                auto [ow, w_ok] = window_of(lb, c, 1, iw, kw);
                add_product(acc_of, acc, b.CreateAnd(h_ok, w_ok), load(1, weight_at(o, gc, kh, kw)),
                            load(0, output_at(batch, o, oh, ow)));
              });
            });
          });
          store(acc_of.narrow(lb.get(acc)), input_at(batch, channel, ih, iw));
        });
      });
    });
  } else { // conv2d_weight_grad
    rows = c.out_channels;
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* o) {
      llvm::Value* first = b.CreateMul(b.CreateSDiv(o, lb.i64(outs_per_group)),
                                       lb.i64(c.group_channels));
      lb.loop(c.group_channels, [&](llvm::Value* gc) {
        llvm::Value* channel = b.CreateAdd(first, gc);
        lb.loop(c.kh, [&](llvm::Value* kh) {
          lb.loop(c.kw, [&](llvm::Value* kw) {
            llvm::AllocaInst* acc = lb.local(acc_type, acc_of.zero());
            lb.loop(c.batch, [&](llvm::Value* batch) {
              llvm::AllocaInst* sum = lb.local(acc_type, acc_of.zero());
              lb.loop(c.out_h, [&](llvm::Value* oh) {
                auto [ih, h_in] = tap(lb, c, 0, oh, kh);
                lb.loop(c.out_w, [&](llvm::Value* ow) {
                  auto [iw, w_in] = tap(lb, c, 1, ow, kw);
                  llvm::Value* valid = b.CreateAnd(h_in, w_in);
                  llvm::Value* at =
                      b.CreateSelect(valid, input_at(batch, channel, ih, iw), lb.i64(0));
                  add_product(acc_of, sum, valid, load(0, at), load(1, output_at(batch, o, oh, ow)));
                });
              });
              lb.set(acc, b.CreateFAdd(lb.get(acc), lb.get(sum)));
            });
            store(acc_of.narrow(lb.get(acc)), weight_at(o, gc, kh, kw));
          });
        });
      });
    });
  }
  return OpLoop{lb.finish(), false, rows, 1,
                c.batch * c.out_channels * c.out_h * c.out_w * c.group_channels * taps};
}

} // namespace mstep::xla
