// mstep-fuse-optimizer: replaces the per-parameter update chains that
// lib/api/optim records (and the clip_grad_norm_ before them) with one
// mstep.multi_tensor_update per update rule. See Passes.td.
//
// 1. Match each parameter's chain (lib/passes/optimizer/UpdateChains.h):
//    a parameter argument updated in place, its state arguments and step
//    counter, its gradient and its hyperparameters.
// 2. Group the chains by rule and hyperparameter values; rules that count
//    steps without reading them take the step counters advanced on their
//    own (one per chain).
// 3. Fold the clip_grad_norm_ whose clipped gradients are exactly a
//    group's gradients into that group.
// 4. Build one op per group after the last of its operands, redirect the
//    chains' outputs to its results and erase the chains. A group whose
//    outputs are read before that point is left as it is. One group per
//    round, matching afresh after each.
#include <algorithm>
#include <map>

#include "lib/passes/optimizer/UpdateChains.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_FUSEOPTIMIZER
#include "mstep/passes/Passes.h.inc"

namespace {

using namespace optimizer;

/// Chains with one rule and the same hyperparameter values: one fused op.
struct UpdateGroup {
  RuleVariant variant;
  std::array<mlir::Value, kNumHypers> hypers;
  std::vector<UpdateChain> chains;
};

std::vector<UpdateGroup> groupChains(std::vector<UpdateChain> chains) {
  std::vector<UpdateGroup> groups;
  for (UpdateChain& chain : chains) {
    auto same = [&](const UpdateGroup& g) {
      return g.variant == chain.variant && g.hypers == chain.hypers;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end())
      it = groups.insert(groups.end(), UpdateGroup{chain.variant, chain.hypers, {}});
    it->chains.push_back(std::move(chain));
  }
  return groups;
}

/// Gives every chain whose rule counts steps without reading them (the
/// step is then advanced in a chain of its own) one such counter, in
/// argument order: each counter is only ever advanced by one, so which
/// goes with which parameter does not change any value. Drops the groups
/// left without enough counters.
void assignStepCounters(const FunctionFacts& facts, std::vector<UpdateGroup>& groups) {
  llvm::DenseSet<mlir::Value> taken;
  for (const UpdateGroup& g : groups)
    for (const UpdateChain& c : g.chains)
      if (c.step) taken.insert(c.step);
  std::vector<std::pair<mlir::Value, mlir::Value>> counters; // (step, advanced)
  for (mlir::BlockArgument arg : facts.func().getBody().front().getArguments())
    if (auto next = advancedOnlyStep(facts, arg); next && !taken.contains(arg))
      counters.emplace_back(arg, *next);
  size_t next = 0;
  std::vector<UpdateGroup> kept;
  for (UpdateGroup& g : groups) {
    if (g.variant.countsSteps() && !g.variant.readsStep()) {
      if (counters.size() - next < g.chains.size()) continue;
      for (UpdateChain& c : g.chains) {
        std::tie(c.step, c.newStep) = counters[next++];
        c.ops.insert(c.newStep.getDefiningOp());
      }
    }
    kept.push_back(std::move(g));
  }
  groups = std::move(kept);
}

struct FuseOptimizerPass : impl::FuseOptimizerBase<FuseOptimizerPass> {
  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.getBody().empty()) return;
    lastUpdate_ = nullptr;
    // One group per round: fusing a group erases ops, so the next round
    // matches the chains left afresh (no stale values).
    while (fuseOneGroup(func)) {
    }
  }

  /// Matches every chain and fuses the first group that can be fused.
  bool fuseOneGroup(mlir::func::FuncOp func) {
    FunctionFacts facts(func);
    std::vector<UpdateChain> chains;
    for (mlir::BlockArgument arg : func.getBody().front().getArguments())
      if (std::optional<UpdateChain> chain = matchUpdateChain(facts, arg))
        chains.push_back(std::move(*chain));
    std::vector<UpdateGroup> groups = groupChains(std::move(chains));
    assignStepCounters(facts, groups);
    for (UpdateGroup& group : groups) {
      llvm::SmallVector<mlir::Value> grads;
      for (const UpdateChain& c : group.chains) grads.push_back(c.grad);
      std::optional<ClipChain> clip = matchClipChain(grads);
      if (fuse(func, group, clip ? &*clip : nullptr)) {
        ++numFusedOps;
        numFusedParams += group.chains.size();
        if (clip) ++numFoldedClips;
        return true;
      }
    }
    return false;
  }

  /// Builds the fused op of `group` (with `clip` folded in when given) and
  /// replaces the chains; false, with the IR unchanged, when an output of
  /// the chains is read before the op's operands are all available.
  bool fuse(mlir::func::FuncOp func, UpdateGroup& group, const ClipChain* clip);

  mlir::Operation* lastUpdate_ = nullptr; // the last op fuse() built in this function
};

