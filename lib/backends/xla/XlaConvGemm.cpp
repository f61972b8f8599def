// f32 conv2d and its two gradients (NCHW; stride, padding, dilation,
// groups) as im2col / col2im loops around gemm_f32 (XlaRuntimeCalls:
// oneDNN's sgemm, the same call the step's matmuls make, so it runs alike
// in the JIT step and in mstep-aot's object). Per sample n, with col its
// im2col matrix [channels * kh * kw, out_h * out_w] (group g's rows
// [g * taps, (g + 1) * taps), taps = group_channels * kh * kw) and og the
// output channels per group, one gemm call per sample over the groups:
// - conv2d:             y[n, g] = w[g] col[g] (+ bias), [og, taps] x [taps, plane];
// - conv2d_input_grad:  col[g] = w[g]^T grad_out[n, g], then col2im adds
//                       each column into grad_in[n];
// - conv2d_weight_grad: partial[n, g] = grad_out[n, g] col[g]^T, then
//                       grad_w = the sum of the partials over n, in order.
// A row function over the samples of a chunk (ConvGemmPlan, XlaConvShape.h)
// gives each sample its own slice of the arena's conv scratch, so the
// threads take whole samples (each sgemm then runs on its thread); a
// driver walks the chunks. Each sum is an f32 gemm's (sgemm's order), not
// ref's f64 sum rounded once: within K u sum|x w| of it (K the sum's
// length, u = 2^-24), as the cpu backend's oneDNN convolution.
//
// bf16 convs make the same calls to gemm_bf16_f32 (oneDNN's matmul over
// bf16 operands into an f32 result, on the CPU's bf16 dot products where
// it has them): im2col copies the input's bf16 as it is, the weight and
// grad_out are read in place, the forward adds the bias to the f32
// result, col2im and the weight gradient's sum over samples stay f32 in
// the scratch (ConvGemmPlan), and each result element is rounded to bf16
// once at the end. That is what oneDNN's bf16 convolution on the cpu
// backend computes (exact products, f32 sums, one rounding), in another
// order: within one bf16 ulp plus the f32 sums' K u sum|x w| of it.
// (gemm_bf16 would round every gemm result to bf16: col2im and the sum
// over samples would round twice.)
#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/xla/XlaConvShape.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

/// The lanes of im2col's and col2im's window-row loops: their trip count
/// is at most out_w, which LLVM sees and answers with 4 lanes.
constexpr unsigned kRowLanes = 8;

/// &base[offset] over f32 elements.
llvm::Value* element(LoopBuilder& lb, llvm::Value* base, llvm::Value* offset) {
  return lb.b().CreateInBoundsGEP(lb.f32(), base, offset);
}

/// &base[offset] over elements of `dtype` (f32 or bf16).
llvm::Value* element_of(LoopBuilder& lb, DType dtype, llvm::Value* base, llvm::Value* offset) {
  return lb.b().CreateInBoundsGEP(storage_type(lb.b(), dtype), base, offset);
}

/// to[i] (of `dtype`) = the f32 from[i], rounded once, for i < count.
void round_into(LoopBuilder& lb, DType dtype, llvm::Value* from, llvm::Value* to, int64_t count) {
  lb.loop(
      count, [&](llvm::Value* i) { store_f32(lb, dtype, lb.load(lb.f32(), from, i), to, i); },
      /*parallel=*/true);
}

/// c[i] = a[i] x b[i] for i < batch (XlaRuntimeCalls::gemm_f32, or
/// gemm_bf16_f32 for bf16 a and b, through the pointer `gemm`); a[i] is [m, k] (stored [k, m] when
/// trans_a), b[i] [k, n] (stored [n, k] when trans_b), c[i] at c + i * m * n.
void call_gemm(LoopBuilder& lb, llvm::Value* gemm, int64_t batch, int64_t m, int64_t n, int64_t k,
               bool trans_a, llvm::Value* a, int64_t a_stride, bool trans_b, llvm::Value* b,
               int64_t b_stride, llvm::Value* c) {
  auto& ir = lb.b();
  llvm::Type* ptr = llvm::PointerType::getUnqual(ir.getContext());
  llvm::Type* i64 = lb.i64();
  auto* type = llvm::FunctionType::get(
      ir.getVoidTy(), {i64, i64, i64, i64, i64, ptr, i64, i64, ptr, i64, ptr}, false);
  ir.CreateCall(type, gemm,
                {lb.i64(batch), lb.i64(m), lb.i64(n), lb.i64(k), lb.i64(trans_a), a,
                 lb.i64(a_stride), lb.i64(trans_b), b, lb.i64(b_stride), c});
}

