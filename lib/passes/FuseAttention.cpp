// FuseAttention: the mstep-fuse-attention pass (see Passes.td). One
// rewrite pattern rooted at mstep.softmax matches the hand-written forward
// and, when autograd recorded one, its backward (lib/passes/attention/),
// checks that every value that disappears is read only by ops that
// disappear with it, and replaces the two chains with mstep.sdpa and
// mstep.sdpa_backward.
#include "lib/passes/attention/AttentionMatch.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mstep/passes/Passes.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mstep::passes {
#define GEN_PASS_DEF_FUSEATTENTION
#include "mstep/passes/Passes.h.inc"

namespace {

using attention::AttentionBackward;
using attention::AttentionForward;
using llvm::SmallVector;
using mlir::Operation;
using mlir::Value;
namespace md = ::mstep::dialect;

/// The ops a fusion removes: the matched chains, plus the permutes that
/// only feed them (the transposes autograd takes of p, q and kT).
class RemovedOps {
 public:
  explicit RemovedOps(llvm::ArrayRef<Operation*> chains) : ops_(chains.begin(), chains.end()) {}

  /// True when `user` disappears: it is in a chain, or it is a permute
  /// whose users all disappear (it is then added to the set).
  bool removes(Operation* user) {
    if (ops_.contains(user)) return true;
    auto permute = llvm::dyn_cast<md::PermuteOp>(user);
    if (!permute || permute->getBlock() != block()) return false;
    for (Operation* next : permute->getUsers())
      if (!removes(next)) return false;
    ops_.insert(user);
    return true;
  }

  /// The set in reverse program order (users before their producers).
  SmallVector<Operation*> usersFirst() const {
    SmallVector<Operation*> ops(ops_.begin(), ops_.end());
    llvm::sort(ops, [](Operation* a, Operation* b) { return b->isBeforeInBlock(a); });
    return ops;
  }

 private:
  mlir::Block* block() const { return (*ops_.begin())->getBlock(); }
  llvm::SetVector<Operation*> ops_;
};

/// `value` permuted by `perm` at the rewriter's insertion point, or `value`
/// itself for the identity.
Value permute(mlir::PatternRewriter& rewriter, mlir::Location loc, Value value,
              llvm::ArrayRef<int64_t> perm) {
  if (attention::isIdentityPerm(perm)) return value;
  auto type = llvm::cast<mlir::RankedTensorType>(value.getType());
  SmallVector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(type.getDimSize(p));
  return rewriter.create<md::PermuteOp>(loc, type.clone(dims), value, perm);
}

/// permute() placed right after value's definition, so that it dominates
/// everything `value` does.
Value permuteAfterDefinition(mlir::PatternRewriter& rewriter, mlir::Location loc, Value value,
                             llvm::ArrayRef<int64_t> perm) {
  mlir::OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPointAfterValue(value);
  return permute(rewriter, loc, value, perm);
}

struct FuseAttentionPattern : mlir::OpRewritePattern<md::SoftmaxOp> {
  FuseAttentionPattern(mlir::MLIRContext* ctx, mlir::Pass::Statistic& forwards,
                       mlir::Pass::Statistic& backwards, mlir::Pass::Statistic& probs)
      : OpRewritePattern(ctx), forwards_(&forwards), backwards_(&backwards), probs_(&probs) {}

