// index_select (any dtype; embedding's forward) and f32, bf16, f16, i64 or i32
// index_add (its gradient) with i64 or i32 indices as loops (XlaOpLoops.h), with the ref
// kernels' semantics (lib/backends/ref/RefShape.cpp, RefScatter.cpp):
// blocks of `inner` contiguous elements, output block (o, j) = input block
// (o, index[j]) for index_select; out = input, then out block
// (o, index[j]) += source block (o, j) in f32, duplicates in index order,
// for index_add (bf16: each addition in f32, rounded to bf16, as the ref's
// add in its storage type). Every index is checked to be in [0, size) before anything
// is written (OpLoop::check): one that is not returns 1 and the step stops
// there (the runtime names it, XlaStepFailure.cpp). Both are row functions
// the step function splits over the threads: index_select over its output
// blocks, index_add over (o, column block), whose duplicates add in index
// order within the row, so any split gives one thread's bits.
#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::optional<OpLoop> emit_index_loop(llvm::Module& module, const TraceGraph& graph,
                                      uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  const OpKind op = nd.op;
  if (op != OpKind::index_select && op != OpKind::index_add) return std::nullopt;
  const size_t want_operands = op == OpKind::index_select ? 2 : 3;
  if (nd.operands.size() != want_operands || nd.results.size() != 1) return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  const TensorType& index = graph.type_of(nd.operands[1]);
  const TensorType& out = nd.results[0];
  if ((index.dtype != DType::i64 && index.dtype != DType::i32) || index.shape.rank() > 1)
    return std::nullopt;
  const bool integer_add = out.dtype == DType::i64 || out.dtype == DType::i32;
  if (op == OpKind::index_add && ((!is_loop_float(out.dtype) && !integer_add) || in != out ||
                                  graph.type_of(nd.operands[2]).dtype != out.dtype))
    return std::nullopt;
  if (out.dtype != in.dtype || in.shape.rank() == 0 || out.numel() == 0) return std::nullopt;
  const int64_t dim = attr_int(nd.attrs, AttrName::dim);
  if (dim < 0 || dim >= in.shape.rank()) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.shape[d];
  for (int64_t d = dim + 1; d < in.shape.rank(); ++d) inner *= in.shape[d];
  const int64_t size = in.shape[dim];
  const int64_t n = index.numel();

  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_", node);
  // 1. Every index in [0, size) (and index_add's copy of its input), on
  // one thread before any row.
  const int64_t copy_bytes = op == OpKind::index_add ? static_cast<int64_t>(out.bytes()) : 0;
  llvm::Function* check =
      emit_index_check(module, name, want_operands, index.dtype, n, size, copy_bytes);
  LoopBuilder lb(module, name, want_operands, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Type* index_type = index.dtype == DType::i64 ? lb.i64() : b.getInt32Ty();
  auto index_at = [&](llvm::Value* j) {
    return b.CreateSExt(lb.load(index_type, lb.operand(1), j), lb.i64());
  };
  llvm::Value* y = lb.result(0);
  if (op == OpKind::index_select) {
    // 2. Rows: the output blocks (o, j), each copied from its input block.
    llvm::Type* element = b.getIntNTy(static_cast<unsigned>(element_size(out.dtype) * 8));
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) {
      llvm::Value* o = b.CreateSDiv(row, lb.i64(n));
      llvm::Value* j = b.CreateSRem(row, lb.i64(n));
      llvm::Value* from =
          b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(size)), index_at(j)), lb.i64(inner));
      llvm::Value* to = b.CreateMul(row, lb.i64(inner));
      lb.loop(
          inner,
          [&](llvm::Value* k) {
            lb.store(lb.load(element, lb.operand(0), b.CreateAdd(from, k)), y, b.CreateAdd(to, k));
          },
          /*parallel=*/true);
    });
    return OpLoop{lb.finish(), false, outer * n, 1, out.numel(), check};
  }
  // 2. index_add's rows: (o, a column block of kColumns elements); each
  // adds the source blocks into its columns in index order, so duplicate
  // indices sum in one order whatever the split (integers wrap).
  constexpr int64_t kColumns = 16;
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
  llvm::Type* element = b.getIntNTy(static_cast<unsigned>(element_size(out.dtype) * 8));
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) {
    llvm::Value* o = b.CreateSDiv(row, lb.i64(blocks));
    llvm::Value* k0 = b.CreateMul(b.CreateSRem(row, lb.i64(blocks)), lb.i64(kColumns));
    llvm::Value* k1 = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin,
                                              b.CreateAdd(k0, lb.i64(kColumns)), lb.i64(inner));
    lb.loop(n, [&](llvm::Value* j) {
      llvm::Value* to =
          b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(size)), index_at(j)), lb.i64(inner));
      llvm::Value* from = b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(n)), j), lb.i64(inner));
      lb.loop(
          k0, k1,
          [&](llvm::Value* k) {
            llvm::Value* at = b.CreateAdd(to, k);
            llvm::Value* source = b.CreateAdd(from, k);
            if (integer_add) {
              lb.store(b.CreateAdd(lb.load(element, y, at), lb.load(element, lb.operand(2), source)),
                       y, at);
              return;
            }
            store_f32(lb, out.dtype,
                      b.CreateFAdd(load_f32(lb, out.dtype, y, at),
                                   load_f32(lb, out.dtype, lb.operand(2), source)),
                      y, at);
          },
          /*parallel=*/true);
    });
  });
  return OpLoop{lb.finish(), false, outer * blocks, 1, outer * n * inner, check};
}

} // namespace mstep::xla