/// For each input channel ch and tap (i, j): the row r = (ch * kh + i) *
/// kw + j of the im2col matrix, its window rows [oh_lo, oh_hi) and columns
/// [ow_lo, ow_hi) whose tap lands inside the input (lo clamped to the
/// windows, so [0, lo) and [hi, windows) hold the rest), and each window
/// row's input element offset of column 0 (add ow * stride).
template <typename RowBody>
void for_tap_rows(LoopBuilder& lb, const ConvShape& c, RowBody body) {
  auto& b = lb.b();
  auto at_most = [&](llvm::Value* v, int64_t bound) {
    return b.CreateSelect(b.CreateICmpSGT(v, lb.i64(bound)), lb.i64(bound), v);
  };
  lb.loop(c.channels, [&](llvm::Value* ch) {
    lb.loop(c.kh, [&](llvm::Value* i) {
      auto [oh_lo, oh_hi] = conv_tap_range(lb, c, 0, i);
      oh_lo = at_most(oh_lo, c.out_h);
      lb.loop(c.kw, [&](llvm::Value* j) {
        auto [ow_lo, ow_hi] = conv_tap_range(lb, c, 1, j);
        ow_lo = at_most(ow_lo, c.out_w);
        llvm::Value* r =
            b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(ch, lb.i64(c.kh)), i), lb.i64(c.kw)), j);
        // Input offset of (ch, ih, iw) at column 0: iw = -pad + j * dilation.
        auto source = [&](llvm::Value* oh) {
          llvm::Value* ih = b.CreateAdd(
              b.CreateSub(b.CreateMul(oh, lb.i64(c.stride[0])), lb.i64(c.pad[0])),
              b.CreateMul(i, lb.i64(c.dilation[0])));
          return b.CreateAdd(
              b.CreateMul(b.CreateAdd(b.CreateMul(ch, lb.i64(c.height)), ih), lb.i64(c.width)),
              b.CreateSub(b.CreateMul(j, lb.i64(c.dilation[1])), lb.i64(c.pad[1])));
        };
        body(b.CreateMul(r, lb.i64(c.out_plane())), oh_lo, oh_hi, ow_lo, ow_hi, source);
      });
    });
  });
}

/// col = the im2col matrix of one sample `in` [channels, height, width]
/// (zeros where a tap falls outside the input), in the input's dtype (a
/// copy: bf16 stays bf16, the gemm's operand).
void im2col(LoopBuilder& lb, const ConvShape& c, llvm::Value* in, llvm::Value* col) {
  auto& b = lb.b();
  llvm::Type* element_type = storage_type(b, c.dtype);
  llvm::Value* zero = llvm::Constant::getNullValue(element_type);
  auto zeros = [&](llvm::Value* base, llvm::Value* from, llvm::Value* to) {
    lb.loop(
        from, to, [&](llvm::Value* k) { lb.store(zero, col, b.CreateAdd(base, k)); },
        /*parallel=*/true);
  };
  for_tap_rows(lb, c, [&](llvm::Value* base, llvm::Value* oh_lo, llvm::Value* oh_hi,
                          llvm::Value* ow_lo, llvm::Value* ow_hi, auto source) {
    llvm::Value* width = lb.i64(c.out_w);
    zeros(base, lb.i64(0), b.CreateMul(oh_lo, width));
    zeros(base, b.CreateMul(oh_hi, width), lb.i64(c.out_plane()));
    lb.loop(oh_lo, oh_hi, [&](llvm::Value* oh) {
      llvm::Value* row = b.CreateAdd(base, b.CreateMul(oh, width));
      llvm::Value* from = source(oh);
      zeros(row, lb.i64(0), ow_lo);
      zeros(row, ow_hi, width);
      lb.loop(
          ow_lo, ow_hi,
          [&](llvm::Value* ow) {
            llvm::Value* x =
                lb.load(element_type, in, b.CreateAdd(from, b.CreateMul(ow, lb.i64(c.stride[1]))));
            lb.store(x, col, b.CreateAdd(row, ow));
          },
          /*parallel=*/true, kRowLanes);
    });
  });
}

