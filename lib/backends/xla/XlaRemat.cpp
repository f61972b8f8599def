// The rematerialization pass (XlaRemat.h).
#include "lib/backends/xla/XlaRemat.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "lib/backends/xla/XlaConvShape.h"
#include "lib/backends/xla/XlaLoopScratch.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/Pass.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/MemoryPlan.h"
#include "mstep/runtime/Options.h"

namespace mstep::xla {

namespace {

namespace md = ::mstep::dialect;

/// A value rematerialization may recompute (see the header).
bool is_cheap(mlir::Operation& op, mlir::func::FuncOp func) {
  if (!mlir::isa<md::FusionOp>(op) || op.getNumResults() != 1) return false;
  for (mlir::Value operand : op.getOperands()) {
    auto arg = mlir::dyn_cast<mlir::BlockArgument>(operand);
    if (!arg || arg.getOwner() != &func.getBody().front() ||
        func.getArgAttr(arg.getArgNumber(), "mstep.aliased_result"))
      return false;
  }
  return true;
}

/// The ops that read `value`, in program order (each once). The function's
/// return counts as a reader.
std::vector<mlir::Operation*> readers(mlir::Value value) {
  std::vector<mlir::Operation*> ops;
  for (mlir::Operation* user : value.getUsers())
    if (std::find(ops.begin(), ops.end(), user) == ops.end()) ops.push_back(user);
  std::sort(ops.begin(), ops.end(),
            [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
  return ops;
}

/// Computes `op`'s value right before each of its readers: moves `op` to
/// its first reader and clones it before each later one.
void rematerialize(mlir::Operation* op) {
  const std::vector<mlir::Operation*> ops = readers(op->getResult(0));
  op->moveBefore(ops.front());
  for (size_t i = 1; i < ops.size(); ++i) {
    mlir::OpBuilder b(ops[i]);
    mlir::Operation* copy = b.clone(*op);
    ops[i]->replaceUsesOfWith(op->getResult(0), copy->getResult(0));
  }
}

class RematPass : public mlir::PassWrapper<RematPass, mlir::OperationPass<mlir::func::FuncOp>> {
public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(RematPass)

  explicit RematPass(std::string limit_text) : limit_text_(std::move(limit_text)) {}

  llvm::StringRef getArgument() const override { return "mstep-xla-remat"; }
  llvm::StringRef getDescription() const override {
    return "recompute cheap values to keep the arena under MSTEP_XLA_MEMORY_LIMIT";
  }

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.getBody().empty() || !func.getBody().hasOneBlock()) return;
    absl::StatusOr<int64_t> limit = parse_xla_memory_limit(limit_text_);
    if (!limit.ok()) {
      func.emitError() << std::string(limit.status().message());
      return signalPassFailure();
    }
    mlir::FailureOr<passes::MemoryPlan> plan = passes::plan_memory(func);
    if (mlir::failed(plan)) return signalPassFailure();
    // The arena also holds the loops' scratch (convolutions, a bf16 mask
    // gradient's sums), which recomputing values does not change
    // (lay_out_step).
    absl::StatusOr<TraceGraph> graph = export_trace_graph(func);
    if (!graph.ok()) {
      func.emitError() << std::string(graph.status().message());
      return signalPassFailure();
    }
    const int64_t scratch = loop_scratch_bytes(*graph);
    auto with_scratch = [&](int64_t planned) { return arena_with_conv_scratch(planned, scratch); };
    const int64_t unlimited = with_scratch(plan->arena_bytes);
    func->setAttr("mstep.arena_size_unlimited",
                  mlir::Builder(func.getContext()).getI64IntegerAttr(unlimited));

    // Candidates read after their first reader, largest first.
    std::vector<std::pair<int64_t, mlir::Operation*>> candidates;
    for (mlir::Operation& op : func.getBody().front())
      if (is_cheap(op, func) && readers(op.getResult(0)).size() > 1 &&
          !llvm::any_of(op.getResult(0).getUsers(),
                        [](mlir::Operation* u) { return mlir::isa<mlir::func::ReturnOp>(u); }))
        if (const passes::PlannedValue* v = plan->find(op.getResult(0)))
          candidates.push_back({v->bytes, &op});
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    int64_t arena = unlimited, smallest = unlimited;
    int recomputed = 0;
    for (const auto& [bytes, op] : candidates) {
      if (arena <= *limit) break;
      rematerialize(op);
      ++recomputed;
      plan = passes::plan_memory(func);
      if (mlir::failed(plan)) return signalPassFailure();
      arena = with_scratch(plan->arena_bytes);
      smallest = std::min(smallest, arena);
    }
    std::fprintf(stderr,
                 "mstep xla: arena %lld bytes, %lld bytes under %s=%lld (%d values recomputed)\n",
                 static_cast<long long>(unlimited), static_cast<long long>(arena),
                 kXlaMemoryLimitVariable, static_cast<long long>(*limit), recomputed);
    if (arena > *limit) {
      func.emitError() << kXlaMemoryLimitVariable << "=" << *limit
                       << " bytes cannot be met: the step's arena needs " << unlimited
                       << " bytes, and no less than " << smallest
                       << " with cheap values recomputed; the smallest limit that can be met is "
                       << smallest;
      return signalPassFailure();
    }
  }

private:
  std::string limit_text_;
};

} // namespace

std::unique_ptr<mlir::Pass> create_remat_pass(std::string limit_text) {
  return std::make_unique<RematPass>(std::move(limit_text));
}

} // namespace mstep::xla
