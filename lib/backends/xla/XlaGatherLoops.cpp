// gather (any dtype) and scatter_add (f32, bf16, f16, f64, i64, i32) with i64 or i32
// indices as loops (XlaOpLoops.h), with the ref kernels' semantics
// (lib/backends/ref/RefShape.cpp, RefScatter.cpp): the index has the
// input's rank; at each index position p, gather reads the input at p with
// dim `dim` replaced by index[p]; scatter_add starts from a copy of the
// input and adds src at p (src's own strides) into the output at p with
// dim `dim` replaced by index[p], in the index's row-major order, floats in
// their own precision (f32 + f32 rounded to f32, as the ref's add; bf16
// and f16 added in f32 and rounded to their dtype).
//
// Every index is checked to be in [0, size) first (OpLoop::check, which
// for scatter_add then copies the input): one that is not stops the step
// before anything is written, and the runtime names it
// (XlaStepFailure.cpp). The rest is a row function over one dim of the
// index other than `dim`: positions that differ there write different
// outputs (scatter_add's duplicates differ only along `dim`, which each row
// walks in order), so the split over threads changes no result.
#include <algorithm>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

Shape::Dims strides_of(const Shape::Dims& shape) {
  Shape::Dims strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The index element at `at`, as i64.
llvm::Value* load_index(LoopBuilder& lb, DType dtype, llvm::Value* at) {
  llvm::Type* type = dtype == DType::i64 ? lb.i64() : lb.b().getInt32Ty();
  return lb.b().CreateSExt(lb.load(type, lb.operand(1), at), lb.i64());
}

} // namespace

llvm::Function* emit_index_check(llvm::Module& module, const std::string& name,
                                 size_t operands, DType index_dtype, int64_t count, int64_t size,
                                 int64_t copy_bytes) {
  LoopBuilder lb(module, name + "_check", operands, 1);
  auto& b = lb.b();
  llvm::AllocaInst* bad = lb.local(b.getInt1Ty(), b.getFalse());
  lb.loop(count, [&](llvm::Value* j) {
    lb.set(bad, b.CreateOr(lb.get(bad),
                           b.CreateICmpUGE(load_index(lb, index_dtype, j), lb.i64(size))));
  });
  lb.fail_if(lb.get(bad));
  if (copy_bytes > 0)
    b.CreateMemMove(lb.result(0), llvm::MaybeAlign(1), lb.operand(0), llvm::MaybeAlign(1),
                    copy_bytes);
  return lb.finish();
}