bool FuseOptimizerPass::fuse(mlir::func::FuncOp func, UpdateGroup& group, const ClipChain* clip) {
  mlir::Block& body = func.getBody().front();
  const RuleVariant& v = group.variant;
  // 1. Operand order: the clip's (its norms are stacked in that order).
  std::vector<const UpdateChain*> chains;
  for (const UpdateChain& c : group.chains) chains.push_back(&c);
  if (clip)
    for (size_t i = 0; i < chains.size(); ++i)
      chains[i] = &*llvm::find_if(
          group.chains, [&](const UpdateChain& c) { return c.grad == clip->clippedGrads[i]; });
  llvm::SmallVector<mlir::Value> params, grads, states, steps;
  llvm::SmallVector<mlir::Type> stateTypes;
  for (size_t i = 0; i < chains.size(); ++i) {
    params.push_back(chains[i]->param);
    grads.push_back(clip ? clip->rawGrads[i] : chains[i]->grad);
    if (v.countsSteps()) steps.push_back(chains[i]->step);
  }
  for (int s = 0; s < v.stateSlots(); ++s)
    for (const UpdateChain* c : chains) {
      states.push_back(c->states[s]);
      stateTypes.push_back(c->states[s].getType());
    }
  auto hyper = [&](Hyper h) { return v.takes(h) ? group.hypers[static_cast<int>(h)] : nullptr; };

  // 2. The ops that disappear, and whether the clipped gradients are read
  //    by anything else (then the fused op returns them).
  llvm::SetVector<mlir::Operation*> doomed;
  for (const UpdateChain* c : chains) doomed.insert(c->ops.begin(), c->ops.end());
  bool returnClipped = false;
  if (clip) {
    doomed.insert(clip->ops.begin(), clip->ops.end());
    for (mlir::Value g : clip->clippedGrads)
      returnClipped |=
          !llvm::all_of(g.getUsers(), [&](mlir::Operation* u) { return doomed.contains(u); });
  }

  // 3. The op, right after the last of its operands.
  llvm::SmallVector<mlir::Value> operands(params);
  llvm::append_range(operands, grads);
  llvm::append_range(operands, states);
  llvm::append_range(operands, steps);
  llvm::append_range(operands, group.hypers);
  mlir::Operation* last = lastUpdate_; // ops of several groups keep their order
  for (mlir::Value operand : operands)
    if (mlir::Operation* def = operand ? operand.getDefiningOp() : nullptr)
      if (!last || last->isBeforeInBlock(def)) last = def;
  mlir::OpBuilder builder(func.getContext());
  if (last)
    builder.setInsertionPointAfter(last);
  else
    builder.setInsertionPointToStart(&body);
  mlir::TypeRange paramTypes = mlir::ValueRange(params).getTypes();
  auto update = builder.create<dialect::MultiTensorUpdateOp>(
      chains.front()->newParam.getLoc(), paramTypes, stateTypes, mlir::ValueRange(steps).getTypes(),
      returnClipped ? mlir::TypeRange(mlir::ValueRange(grads)) : mlir::TypeRange{},
      clip ? clip->total.getType() : mlir::Type{}, v.kind, params, grads, states, steps,
      hyper(Hyper::lr), hyper(Hyper::momentum), hyper(Hyper::dampening), hyper(Hyper::beta1),
      hyper(Hyper::beta2), hyper(Hyper::rho), hyper(Hyper::eps), hyper(Hyper::weight_decay),
      v.nesterov, v.amsgrad, /*maximize=*/false,
      clip ? builder.getF64FloatAttr(clip->maxNorm) : mlir::FloatAttr{},
      llvm::APFloat(clip ? clip->normType : 2.0));

  // 4. What each result replaces.
  std::vector<std::pair<mlir::Value, mlir::Value>> replaced;
  for (size_t i = 0; i < chains.size(); ++i) {
    replaced.emplace_back(chains[i]->newParam, update.getNewParams()[i]);
    if (v.countsSteps()) replaced.emplace_back(chains[i]->newStep, update.getNewSteps()[i]);
    for (int s = 0; s < v.stateSlots(); ++s)
      replaced.emplace_back(chains[i]->newStates[s], update.getNewStates()[s * chains.size() + i]);
    if (returnClipped) replaced.emplace_back(clip->clippedGrads[i], update.getClippedGrads()[i]);
  }
  if (clip) replaced.emplace_back(clip->total, update.getTotalGradNorm());
  auto survives = [&](mlir::OpOperand& use) { return !doomed.contains(use.getOwner()); };
  for (auto& [from, to] : replaced)
    for (mlir::OpOperand& use : from.getUses())
      if (survives(use) && !update->isBeforeInBlock(body.findAncestorOpInBlock(*use.getOwner()))) {
        update->erase();
        return false;
      }
  for (auto& [from, to] : replaced) from.replaceUsesWithIf(to, survives);

  // 5. Erase the chains (users before producers), and the constants they
  //    leave unused.
  for (size_t i = 0; i < doomed.size(); ++i) // grows: full(constant)
    for (mlir::Value operand : doomed[i]->getOperands())
      if (auto def = operand.getDefiningOp();
          def && llvm::isa<dialect::ConstantOp, dialect::FullOp>(def))
        doomed.insert(def);
  std::vector<mlir::Operation*> order(doomed.begin(), doomed.end());
  std::sort(order.begin(), order.end(),
            [](mlir::Operation* a, mlir::Operation* b) { return b->isBeforeInBlock(a); });
  for (mlir::Operation* op : order)
    if (op->use_empty()) op->erase();
  lastUpdate_ = update;
  return true;
}

} // namespace
} // namespace mstep::passes
