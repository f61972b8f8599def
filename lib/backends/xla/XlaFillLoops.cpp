// The ops that write a fill value next to (or instead of) their input's
// elements, as loops (XlaOpLoops.h), with the ref kernels' semantics
// (lib/backends/ref/RefShape.cpp, RefCreation.cpp):
// - pad, any dtype: output element o is input element o - before (per dim,
//   torch's pads order, negative pads crop) where that is inside the
//   input, else the value (operand 1, a 0-d tensor);
// - triu / tril, any dtype: element (i, j) of each matrix is kept when
//   j - i >= diagonal (triu) or <= diagonal (tril), else zero bytes;
// - constant (a 0-d host scalar, the value of a pad): the attribute
//   rounded to the dtype as the ref kernel rounds it.
// Elements move as integers of their size. pad and triu/tril are row
// functions (pad over the output's first dim, triu/tril over matrix rows),
// each row written as one call writes it.
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"
#include "mstep/core/HalfTypes.h"

namespace mstep::xla {

namespace {

llvm::Type* bits_of(llvm::LLVMContext& c, DType dtype) {
  return llvm::Type::getIntNTy(c, static_cast<unsigned>(element_size(dtype) * 8));
}

std::optional<OpLoop> emit_pad(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.operands.size() != 2 || nd.results.size() != 1) return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  const TensorType& value = graph.type_of(nd.operands[1]);
  const TensorType& out = nd.results[0];
  const int64_t rank = out.shape.rank();
  if (rank == 0 || in.shape.rank() != rank || in.dtype != out.dtype || value.dtype != out.dtype ||
      value.numel() != 1 || out.numel() == 0)
    return std::nullopt;
  const IntList& pads = attr_ints(nd.attrs, AttrName::pads);
  std::vector<int64_t> before(rank, 0);
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t k = rank - 1 - d; // pads[2k], pads[2k + 1] are dim d's
    if (2 * k < static_cast<int64_t>(pads.size())) before[d] = pads[2 * k];
  }
  const Shape::Dims in_strides = in.shape.strides();
  const Shape::Dims out_strides = out.shape.strides();
  LoopBuilder lb(module, absl::StrCat("mstep_xla_pad_", node), 2, 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Type* element = bits_of(module.getContext(), out.dtype);
  llvm::Value* fill = lb.load(element, lb.operand(1), lb.i64(0));
  const bool empty_input = in.numel() == 0;
  // Nests dims[d..]: o is the output position, at the input position of
  // the clamped coordinates, inside whether every coordinate so far is in
  // the input.
  std::function<void(int64_t, llvm::Value*, llvm::Value*, llvm::Value*)> nest =
      [&](int64_t d, llvm::Value* o, llvm::Value* at, llvm::Value* inside) {
        if (d == rank) {
          if (empty_input) return lb.store(fill, lb.result(0), o);
          lb.store(b.CreateSelect(inside, lb.load(element, lb.operand(0), at), fill),
                   lb.result(0), o);
          return;
        }
        auto body = [&](llvm::Value* k) {
          llvm::Value* source = b.CreateSub(k, lb.i64(before[d]));
          llvm::Value* in_range = b.CreateAnd(b.CreateICmpSGE(source, lb.i64(0)),
                                              b.CreateICmpSLT(source, lb.i64(in.shape[d])));
          // Clamped into the input, so the load is in bounds either way.
          llvm::Value* clamped = b.CreateSelect(in_range, source, lb.i64(0));
          nest(d + 1, b.CreateAdd(o, b.CreateMul(k, lb.i64(out_strides[d]))),
               b.CreateAdd(at, b.CreateMul(clamped, lb.i64(in_strides[d]))),
               b.CreateAnd(inside, in_range));
        };
        if (d == 0)
          lb.loop(lb.row_begin(), lb.row_end(), body);
        else
          lb.loop(out.shape[d], body, /*parallel=*/d == rank - 1);
      };
  nest(0, lb.i64(0), lb.i64(0), b.getTrue());
  return OpLoop{lb.finish(), false, out.shape[0], 1, out.numel()};
}

std::optional<OpLoop> emit_triangle(llvm::Module& module, const TraceGraph& graph,
                                    uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.operands.size() != 1 || nd.results.size() != 1) return std::nullopt;
  const TensorType& out = nd.results[0];
  if (out.shape.rank() < 2 || graph.type_of(nd.operands[0]) != out || out.numel() == 0)
    return std::nullopt;
  const bool upper = nd.op == OpKind::triu;
  const int64_t diagonal = attr_int(nd.attrs, AttrName::diagonal);
  const int64_t rows = out.shape[out.shape.rank() - 2];
  const int64_t cols = out.shape[out.shape.rank() - 1];
  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(nd.op), "_", node), 1, 1,
                 LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Type* element = bits_of(module.getContext(), out.dtype);
  llvm::Value* zero = llvm::ConstantInt::get(element, 0);
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* row) { // (matrix, i)
    llvm::Value* i = b.CreateSRem(row, lb.i64(rows));
    llvm::Value* first = b.CreateMul(row, lb.i64(cols));
    lb.loop(
        cols,
        [&](llvm::Value* j) {
          llvm::Value* offset = b.CreateSub(j, i);
          llvm::Value* keep = upper ? b.CreateICmpSGE(offset, lb.i64(diagonal))
                                    : b.CreateICmpSLE(offset, lb.i64(diagonal));
          llvm::Value* at = b.CreateAdd(first, j);
          lb.store(b.CreateSelect(keep, lb.load(element, lb.operand(0), at), zero), lb.result(0),
                   at);
        },
        /*parallel=*/true);
  });
  return OpLoop{lb.finish(), false, out.numel() / cols, 1, out.numel()};
}

