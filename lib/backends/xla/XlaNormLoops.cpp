// f32, bf16 and f16 layer_norm and rms_norm as loops (XlaOpLoops.h), computed
// as the ref kernels (lib/backends/ref/RefNN.cpp) do: the input as rows of
// the trailing `normalized_ndim` dims; per row in f64, layer_norm takes the
// mean and the biased variance in two passes and writes
// (x - mean) * (1 / sqrt(var + eps)) * weight + bias, rms_norm writes
// x * (1 / sqrt(mean(x^2) + eps)) * weight, each rounded once to f32
// (then to bf16, XlaElementTypes.h; weight and bias of the input's dtype).
// (Their gradients are traced as ops the step already computes.)
#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::optional<OpLoop> emit_norm_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  const OpKind op = nd.op;
  if ((op != OpKind::layer_norm && op != OpKind::rms_norm) || nd.results.size() != 1 ||
      nd.operands.empty())
    return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  const DType dtype = in.dtype;
  if (!is_loop_float(dtype) || nd.results[0] != in || in.numel() == 0) return std::nullopt;
  const bool has_weight = attr_int(nd.attrs, AttrName::has_weight) != 0;
  const bool has_bias = op == OpKind::layer_norm && attr_int(nd.attrs, AttrName::has_bias) != 0;
  if (nd.operands.size() != static_cast<size_t>(1 + has_weight + has_bias)) return std::nullopt;
  for (size_t i = 1; i < nd.operands.size(); ++i)
    if (graph.type_of(nd.operands[i]).dtype != dtype) return std::nullopt;
  const int64_t normalized = attr_int(nd.attrs, AttrName::normalized_ndim);
  if (normalized < 0 || normalized > in.shape.rank()) return std::nullopt;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < in.shape.rank(); ++d)
    (d < in.shape.rank() - normalized ? rows : cols) *= in.shape[d];
  const double eps = attr_double(nd.attrs, AttrName::eps);

  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(op), "_", node), nd.operands.size(), 1,
                 LoopBuilder::Rows{});
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* w = has_weight ? lb.operand(1) : nullptr;
  llvm::Value* bias = has_bias ? lb.operand(has_weight ? 2 : 1) : nullptr;
  llvm::Value* y = lb.result(0);
  llvm::Value* count = lb.f64(static_cast<double>(cols));
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* r) {
    llvm::Value* base = b.CreateMul(r, lb.i64(cols));
    auto element = [&](llvm::Value* c) {
      return lb.to_f64(load_f32(lb, dtype, x, b.CreateAdd(base, c)));
    };
    llvm::Value* center = lb.f64(0);
    llvm::AllocaInst* sum = lb.local(lb.f64(), lb.f64(0));
    if (op == OpKind::layer_norm) {
      lb.loop(cols, [&](llvm::Value* c) { lb.set(sum, b.CreateFAdd(lb.get(sum), element(c))); });
      center = b.CreateFDiv(lb.get(sum), count);
      lb.set(sum, lb.f64(0));
    }
    lb.loop(cols, [&](llvm::Value* c) {
      llvm::Value* d = b.CreateFSub(element(c), center);
      lb.set(sum, b.CreateFAdd(lb.get(sum), b.CreateFMul(d, d)));
    });
    llvm::Value* scale = b.CreateFDiv(
        lb.f64(1.0), lb.call(llvm::Intrinsic::sqrt,
                             b.CreateFAdd(b.CreateFDiv(lb.get(sum), count), lb.f64(eps))));
    lb.loop(
        cols,
        [&](llvm::Value* c) {
          llvm::Value* v = b.CreateFMul(b.CreateFSub(element(c), center), scale);
          if (w) v = b.CreateFMul(v, lb.to_f64(load_f32(lb, dtype, w, c)));
          if (bias) v = b.CreateFAdd(v, lb.to_f64(load_f32(lb, dtype, bias, c)));
          store_f32(lb, dtype, lb.to_f32(v), y, b.CreateAdd(base, c));
        },
        /*parallel=*/true);
  });
  return OpLoop{lb.finish(), false, rows, 1, in.numel()};
}

} // namespace mstep::xla
