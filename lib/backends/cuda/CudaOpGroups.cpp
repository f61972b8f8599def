// Sets of ops lowered as one kernel: see CudaOpGroups.h.
#include "lib/backends/cuda/CudaOpGroups.h"

#include "lib/backends/cuda/CudaViews.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/ir/dialect/ScalarForms.h"

namespace mstep::cuda {

namespace {

using namespace mlir;

/// Ops a set may not move past (their order is part of the step's
/// contract with other ranks or with the outside world).
bool pinned(Operation* op) {
  return isa<dialect::AllReduceOp, dialect::AllGatherOp, dialect::BroadcastOp,
             dialect::ReduceScatterOp, dialect::CustomOp>(op);
}

} // namespace

bool may_join_op_group(Operation* op, Block& body, const CudaViews& views) {
  if (op->getBlock() != &body || views.launches_nothing(op)) return false;
  return llvm::none_of(op->getResults(), [&](Value result) {
    return views.view_of(result) || views.attention_strides(result);
  });
}

bool elementwise_over(Operation* op, function_ref<bool(Value)> fits,
                      function_ref<bool(Value)> fits_result) {
  if (op->getNumResults() == 0 || !llvm::all_of(op->getOperands(), fits) ||
      !llvm::all_of(op->getResults(), fits_result))
    return false;
  if (auto fusion = dyn_cast<dialect::FusionOp>(op)) {
    for (Operation& inner : fusion.getBody().front().without_terminator())
      if (!dialect::hasScalarForm(&inner) || !llvm::all_of(inner.getResults(), fits)) return false;
    return true;
  }
  return dialect::hasScalarForm(op) && !isa<dialect::ConstantOp, dialect::FullOp>(op);
}

bool elementwise_over_one_shape(Operation* op) {
  if (op->getNumResults() == 0) return false;
  auto shape = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!shape || !shape.hasStaticShape()) return false;
  auto fits = [&](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape() &&
           (type.getShape() == shape.getShape() || type.getNumElements() == 1);
  };
  auto fits_result = [&](Value r) {
    return cast<RankedTensorType>(r.getType()).getShape() == shape.getShape();
  };
  return elementwise_over(op, fits, fits_result);
}

bool wrap_op_group(Block& body, StringRef attr, Attribute value,
                   const std::vector<Operation*>& members) {
  llvm::DenseSet<Operation*> in_group(members.begin(), members.end());
  Operation* last = members.back();
  // Ops between the first member and the last that depend on the set.
  llvm::DenseSet<Operation*> moved_set;
  std::vector<Operation*> moved;
  for (Operation* op = members.front()->getNextNode(); op != last; op = op->getNextNode()) {
    if (in_group.contains(op)) continue;
    bool depends = false;
    op->walk([&](Operation* inner) {
      for (Value operand : inner->getOperands())
        if (Operation* producer = operand.getDefiningOp())
          if (Operation* outer = body.findAncestorOpInBlock(*producer);
              outer && (in_group.contains(outer) || moved_set.contains(outer)))
            depends = true;
    });
    if (!depends) continue;
    if (pinned(op)) return false;
    moved_set.insert(op);
    moved.push_back(op);
  }
  // The values read after the set: its results.
  SmallVector<Value> outputs;
  for (Operation* member : members)
    for (Value result : member->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation* user) {
            Operation* outer = body.findAncestorOpInBlock(*user);
            return !outer || !in_group.contains(outer);
          }))
        outputs.push_back(result);
  OpBuilder b(last);
  SmallVector<Type> types;
  for (Value output : outputs) types.push_back(output.getType());
  auto group = b.create<scf::ExecuteRegionOp>(last->getLoc(), types);
  group->setAttr(attr, value);
  Block* inner = b.createBlock(&group.getRegion());
  for (Operation* member : members) member->moveBefore(inner, inner->end());
  b.setInsertionPointToEnd(inner);
  b.create<scf::YieldOp>(last->getLoc(), outputs);
  for (auto [output, result] : llvm::zip(outputs, group.getResults()))
    output.replaceUsesWithIf(result, [&](OpOperand& use) {
      return !group->isAncestor(use.getOwner());
    });
  Operation* after = group;
  for (Operation* op : moved) {
    op->moveAfter(after);
    after = op;
  }
  return true;
}

std::vector<std::vector<Operation*>> independent_runs(
    Block& body, const CudaViews& views, const std::function<bool(Operation*)>& member,
    const std::function<bool(Operation*, Operation*)>& same_run, size_t max_members,
    size_t max_params) {
  std::vector<std::vector<Operation*>> runs(1);
  llvm::DenseSet<Value> tainted;
  size_t params = 0;
  auto close = [&] {
    if (!runs.back().empty()) runs.emplace_back();
    tainted.clear();
    params = 0;
  };
  for (Operation& op : body) {
    bool reads = false;
    op.walk([&](Operation* inner) {
      for (Value operand : inner->getOperands()) reads |= tainted.contains(operand);
    });
    if (reads && views.launches_nothing(&op)) {
      for (Value result : op.getResults()) tainted.insert(result);
      continue;
    }
    if (reads) close();
    if (!member(&op)) continue;
    const size_t op_params = op.getNumOperands() + op.getNumResults();
    if (runs.back().size() == max_members || params + op_params > max_params ||
        (!runs.back().empty() && !same_run(runs.back().front(), &op)))
      close();
    runs.back().push_back(&op);
    params += op_params;
    for (Value result : op.getResults()) tainted.insert(result);
  }
  if (runs.back().empty()) runs.pop_back();
  return runs;
}

SmallVector<Value> op_group_inputs(Operation* group) {
  SmallVector<Value> inputs;
  llvm::DenseSet<Value> seen;
  group->walk([&](Operation* op) {
    for (Value operand : op->getOperands()) {
      Operation* producer = operand.getDefiningOp();
      const bool outside = producer ? !group->isAncestor(producer)
                                    : !group->isAncestor(operand.getParentBlock()->getParentOp());
      if (outside && seen.insert(operand).second) inputs.push_back(operand);
    }
  });
  return inputs;
}

} // namespace mstep::cuda