/// out = col2im(col) for one sample: each input element the sum of the
/// columns whose tap lands on it (zeros first; taps in order). Within a
/// window row the columns land on distinct elements.
void col2im(LoopBuilder& lb, const ConvShape& c, llvm::Value* col, llvm::Value* out) {
  auto& b = lb.b();
  lb.loop(
      c.channels * c.in_plane(), [&](llvm::Value* k) { lb.store(lb.f32(0.0f), out, k); },
      /*parallel=*/true);
  for_tap_rows(lb, c, [&](llvm::Value* base, llvm::Value* oh_lo, llvm::Value* oh_hi,
                          llvm::Value* ow_lo, llvm::Value* ow_hi, auto source) {
    lb.loop(oh_lo, oh_hi, [&](llvm::Value* oh) {
      llvm::Value* row = b.CreateAdd(base, b.CreateMul(oh, lb.i64(c.out_w)));
      llvm::Value* to = source(oh);
      lb.loop(
          ow_lo, ow_hi,
          [&](llvm::Value* ow) {
            llvm::Value* at = b.CreateAdd(to, b.CreateMul(ow, lb.i64(c.stride[1])));
            lb.store(b.CreateFAdd(lb.load(lb.f32(), out, at),
                                  lb.load(lb.f32(), col, b.CreateAdd(row, ow))),
                     out, at);
          },
          /*parallel=*/true, kRowLanes);
    });
  });
}

/// The row function over the samples [begin, end) of a chunk; its
/// operands are the node's (sample-indexed ones at the chunk's first
/// sample), the scratch and the gemm (gemm_f32, or gemm_bf16_f32 for
/// bf16), its result the node's.
llvm::Function* emit_samples(llvm::Module& module, const std::string& name, OpKind op,
                             const ConvGemmPlan& p, size_t operands, bool bias) {
  const ConvShape& c = p.conv;
  const bool bf16 = c.dtype == DType::bf16;
  LoopBuilder lb(module, name + "_samples", operands + 2, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* scratch = lb.operand(operands);
  llvm::Value* gemm = lb.operand(operands + 1);
  llvm::Value* weight = lb.operand(1);
  llvm::Value* samples = element(lb, scratch, lb.i64(p.shared_floats));
  const int64_t og = c.outs_per_group(), taps = c.group_taps(), plane = c.out_plane();
  const int64_t in_sample = c.channels * c.in_plane(), out_sample = c.out_channels * plane;
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* s) {
    auto sample = [&](llvm::Value* base, int64_t size) {
      return element_of(lb, c.dtype, base, b.CreateMul(s, lb.i64(size)));
    };
    llvm::Value* col = element(lb, samples, b.CreateMul(s, lb.i64(p.sample_floats)));
    llvm::Value* out_stage = element(lb, col, lb.i64(p.col_floats + p.partial_floats));
    llvm::Value* in_stage = element(lb, out_stage, lb.i64(p.out_stage_floats));
    if (op == OpKind::conv2d) {
      im2col(lb, c, sample(lb.operand(0), in_sample), col);
      llvm::Value* y = sample(lb.result(0), out_sample);
      llvm::Value* sums = bf16 ? out_stage : y;
      call_gemm(lb, gemm, c.groups, og, plane, taps, false, weight, og * taps, false, col,
                taps * plane, sums);
      // y = sums + bias, rounded once (f32: in place).
      if (bias || bf16)
        lb.loop(c.out_channels, [&](llvm::Value* o) {
          llvm::Value* add = bias ? load_f32(lb, c.dtype, lb.operand(2), o) : nullptr;
          llvm::Value* first = b.CreateMul(o, lb.i64(plane));
          lb.loop(
              plane,
              [&](llvm::Value* k) {
                llvm::Value* at = b.CreateAdd(first, k);
                llvm::Value* v = lb.load(lb.f32(), sums, at);
                store_f32(lb, c.dtype, add ? b.CreateFAdd(v, add) : v, y, at);
              },
              /*parallel=*/true);
        });
    } else if (op == OpKind::conv2d_input_grad) {
      call_gemm(lb, gemm, c.groups, taps, plane, og, true, weight, og * taps, false,
                sample(lb.operand(0), out_sample), og * plane, col);
      llvm::Value* grad_in = sample(lb.result(0), in_sample);
      col2im(lb, c, col, bf16 ? in_stage : grad_in);
      if (bf16) round_into(lb, c.dtype, in_stage, grad_in, in_sample);
    } else { // conv2d_weight_grad: the sample's partial after its col
      im2col(lb, c, sample(lb.operand(0), in_sample), col);
      call_gemm(lb, gemm, c.groups, og, taps, plane, false, sample(lb.operand(1), out_sample),
                og * plane, true, col, taps * plane, element(lb, col, lb.i64(p.col_floats)));
    }
  });
  return lb.finish();
}