  mlir::LogicalResult matchAndRewrite(md::SoftmaxOp softmax,
                                      mlir::PatternRewriter& rewriter) const override {
    // 1. Match the forward, and the backward if there is one.
    std::string why;
    std::optional<AttentionForward> fwd = attention::matchForward(softmax, why);
    if (!fwd) return rewriter.notifyMatchFailure(softmax, why);
    std::optional<AttentionBackward> bwd = attention::matchBackward(*fwd, why);

    // 2. Every forward value that disappears is read only by ops that
    //    disappear too; the probabilities may have other readers (the op
    //    then returns them). A backward that is not fused keeps the
    //    forward's intermediates alive, so it blocks fusion unless all it
    //    reads are the final probabilities (and the operand chains, which
    //    stay while anything reads them).
    SmallVector<Operation*> chainOps = fwd->coreOps();
    if (bwd) chainOps.append(bwd->ops);
    RemovedOps removed(chainOps);
    mlir::Block* block = softmax->getBlock();
    SmallVector<mlir::OpOperand*> probsReaders;
    for (Operation* op : fwd->coreOps()) {
      if (op->getBlock() != block)
        return rewriter.notifyMatchFailure(softmax, "the attention spans several blocks");
      if (op == fwd->outputMatmul) continue;
      for (mlir::OpOperand& use : op->getResult(0).getUses()) {
        if (removed.removes(use.getOwner())) continue;
        if (op->getResult(0) != fwd->probs())
          return rewriter.notifyMatchFailure(use.getOwner(),
                                             "reads an attention intermediate; not fused");
        probsReaders.push_back(&use);
      }
    }

    // 3. The fused ops take the places of the output matmul and of the
    //    backward's first op: their operands must be defined by then, and
    //    the probabilities' other readers must come after the forward.
    mlir::DominanceInfo dominance;
    for (mlir::OpOperand* use : probsReaders)
      if (!dominance.properlyDominates(fwd->outputMatmul.getOperation(), use->getOwner()))
        return rewriter.notifyMatchFailure(use->getOwner(),
                                           "reads the probabilities before the attention output");
    Value rng = fwd->dropoutP() > 0 ? fwd->dropout.getRngState() : Value();
    if (bwd)
      for (Value operand : {fwd->query.base, fwd->keyT.base, fwd->value(), fwd->mask, rng})
        if (operand && !dominance.properlyDominates(operand, bwd->first))
          return rewriter.notifyMatchFailure(bwd->first,
                                             "the backward starts before its operands exist");

    // 4. Rewrite: the forward, then the backward, then erase what is left.
    rewriteChains(rewriter, *fwd, rng, probsReaders, bwd ? &*bwd : nullptr);
    eraseWithDeadProducers(rewriter, removed.usersFirst());
    ++*forwards_;
    if (bwd) ++*backwards_;
    if (!probsReaders.empty()) ++*probs_;
    return mlir::success();
  }

