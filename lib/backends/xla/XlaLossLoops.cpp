// nll_loss over f32, bf16 or f16 log-probs [..., C] and i64 targets as a loop
// (XlaOpLoops.h), with the ref kernel's semantics (lib/backends/ref/
// RefLoss.cpp, as the cpu kernel LossKernels.cpp): loss i =
// -log_probs[i, target[i]], 0 for ignore_index; reduction 0 none, 1 mean
// (over the targets not ignored; 0/0 = NaN when all are), 2 sum, summed in
// f64 and rounded once to f32 (then to bf16, XlaElementTypes.h). (Its
// gradient is traced as ops the step already computes.)
//
// The targets are checked first: one out of range returns 1 before any
// result is written, and the step stops there; the runtime then names the
// target (XlaStepFailure.cpp). Without reduction the losses are a row
// function over the rows (split over the threads when there are many);
// a reduction sums one value per row in row order on one thread.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaLoopBuilder.h"
#include "lib/backends/xla/XlaOpLoops.h"

namespace mstep::xla {

std::optional<OpLoop> emit_loss_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  const GraphNode& nd = graph.nodes[node];
  if (nd.op != OpKind::nll_loss || nd.operands.size() != 2 || nd.results.size() != 1)
    return std::nullopt;
  const TensorType& log_probs = graph.type_of(nd.operands[0]);
  const TensorType& target = graph.type_of(nd.operands[1]);
  const DType dtype = log_probs.dtype;
  if (!is_loop_float(dtype) || nd.results[0].dtype != dtype || target.dtype != DType::i64 ||
      log_probs.shape.rank() < 1)
    return std::nullopt;
  const int64_t classes = log_probs.shape[log_probs.shape.rank() - 1];
  const int64_t rows = target.numel();
  if (rows * classes != log_probs.numel()) return std::nullopt;
  const int64_t ignore_index = attr_int(nd.attrs, AttrName::ignore_index);
  const int64_t reduction = attr_int(nd.attrs, AttrName::reduction);
  if (reduction < 0 || reduction > 2) return std::nullopt;

  const std::string name = absl::StrCat("mstep_xla_nll_loss_", node);
  // 1. Every target in [0, C) or ignored: fails (returns 1) otherwise.
  auto check_targets = [&](LoopBuilder& lb) {
    auto& b = lb.b();
    llvm::Value* ignore = lb.i64(ignore_index);
    llvm::AllocaInst* bad = lb.local(b.getInt1Ty(), b.getFalse());
    lb.loop(rows, [&](llvm::Value* i) {
      llvm::Value* c = lb.load(lb.i64(), lb.operand(1), i);
      llvm::Value* out_of_range =
          b.CreateAnd(b.CreateICmpNE(c, ignore), b.CreateICmpUGE(c, lb.i64(classes)));
      lb.set(bad, b.CreateOr(lb.get(bad), out_of_range));
    });
    lb.fail_if(lb.get(bad));
  };
  // Row i's loss (f64) and whether its target counts.
  auto loss_of = [&](LoopBuilder& lb, llvm::Value* i) {
    auto& b = lb.b();
    llvm::Value* c = lb.load(lb.i64(), lb.operand(1), i);
    llvm::Value* kept = b.CreateICmpNE(c, lb.i64(ignore_index));
    // An ignored row reads its class 0 (in range), then drops it.
    llvm::Value* column = b.CreateSelect(kept, c, lb.i64(0));
    llvm::Value* picked =
        load_f32(lb, dtype, lb.operand(0), b.CreateAdd(b.CreateMul(i, lb.i64(classes)), column));
    return std::make_pair(b.CreateSelect(kept, b.CreateFNeg(lb.to_f64(picked)), lb.f64(0)), kept);
  };
  if (reduction == 0) {
    // 2. A row function over the rows, each writing its own loss, after
    // the check (OpLoop::check).
    LoopBuilder check(module, name + "_check", 2, 1);
    check_targets(check);
    llvm::Function* check_function = check.finish();
    LoopBuilder lb(module, name, 2, 1, LoopBuilder::Rows{});
    lb.loop(lb.row_begin(), lb.row_end(), [&](llvm::Value* i) {
      store_f32(lb, dtype, lb.to_f32(loss_of(lb, i).first), lb.result(0), i);
    });
    return OpLoop{lb.finish(), false, rows, 1, rows, check_function};
  }
  // 2. The sum in row order on one thread: f64 over one value per row, so
  // a thread split would only change its order.
  LoopBuilder lb(module, name, 2, 1);
  auto& b = lb.b();
  check_targets(lb);
  llvm::AllocaInst* total = lb.local(lb.f64(), lb.f64(0));
  llvm::AllocaInst* count = lb.local(lb.i64(), lb.i64(0));
  lb.loop(rows, [&](llvm::Value* i) {
    auto [loss, kept] = loss_of(lb, i);
    lb.set(total, b.CreateFAdd(lb.get(total), loss));
    lb.set(count, b.CreateAdd(lb.get(count), b.CreateZExt(kept, lb.i64())));
  });
  llvm::Value* value = lb.get(total);
  if (reduction == 1) value = b.CreateFDiv(value, b.CreateSIToFP(lb.get(count), lb.f64()));
  store_f32(lb, dtype, lb.to_f32(value), lb.result(0), lb.i64(0));
  return OpLoop{lb.finish(), true};
}

} // namespace mstep::xla
