// softmax and log_softmax of f32 along one dim as loops (XlaOpLoops.h),
// computed as the ref kernel (lib/backends/ref/RefNN.cpp) and the cpu
// kernel (lib/backends/cpu/SoftmaxKernel.cpp) do: per lane of the dim,
// m = its maximum, sum = the f64 sum of exp(x - m), then exp(x - m) / sum
// or (x - m) - log(sum) in f64, rounded once to f32. A NaN, a +inf or a
// lane of only -inf makes the lane NaN, as there.
//
// The input is [outer, n, inner] around the dim; lane (o, i) holds
// elements (o * n + k) * inner + i for k < n.
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::optional<OpLoop> emit_softmax_loop(llvm::Module& module, const TraceGraph& graph,
                                        uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if ((nd.op != OpKind::softmax && nd.op != OpKind::log_softmax) || nd.operands.size() != 1 ||
      nd.results.size() != 1)
    return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  if (in.dtype != DType::f32 || nd.results[0] != in || in.numel() == 0) return std::nullopt;
  const int64_t dim = attr_int(nd.attrs, AttrName::dim);
  if (dim < 0 || dim >= in.shape.rank()) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.shape[d];
  for (int64_t d = dim + 1; d < in.shape.rank(); ++d) inner *= in.shape[d];
  const int64_t n = in.shape[dim];
  const bool log = nd.op == OpKind::log_softmax;

  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(nd.op), "_", node), 1, 1);
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* y = lb.result(0);
  lb.loop(outer, [&](llvm::Value* o) {
    lb.loop(inner, [&](llvm::Value* i) {
      auto at = [&](llvm::Value* k) {
        return b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(n)), k), lb.i64(inner)),
                           i);
      };
      // 1. The maximum (a NaN is skipped here and poisons the sum).
      llvm::AllocaInst* max = lb.local(lb.f32(), lb.f32(-std::numeric_limits<float>::infinity()));
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* v = lb.load(lb.f32(), x, at(k));
        lb.set(max, b.CreateSelect(b.CreateFCmpOGT(v, lb.get(max)), v, lb.get(max)));
      });
      llvm::Value* m = lb.to_f64(lb.get(max));
      // 2. The f64 sum of exp(x - m).
      llvm::AllocaInst* sum = lb.local(lb.f64(), lb.f64(0));
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* shifted = b.CreateFSub(lb.to_f64(lb.load(lb.f32(), x, at(k))), m);
        lb.set(sum, b.CreateFAdd(lb.get(sum), lb.call(llvm::Intrinsic::exp, shifted)));
      });
      llvm::Value* total = lb.get(sum);
      llvm::Value* log_total = log ? lb.call(llvm::Intrinsic::log, total) : nullptr;
      // 3. The outputs (an in-place y reads each element before writing it).
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* shifted = b.CreateFSub(lb.to_f64(lb.load(lb.f32(), x, at(k))), m);
        llvm::Value* out = log ? b.CreateFSub(shifted, log_total)
                               : b.CreateFDiv(lb.call(llvm::Intrinsic::exp, shifted), total);
        lb.store(lb.to_f32(out), y, at(k));
      });
    });
  });
  return OpLoop{lb.finish(), false};
}

} // namespace mstep::xla