 private:
  /// Creates sdpa (and sdpa_backward) and points every reader of the
  /// chains' results at them; the chains are left to be erased.
  static void rewriteChains(mlir::PatternRewriter& rewriter, const AttentionForward& fwd,
                             Value rng, llvm::ArrayRef<mlir::OpOperand*> probsReaders,
                             const AttentionBackward* bwd) {
    const mlir::Location loc = fwd.softmax.getLoc();
    // query = base permuted as q was; key = base permuted as kT was, with the
    // last two dims swapped back.
    SmallVector<int64_t> queryPerm = fwd.query.perm(), keyPerm = fwd.keyT.perm();
    std::swap(keyPerm[keyPerm.size() - 2], keyPerm[keyPerm.size() - 1]);
    Value query = permuteAfterDefinition(rewriter, loc, fwd.query.base, queryPerm);
    Value key = permuteAfterDefinition(rewriter, loc, fwd.keyT.base, keyPerm);
    const double dropoutP = rng ? fwd.dropoutP() : 0.0;
    mlir::IntegerAttr rngOffset =
        rng ? rewriter.getI64IntegerAttr(static_cast<int64_t>(fwd.dropout.getOffset()))
            : mlir::IntegerAttr();
    const llvm::APFloat scale(fwd.scale()), dropP(dropoutP);

    rewriter.setInsertionPoint(fwd.outputMatmul);
    const bool returnProbs = !probsReaders.empty();
    auto sdpa = rewriter.create<md::SdpaOp>(
        loc, fwd.out().getType(), returnProbs ? fwd.probs().getType() : mlir::Type(),
        mlir::Type(), mlir::Type(), query, key, fwd.value(), fwd.mask, Value(), rng, scale, dropP,
        fwd.causal, md::SoftmaxMode::none, /*recompute_mode=*/true, md::PaddingSide::right,
        rngOffset, returnProbs, /*return_dropout_mask=*/false);
    rewriter.replaceAllUsesWith(fwd.out(), sdpa.getOut());
    for (mlir::OpOperand* use : probsReaders)
      rewriter.modifyOpInPlace(use->getOwner(), [&] { use->set(sdpa.getAttnProbs()); });
    if (!bwd) return;

    rewriter.setInsertionPoint(bwd->first);
    auto grads = rewriter.create<md::SdpaBackwardOp>(
        loc, query.getType(), key.getType(), fwd.value().getType(), mlir::Type(), bwd->gradOut,
        query, key, fwd.value(), fwd.mask, Value(), rng, Value(), scale, dropP, fwd.causal,
        md::SoftmaxMode::none, /*recompute_mode=*/true, md::PaddingSide::right, rngOffset);
    if (bwd->gradValue) rewriter.replaceAllUsesWith(bwd->gradValue, grads.getGradValue());
    if (bwd->gradQueryBase)
      rewriter.replaceAllUsesWith(
          bwd->gradQueryBase,
          permute(rewriter, loc, grads.getGradQuery(), attention::invertPerm(queryPerm)));
    if (bwd->gradKeyBase)
      rewriter.replaceAllUsesWith(
          bwd->gradKeyBase,
          permute(rewriter, loc, grads.getGradKey(), attention::invertPerm(keyPerm)));
  }

  /// Erases `ops` (users first; none may have users outside the list) and
  /// then every producer this leaves trivially dead (the transposes and
  /// fills the chains read).
  static void eraseWithDeadProducers(mlir::PatternRewriter& rewriter,
                                     llvm::ArrayRef<Operation*> ops) {
    llvm::SmallPtrSet<Operation*, 32> erased(ops.begin(), ops.end());
    llvm::SetVector<Operation*> producers;
    for (Operation* op : ops) {
      for (Value operand : op->getOperands())
        if (Operation* producer = operand.getDefiningOp(); producer && !erased.contains(producer))
          producers.insert(producer);
      rewriter.eraseOp(op);
    }
    // Each producer is queued once: when its last user is gone.
    SmallVector<Operation*> worklist;
    for (Operation* producer : producers)
      if (mlir::isOpTriviallyDead(producer)) worklist.push_back(producer);
    while (!worklist.empty()) {
      Operation* dead = worklist.pop_back_val();
      llvm::SetVector<Operation*> inputs;
      for (Value operand : dead->getOperands())
        if (Operation* producer = operand.getDefiningOp()) inputs.insert(producer);
      rewriter.eraseOp(dead);
      for (Operation* producer : inputs)
        if (mlir::isOpTriviallyDead(producer)) worklist.push_back(producer);
    }
  }

  mlir::Pass::Statistic* forwards_;
  mlir::Pass::Statistic* backwards_;
  mlir::Pass::Statistic* probs_;
};

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    SmallVector<Operation*> softmaxes;
    getOperation().walk([&](md::SoftmaxOp op) { softmaxes.push_back(op); });
    if (softmaxes.empty()) return;
    mlir::RewritePatternSet patterns(&getContext());
    patterns.add<FuseAttentionPattern>(&getContext(), numForwards, numBackwards,
                                       numReturnedProbs);
    mlir::GreedyRewriteConfig config;
    config.strictMode = mlir::GreedyRewriteStrictness::ExistingOps;
    // Failing to converge only means some softmax stayed unfused.
    (void)mlir::applyOpPatternsAndFold(softmaxes, std::move(patterns), config);
  }
};

}  // namespace
}  // namespace mstep::passes
