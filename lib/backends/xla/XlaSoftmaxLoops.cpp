// softmax and log_softmax of f32, bf16 or f16 along one dim as loops
// (XlaOpLoops.h), computed as the ref kernel (lib/backends/ref/RefNN.cpp)
// and the cpu kernel (lib/backends/cpu/SoftmaxKernel.cpp) do: per lane of
// the dim, m = its maximum, sum = the f64 sum of exp(x - m), then
// exp(x - m) / sum or (x - m) - log(sum) in f64, rounded once to f32 (then
// to bf16, XlaElementTypes.h). A NaN, a +inf or a lane of only -inf makes
// the lane NaN, as there.
//
// The input is [outer, n, inner] around the dim; lane (o, i) holds
// elements (o * n + k) * inner + i for k < n. A contiguous lane (inner 1,
// the usual last dim) is read 16 elements at a time, its maximum and sum
// kept per vector lane and combined at the end of each pass (the cpu
// kernel's row mode); exp is the cpu kernel's f64 vector exp
// (LoopBuilder::exp), inline.
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

namespace {

/// The row mode's lanes.
constexpr int kLanes = 16;

} // namespace

std::optional<OpLoop> emit_softmax_loop(llvm::Module& module, const TraceGraph& graph,
                                        uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if ((nd.op != OpKind::softmax && nd.op != OpKind::log_softmax) || nd.operands.size() != 1 ||
      nd.results.size() != 1)
    return std::nullopt;
  const TensorType& in = graph.type_of(nd.operands[0]);
  if (!is_loop_float(in.dtype) || nd.results[0] != in || in.numel() == 0) return std::nullopt;
  const DType dtype = in.dtype;
  const int64_t dim = attr_int(nd.attrs, AttrName::dim);
  if (dim < 0 || dim >= in.shape.rank()) return std::nullopt;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= in.shape[d];
  for (int64_t d = dim + 1; d < in.shape.rank(); ++d) inner *= in.shape[d];
  const int64_t n = in.shape[dim];
  const bool log = nd.op == OpKind::log_softmax;

  // Rows: the lanes' outer index in row mode, the lanes otherwise; each
  // lane computed as one call computes it.
  LoopBuilder lb(module, absl::StrCat("mstep_xla_", op_name(nd.op), "_", node), 1, 1,
                 LoopBuilder::Rows{});
  const OpLoop row_loop{nullptr, false, outer, 1, in.numel()};
  auto& b = lb.b();
  llvm::Value* x = lb.operand(0);
  llvm::Value* y = lb.result(0);
  const float minus_inf = -std::numeric_limits<float>::infinity();
  if (inner == 1) {
    // Row mode: kLanes elements of the row at a time (masked at its end),
    // the lanes' maxima and sums combined at the end of each pass.
    auto* f32s = llvm::FixedVectorType::get(lb.f32(), kLanes);
    auto* f64s = llvm::FixedVectorType::get(lb.f64(), kLanes);
    llvm::SmallVector<uint64_t> iota_values;
    for (int i = 0; i < kLanes; ++i) iota_values.push_back(i);
    llvm::Value* iota = llvm::ConstantDataVector::get(b.getContext(), iota_values);
    llvm::Type* element = storage_type(b, dtype);
    const int64_t blocks = (n + kLanes - 1) / kLanes;
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* o) {
      llvm::Value* row = b.CreateMul(o, lb.i64(n));
      // The block's lanes inside the row, and its elements (masked-off
      // lanes read `fill`).
      auto block = [&](llvm::Value* q, llvm::Value* fill, llvm::Value*& mask) {
        llvm::Value* first = b.CreateMul(q, lb.i64(kLanes));
        mask = b.CreateICmpSLT(b.CreateAdd(b.CreateVectorSplat(kLanes, first), iota),
                               b.CreateVectorSplat(kLanes, lb.i64(n)));
        llvm::Value* at = b.CreateInBoundsGEP(element, x, b.CreateAdd(row, first));
        return std::make_pair(at, masked_load_f32(b, dtype, kLanes, at, mask, fill));
      };
      // 1. The maximum (NaN skipped; it poisons the sum).
      llvm::AllocaInst* max =
          lb.local(f32s, lb.splat_like(llvm::UndefValue::get(f32s), lb.f32(minus_inf)));
      lb.loop(blocks, [&](llvm::Value* q) {
        llvm::Value* mask = nullptr;
        llvm::Value* v = block(q, b.CreateVectorSplat(kLanes, lb.f32(minus_inf)), mask).second;
        llvm::Value* m = lb.get(max);
        lb.set(max, b.CreateSelect(b.CreateFCmpOGT(v, m), v, m));
      });
      llvm::Value* m = lb.to_f64(b.CreateFPMaxReduce(lb.get(max)));
      llvm::Value* ms = b.CreateVectorSplat(kLanes, m);
      // 2. The f64 sum of exp(x - m), lane by lane.
      llvm::Value* zeros = llvm::Constant::getNullValue(f64s);
      llvm::AllocaInst* sum = lb.local(f64s, zeros);
      lb.loop(blocks, [&](llvm::Value* q) {
        llvm::Value* mask = nullptr;
        llvm::Value* v = block(q, llvm::Constant::getNullValue(f32s), mask).second;
        llvm::Value* e = lb.exp(b.CreateFSub(b.CreateFPExt(v, f64s), ms));
        lb.set(sum, b.CreateFAdd(lb.get(sum), b.CreateSelect(mask, e, zeros)));
      });
      llvm::Value* total = b.CreateFAddReduce(lb.f64(0), lb.get(sum));
      llvm::Value* totals = b.CreateVectorSplat(kLanes, total);
      llvm::Value* log_totals =
          log ? b.CreateVectorSplat(kLanes, lb.call(llvm::Intrinsic::log, total)) : nullptr;
      // 3. The outputs (an in-place y reads each block before writing it).
      lb.loop(blocks, [&](llvm::Value* q) {
        llvm::Value* mask = nullptr;
        auto [at, v] = block(q, llvm::Constant::getNullValue(f32s), mask);
        llvm::Value* shifted = b.CreateFSub(b.CreateFPExt(v, f64s), ms);
        llvm::Value* out =
            log ? b.CreateFSub(shifted, log_totals) : b.CreateFDiv(lb.exp(shifted), totals);
        llvm::Value* to = b.CreateInBoundsGEP(element, y, b.CreatePtrDiff(element, at, x));
        masked_store_f32(b, dtype, b.CreateFPTrunc(out, f32s), to, mask);
      });
    });
    OpLoop loop = row_loop;
    loop.function = lb.finish();
    return loop;
  }
  // Rows: the lanes (o, i) themselves, so a softmax over dim 0 (outer 1)
  // splits too.
  lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* lane) {
    llvm::Value* o = b.CreateSDiv(lane, lb.i64(inner));
    llvm::Value* i = b.CreateSRem(lane, lb.i64(inner));
    {
      auto at = [&](llvm::Value* k) {
        return b.CreateAdd(b.CreateMul(b.CreateAdd(b.CreateMul(o, lb.i64(n)), k), lb.i64(inner)),
                           i);
      };
      // 1. The maximum (a NaN is skipped here and poisons the sum).
      llvm::AllocaInst* max = lb.local(lb.f32(), lb.f32(minus_inf));
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* v = load_f32(lb, dtype, x, at(k));
        lb.set(max, b.CreateSelect(b.CreateFCmpOGT(v, lb.get(max)), v, lb.get(max)));
      });
      llvm::Value* m = lb.to_f64(lb.get(max));
      // 2. The f64 sum of exp(x - m).
      llvm::AllocaInst* sum = lb.local(lb.f64(), lb.f64(0));
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* shifted = b.CreateFSub(lb.to_f64(load_f32(lb, dtype, x, at(k))), m);
        lb.set(sum, b.CreateFAdd(lb.get(sum), lb.exp(shifted)));
      });
      llvm::Value* total = lb.get(sum);
      llvm::Value* log_total = log ? lb.call(llvm::Intrinsic::log, total) : nullptr;
      // 3. The outputs (an in-place y reads each element before writing it).
      lb.loop(n, [&](llvm::Value* k) {
        llvm::Value* shifted = b.CreateFSub(lb.to_f64(load_f32(lb, dtype, x, at(k))), m);
        llvm::Value* out =
            log ? b.CreateFSub(shifted, log_total) : b.CreateFDiv(lb.exp(shifted), total);
        store_f32(lb, dtype, lb.to_f32(out), y, at(k));
      });
    }
  });
  OpLoop loop = row_loop;
  loop.function = lb.finish();
  loop.rows = outer * inner;
  return loop;
}

} // namespace mstep::xla
