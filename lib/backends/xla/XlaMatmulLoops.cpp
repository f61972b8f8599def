// The f32 matmuls the step function cannot hand to oneDNN's sgemm
// (native_gemm_shape, XlaStep.h: batch dims that broadcast both ways, ...)
// as a loop (XlaOpLoops.h): out[b, i, j] = sum over k of lhs[b', i, k] *
// rhs[b'', k, j] in f64, k in order, rounded once, with b' and b'' the
// operands' batch positions (broadcast dims read stride 0): the ref
// kernel's sum (lib/backends/ref/RefLinalg.cpp) bit for bit. bf16 and f16
// as the ref's instantiations for them: elements widened to f32, an f32 sum
// in order of k, rounded once. Every f16 matmul is this loop (the cpu
// backend runs ref's for it; Debian's oneDNN 2.6 has no f16 matmul on
// CPUs without AVX512-FP16). A row function over the output's rows
// (b, i), split over the threads.
#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"
#include "lib/backends/xla/XlaStep.h"

namespace mstep::xla {

std::optional<OpLoop> emit_matmul_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.op != OpKind::matmul || nd.operands.size() != 2 || nd.results.size() != 1)
    return std::nullopt;
  if (native_gemm_shape(graph, nd)) return std::nullopt; // a gemm call
  const TensorType& lhs = graph.type_of(nd.operands[0]);
  const TensorType& rhs = graph.type_of(nd.operands[1]);
  const TensorType& out = nd.results[0];
  const DType dtype = out.dtype;
  if (!is_loop_float(dtype) || lhs.dtype != dtype || rhs.dtype != dtype) return std::nullopt;
  const int64_t rank = out.shape.rank();
  if (rank < 2 || lhs.shape.rank() < 2 || rhs.shape.rank() < 2 || out.numel() == 0)
    return std::nullopt;
  const int64_t n = out.shape[rank - 2], p = out.shape[rank - 1];
  const int64_t k = lhs.shape[lhs.shape.rank() - 1];
  if (rhs.shape[rhs.shape.rank() - 2] != k) return std::nullopt;
  // Per output batch dim: its extent and each operand's matrix stride
  // (0 where the operand broadcasts).
  struct BatchDim {
    int64_t extent, lhs_stride, rhs_stride;
  };
  std::vector<BatchDim> batch(rank - 2);
  auto strides = [&](const Shape& s, auto member) {
    int64_t stride = 1; // in matrices
    const int64_t operand_batch = s.rank() - 2;
    for (int64_t d = rank - 3, e = operand_batch - 1; d >= 0; --d, --e) {
      const int64_t extent = e >= 0 ? s[e] : 1;
      batch[d].*member = extent == 1 ? 0 : stride;
      stride *= extent;
    }
  };
  for (int64_t d = 0; d + 2 < rank; ++d) batch[d].extent = out.shape[d];
  strides(lhs.shape, &BatchDim::lhs_stride);
  strides(rhs.shape, &BatchDim::rhs_stride);

  LoopBuilder lb(module, absl::StrCat("mstep_xla_matmul_", node), 2, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (b, i)
    llvm::Value* i = b.CreateSRem(row, lb.i64(n));
    llvm::Value* rest = b.CreateSDiv(row, lb.i64(n));
    llvm::Value* lhs_matrix = lb.i64(0);
    llvm::Value* rhs_matrix = lb.i64(0);
    for (int64_t d = rank - 3; d >= 0; --d) {
      llvm::Value* coordinate = b.CreateSRem(rest, lb.i64(batch[d].extent));
      rest = b.CreateSDiv(rest, lb.i64(batch[d].extent));
      lhs_matrix = b.CreateAdd(lhs_matrix, b.CreateMul(coordinate, lb.i64(batch[d].lhs_stride)));
      rhs_matrix = b.CreateAdd(rhs_matrix, b.CreateMul(coordinate, lb.i64(batch[d].rhs_stride)));
    }
    llvm::Value* lhs_row = b.CreateAdd(b.CreateMul(lhs_matrix, lb.i64(n * k)),
                                       b.CreateMul(i, lb.i64(k)));
    llvm::Value* rhs_base = b.CreateMul(rhs_matrix, lb.i64(k * p));
    llvm::Value* out_row = b.CreateMul(row, lb.i64(p));
    // The ref's accumulator: f64 for f32, f32 for bf16.
    const bool f32_sum = is_half(dtype);
    auto widen = [&](llvm::Value* v) { return f32_sum ? v : lb.to_f64(v); };
    lb.loop(p, [&](llvm::Value* j) {
      llvm::AllocaInst* acc = f32_sum ? lb.local(lb.f32(), lb.f32(0.0f)) : lb.local(lb.f64(), lb.f64(0));
      lb.loop(k, [&](llvm::Value* kk) {
        llvm::Value* x = widen(load_f32(lb, dtype, lb.operand(0), b.CreateAdd(lhs_row, kk)));
        llvm::Value* y = widen(load_f32(
            lb, dtype, lb.operand(1), b.CreateAdd(rhs_base, b.CreateAdd(b.CreateMul(kk, lb.i64(p)), j))));
        lb.set(acc, b.CreateFAdd(lb.get(acc), b.CreateFMul(x, y)));
      });
      llvm::Value* sum = lb.get(acc);
      store_f32(lb, dtype, f32_sum ? sum : lb.to_f32(sum), lb.result(0), b.CreateAdd(out_row, j));
    });
  });
  return OpLoop{lb.finish(), false, out.numel() / p, 1, out.numel() * k};
}

} // namespace mstep::xla
