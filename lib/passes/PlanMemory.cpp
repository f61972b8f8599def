// PlanMemoryPass (mstep-plan-memory): runs plan_memory (MemoryPlan.cpp) on
// each function, checks the plan, and writes it onto the IR as discardable
// attributes (the scheme is in Passes.td and docs/backend-contract.md).
#include "mstep/passes/MemoryPlan.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_PLANMEMORY
#include "mstep/passes/Passes.h.inc"

namespace {

/// Writes `plan` onto `func`: per op, one entry per result in
/// `mstep.arena_offsets` (-1 for a result written into a donated argument),
/// and, only when some result uses them, `mstep.in_place` (operand number
/// or -1) and `mstep.aliases_arg` (argument number or -1); on the function,
/// `mstep.arena_size`, `mstep.liveness_bound` and `mstep.arena_alignment`.
void annotate(mlir::func::FuncOp func, const MemoryPlan& plan) {
  mlir::Builder builder(func.getContext());
  auto setOrRemove = [&](mlir::Operation* op, llvm::StringRef name,
                         llvm::ArrayRef<int64_t> entries) {
    if (llvm::any_of(entries, [](int64_t entry) { return entry >= 0; }))
      op->setAttr(name, builder.getDenseI64ArrayAttr(entries));
    else
      op->removeAttr(name);
  };
  size_t next = 0; // plan.values is in program order, results in order
  for (mlir::Operation& op : func.getBody().front()) {
    if (op.getNumResults() == 0) continue;
    llvm::SmallVector<int64_t> offsets, inPlace, aliasesArg;
    for (unsigned i = 0; i < op.getNumResults(); ++i, ++next) {
      const PlannedValue& planned = plan.values[next];
      offsets.push_back(planned.arena_offset);
      inPlace.push_back(planned.in_place_operand);
      aliasesArg.push_back(planned.aliased_arg);
    }
    op.setAttr("mstep.arena_offsets", builder.getDenseI64ArrayAttr(offsets));
    setOrRemove(&op, "mstep.in_place", inPlace);
    setOrRemove(&op, "mstep.aliases_arg", aliasesArg);
  }
  func->setAttr("mstep.arena_size", builder.getI64IntegerAttr(plan.arena_bytes));
  func->setAttr("mstep.liveness_bound", builder.getI64IntegerAttr(plan.liveness_bound_bytes));
  func->setAttr("mstep.arena_alignment", builder.getI64IntegerAttr(plan.alignment));
}

struct PlanMemoryPass : impl::PlanMemoryBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal()) return;
    mlir::FailureOr<MemoryPlan> plan = plan_memory(func, alignment);
    if (failed(plan) || failed(verify_memory_plan(*plan, func))) return signalPassFailure();
    annotate(func, *plan);
    arenaBytes += plan->arena_bytes;
    livenessBoundBytes += plan->liveness_bound_bytes;
    inPlaceResults += plan->num_in_place;
    donatedResults += plan->num_aliased_args;
    markAllAnalysesPreserved(); // only discardable attributes changed
  }
};

} // namespace
} // namespace mstep::passes