std::optional<OpLoop> emit_gather_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  const OpKind op = nd.op;
  if (op != OpKind::gather && op != OpKind::scatter_add) return std::nullopt;
  const bool scatter = op == OpKind::scatter_add;
  if (nd.operands.size() != (scatter ? 3u : 2u) || nd.results.size() != 1) return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  const TensorType& index = graph.type_of(nd.operands[1]);
  const TensorType& out = nd.results[0];
  if (index.dtype != DType::i64 && index.dtype != DType::i32) return std::nullopt;
  if (in.dtype != out.dtype || index.numel() == 0 || in.numel() == 0) return std::nullopt;
  // A 0-d input acts as a [1] tensor (the ref's gather).
  Shape::Dims in_shape(in.shape.dims().begin(), in.shape.dims().end());
  Shape::Dims index_shape(index.shape.dims().begin(), index.shape.dims().end());
  if (in_shape.empty()) in_shape.push_back(1);
  if (index_shape.empty()) index_shape.push_back(1);
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  if (static_cast<int64_t>(index_shape.size()) != rank) return std::nullopt;
  const int64_t dim = attr_int(nd.attrs, AttrName::dim);
  if (dim < 0 || dim >= rank) return std::nullopt;
  llvm::Type* element = nullptr;
  llvm::LLVMContext& c = module.getContext();
  Shape::Dims src_strides;
  if (scatter) {
    const TensorType& src = graph.type_of(nd.operands[2]);
    if (src.dtype != out.dtype || in != out || src.shape.rank() != rank) return std::nullopt;
    for (int64_t d = 0; d < rank; ++d)
      if (index_shape[d] > src.shape[d]) return std::nullopt;
    switch (out.dtype) {
    case DType::f32: element = llvm::Type::getFloatTy(c); break;
    case DType::bf16:
    case DType::f16: element = llvm::Type::getInt16Ty(c); break; // as f32, below
    case DType::f64: element = llvm::Type::getDoubleTy(c); break;
    case DType::i64: element = llvm::Type::getInt64Ty(c); break;
    case DType::i32: element = llvm::Type::getInt32Ty(c); break;
    default: return std::nullopt;
    }
    src_strides = src.shape.strides();
  } else {
    if (out.shape != index.shape) return std::nullopt;
    element = llvm::Type::getIntNTy(c, static_cast<unsigned>(element_size(out.dtype) * 8));
  }
  const Shape::Dims in_strides = strides_of(in_shape);
  const Shape::Dims index_strides = strides_of(index_shape);

  const std::string name = absl::StrCat("mstep_xla_", op_name(op), "_", node);
  llvm::Function* check =
      emit_index_check(module, name, nd.operands.size(), index.dtype, index.numel(),
                       in_shape[dim], scatter ? static_cast<int64_t>(out.bytes()) : 0);
  // The rows: the outermost dim other than `dim`; a rank-1 index is one
  // row. Within a row the other dims nest in order.
  int64_t row_dim = -1;
  for (int64_t d = 0; d < rank && row_dim < 0; ++d)
    if (d != dim) row_dim = d;
  std::vector<int64_t> inner_dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != row_dim) inner_dims.push_back(d);

  LoopBuilder lb(module, name, nd.operands.size(), 1, LoopBuilder::Rows{});
  auto& b = lb.b();
  // Nests inner_dims[level..]: p is the position in the index (and
  // gather's output), `at` the input's with dim `dim` left out, s src's.
  std::function<void(size_t, llvm::Value*, llvm::Value*, llvm::Value*)> nest =
      [&](size_t level, llvm::Value* p, llvm::Value* at, llvm::Value* s) {
        if (level == inner_dims.size()) {
          llvm::Value* moved = b.CreateAdd(
              at, b.CreateMul(load_index(lb, index.dtype, p), lb.i64(in_strides[dim])));
          if (!scatter) {
            lb.store(lb.load(element, lb.operand(0), moved), lb.result(0), p);
            return;
          }
          if (is_half(out.dtype)) {
            store_f32(lb, out.dtype,
                      b.CreateFAdd(load_f32(lb, out.dtype, lb.result(0), moved),
                                   load_f32(lb, out.dtype, lb.operand(2), s)),
                      lb.result(0), moved);
            return;
          }
          llvm::Value* x = lb.load(element, lb.result(0), moved);
          llvm::Value* y = lb.load(element, lb.operand(2), s);
          lb.store(element->isFloatingPointTy() ? b.CreateFAdd(x, y) : b.CreateAdd(x, y),
                   lb.result(0), moved);
          return;
        }
        const int64_t d = inner_dims[level];
        lb.loop(index_shape[d], [&](llvm::Value* k) {
          nest(level + 1, b.CreateAdd(p, b.CreateMul(k, lb.i64(index_strides[d]))),
               d == dim ? at : b.CreateAdd(at, b.CreateMul(k, lb.i64(in_strides[d]))),
               scatter ? b.CreateAdd(s, b.CreateMul(k, lb.i64(src_strides[d]))) : s);
        });
      };
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* k) {
    if (row_dim < 0) return nest(0, lb.i64(0), lb.i64(0), lb.i64(0));
    nest(0, b.CreateMul(k, lb.i64(index_strides[row_dim])),
         b.CreateMul(k, lb.i64(in_strides[row_dim])),
         scatter ? b.CreateMul(k, lb.i64(src_strides[row_dim])) : lb.i64(0));
  });
  OpLoop loop{lb.finish(), false, row_dim < 0 ? 1 : index_shape[row_dim], 1, index.numel()};
  loop.check = check;
  return loop;
}

} // namespace mstep::xla
