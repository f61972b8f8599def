#include "lib/backends/cpu/ArenaPlan.h"

#include "absl/strings/str_cat.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace mstep::cpu {

absl::StatusOr<ArenaPlan> read_arena_plan(mlir::func::FuncOp step) {
  ArenaPlan plan;
  auto size = step->getAttrOfType<mlir::IntegerAttr>("mstep.arena_size");
  if (!size)
    return absl::InvalidArgumentError(
        "cpu backend: func @step has no memory plan (mstep.arena_size); compile it with the "
        "default pipeline, which runs mstep-plan-memory");
  plan.arena_bytes = size.getInt();
  if (auto align = step->getAttrOfType<mlir::IntegerAttr>("mstep.arena_alignment"))
    plan.alignment = align.getInt();
  for (mlir::Operation& op : step.getBody().front()) {
    if (llvm::isa<mlir::func::ReturnOp>(op)) continue;
    ArenaPlan::OpPlacement placement;
    placement.offsets.assign(op.getNumResults(), -1);
    placement.aliased_arg.assign(op.getNumResults(), -1);
    auto offsets = op.getAttrOfType<mlir::DenseI64ArrayAttr>("mstep.arena_offsets");
    if (!offsets || offsets.size() != static_cast<int64_t>(op.getNumResults()))
      return absl::InvalidArgumentError(
          absl::StrCat("cpu backend: op '", op.getName().getStringRef().str(),
                       "' has no arena placement for each result (mstep.arena_offsets)"));
    auto aliases = op.getAttrOfType<mlir::DenseI64ArrayAttr>("mstep.aliases_arg");
    for (unsigned r = 0; r < op.getNumResults(); ++r) {
      placement.offsets[r] = offsets[r];
      if (offsets[r] >= 0) continue;
      if (!aliases || aliases.size() <= static_cast<int64_t>(r) || aliases[r] < 0)
        return absl::InvalidArgumentError(
            absl::StrCat("cpu backend: result ", r, " of op '", op.getName().getStringRef().str(),
                         "' has neither an arena offset nor a donated argument"));
      placement.aliased_arg[r] = aliases[r];
    }
    plan.ops.push_back(std::move(placement));
  }
  return plan;
}

}  // namespace mstep::cpu