/// The bytes of `v` rounded to `dtype` (the ref's static_cast through the
/// compute type), or false for a dtype this does not write.
bool constant_bytes(double v, DType dtype, uint64_t& bits) {
  bits = 0;
  switch (dtype) {
  case DType::f32: {
    const float f = static_cast<float>(v);
    std::memcpy(&bits, &f, sizeof f);
    return true;
  }
  case DType::f64: std::memcpy(&bits, &v, sizeof v); return true;
  case DType::i64: bits = static_cast<uint64_t>(static_cast<int64_t>(v)); return true;
  case DType::i32:
    bits = static_cast<uint32_t>(static_cast<int32_t>(v));
    return true;
  case DType::boolean: bits = v != 0; return true;
  case DType::bf16: bits = BFloat16(static_cast<float>(v)).bits; return true;
  case DType::f16: {
    const Float16 h(static_cast<float>(v));
    uint16_t u;
    std::memcpy(&u, &h, sizeof u);
    bits = u;
    return true;
  }
  default: return false;
  }
}

std::optional<OpLoop> emit_constant(llvm::Module& module, const TraceGraph& graph,
                                    uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.results.size() != 1 || nd.results[0].numel() != 1) return std::nullopt;
  uint64_t bits = 0;
  if (!constant_bytes(attr_double(nd.attrs, AttrName::value), nd.results[0].dtype, bits))
    return std::nullopt;
  LoopBuilder lb(module, absl::StrCat("mstep_xla_constant_", node), 0, 1);
  lb.b().CreateStore(llvm::ConstantInt::get(bits_of(module.getContext(), nd.results[0].dtype), bits),
                     lb.result(0));
  return OpLoop{lb.finish(), false};
}

} // namespace

std::optional<OpLoop> emit_fill_loop(llvm::Module& module, const TraceGraph& graph,
                                     uint32_t node) {
  switch (graph.nodes[node].op) {
  case OpKind::pad: return emit_pad(module, graph, node);
  case OpKind::triu:
  case OpKind::tril: return emit_triangle(module, graph, node);
  case OpKind::constant: return emit_constant(module, graph, node);
  default: return std::nullopt;
  }
}

} // namespace mstep::xla