/// The weight gradient's row function over output channels: y[o] += the
/// partials of the chunk's samples, in order (operands: the scratch's
/// samples and the sample count as an integer; y f32: the result, or
/// bf16's f32 sum).
llvm::Function* emit_partial_sums(llvm::Module& module, const std::string& name,
                                  const ConvGemmPlan& p) {
  const int64_t taps = p.conv.group_taps();
  LoopBuilder lb(module, name + "_sum", 2, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* samples = b.CreatePtrToInt(lb.operand(1), lb.i64());
  llvm::Value* y = lb.result(0);
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* o) {
    llvm::Value* first = b.CreateMul(o, lb.i64(taps));
    lb.loop(lb.i64(0), samples, [&](llvm::Value* s) {
      llvm::Value* partial = element(
          lb, lb.operand(0),
          b.CreateAdd(b.CreateMul(s, lb.i64(p.sample_floats)), lb.i64(p.col_floats)));
      lb.loop(
          taps,
          [&](llvm::Value* k) {
            llvm::Value* at = b.CreateAdd(first, k);
            lb.store(b.CreateFAdd(lb.load(lb.f32(), y, at), lb.load(lb.f32(), partial, at)), y,
                     at);
          },
          /*parallel=*/true);
    });
  });
  return lb.finish();
}

} // namespace

std::optional<OpLoop> emit_conv_gemm(llvm::Module& module, const TraceGraph& graph,
                                     uint32_t node) {
  const GraphNode& n = graph.nodes[node];
  const std::optional<ConvGemmPlan> plan = conv_gemm_plan(graph, n);
  if (!plan) return std::nullopt;
  const ConvShape& c = plan->conv;
  const OpKind op = n.op;
  const bool bias = op == OpKind::conv2d && n.operands.size() == 3;
  const size_t operands = n.operands.size();
  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_gemm_", node);
  llvm::Function* samples = emit_samples(module, name, op, *plan, operands, bias);
  llvm::Function* sums =
      op == OpKind::conv2d_weight_grad ? emit_partial_sums(module, name, *plan) : nullptr;

  // The driver: the chunks in order, each a call of the row function
  // (split over the threads when large), then the weight gradient's sums.
  // bf16: the weight gradient's f32 sum rounded after.
  const bool bf16 = c.dtype == DType::bf16;
  LoopBuilder lb(module, name, operands + kRuntimeOperands, 1);
  auto& b = lb.b();
  llvm::Type* ptr = llvm::PointerType::getUnqual(b.getContext());
  llvm::Value* scratch = lb.operand(operands);
  llvm::Value* gemm = lb.operand(operands + 1);
  llvm::Value* parallel_nest = lb.operand(operands + 2);
  std::vector<llvm::Value*> sample_operands;
  for (size_t i = 0; i < operands; ++i) sample_operands.push_back(lb.operand(i));
  sample_operands.push_back(scratch);
  sample_operands.push_back(gemm);
  llvm::Value* sample_array = lb.array(ptr, sample_operands);
  llvm::Value* result_array = lb.array(ptr, {lb.result(0)});
  llvm::Value* sum_array =
      lb.array(ptr, {element(lb, scratch, lb.i64(plan->shared_floats)),
                     llvm::ConstantPointerNull::get(llvm::PointerType::getUnqual(b.getContext()))});
  // The f32 weight gradient the partials add into.
  llvm::Value* weight_sum = bf16 ? scratch : lb.result(0);
  llvm::Value* sum_result_array = lb.array(ptr, {weight_sum});
  const int64_t weight_elements = c.out_channels * c.group_taps();
  const int64_t in_sample = c.channels * c.in_plane(), out_sample = c.out_channels * c.out_plane();
  const int64_t work = c.batch * c.out_channels * c.out_plane() * c.group_taps();
  auto run = [&](llvm::Function* rows, llvm::Value* ops, llvm::Value* results,
                 llvm::Value* count, bool split) {
    if (split)
      b.CreateCall(llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr, lb.i64(), lb.i64()},
                                           false),
                   parallel_nest, {rows, ops, results, count, lb.i64(1)});
    else
      b.CreateCall(rows, {ops, results, lb.i64(0), count});
  };
  if (op == OpKind::conv2d_weight_grad)
    b.CreateMemSet(weight_sum, b.getInt8(0), weight_elements * 4, llvm::MaybeAlign(4));
  const int64_t chunks = (c.batch + plan->chunk - 1) / plan->chunk;
  lb.loop(chunks, [&](llvm::Value* k) {
    llvm::Value* first = b.CreateMul(k, lb.i64(plan->chunk));
    llvm::Value* left = b.CreateSub(lb.i64(c.batch), first);
    llvm::Value* count = b.CreateSelect(b.CreateICmpSLT(left, lb.i64(plan->chunk)), left,
                                        lb.i64(plan->chunk));
    // The sample-indexed pointers at the chunk's first sample.
    auto at_first = [&](llvm::Value* array, size_t slot, llvm::Value* base, int64_t size) {
      b.CreateStore(element_of(lb, c.dtype, base, b.CreateMul(first, lb.i64(size))),
                    b.CreateConstInBoundsGEP1_64(ptr, array, slot));
    };
    if (op == OpKind::conv2d) {
      at_first(sample_array, 0, lb.operand(0), in_sample);
      at_first(result_array, 0, lb.result(0), out_sample);
    } else if (op == OpKind::conv2d_input_grad) {
      at_first(sample_array, 0, lb.operand(0), out_sample);
      at_first(result_array, 0, lb.result(0), in_sample);
    } else {
      at_first(sample_array, 0, lb.operand(0), in_sample);
      at_first(sample_array, 1, lb.operand(1), out_sample);
    }
    run(samples, sample_array, result_array, count,
        plan->chunk >= 2 && work >= cpu::FusionJit::kParallelElements);
    if (sums) {
      b.CreateStore(b.CreateIntToPtr(count, ptr), b.CreateConstInBoundsGEP1_64(ptr, sum_array, 1));
      run(sums, sum_array, sum_result_array, lb.i64(c.out_channels),
          c.out_channels >= 2 &&
              plan->chunk * weight_elements >= cpu::FusionJit::kParallelElements);
    }
  });
  if (sums && bf16) round_into(lb, c.dtype, weight_sum, lb.result(0), weight_elements);
  OpLoop loop;
  loop.function = lb.finish();
  loop.calls_runtime = true;
  loop.gemm_bf16_f32 = bf16;
  return loop;
}

} // namespace mstep::xla
