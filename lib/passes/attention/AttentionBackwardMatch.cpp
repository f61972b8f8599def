// Backward matching for mstep-fuse-attention (AttentionMatch.h): the chain
// autograd records for a matched forward (the formulas of matmul, softmax,
// dropout, where, mul/div and permute in lib/api/autograd), found from the
// softmax backward that reads the forward's probabilities.
#include "lib/passes/attention/AttentionMatch.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mstep::passes::attention {

using llvm::ArrayRef;
using llvm::SmallVector;
using mlir::Operation;
using mlir::Value;
namespace md = ::mstep::dialect;

namespace {

/// The only user of `value`, or null when it has none or several.
Operation* soleUser(Value value) {
  return value.hasOneUse() ? *value.getUsers().begin() : nullptr;
}

/// True when the binary op `op` reads exactly `a` and `b`, in either order.
bool readsPair(Operation* op, Value a, Value b) {
  return (op->getOperand(0) == a && op->getOperand(1) == b) ||
         (op->getOperand(0) == b && op->getOperand(1) == a);
}

/// The gradient op of a scale step: `grad * c` (either order) or `grad / c`
/// for a dividing step, with the step's constant.
bool isScaleGrad(Operation* op, Value grad, const ChainStep& step) {
  if (!op || op->getNumOperands() != 2) return false;
  if (step.divides) {
    auto div = llvm::dyn_cast<md::DivOp>(op);
    return div && div.getLhs() == grad && uniformConstant(div.getRhs()) == step.constant;
  }
  if (!llvm::isa<md::MulOp>(op)) return false;
  for (unsigned side : {1u, 0u})
    if (op->getOperand(1 - side) == grad && uniformConstant(op->getOperand(side)) == step.constant)
      return true;
  return false;
}

/// Walks `chain` in reverse from the gradient of its operand: each scale
/// step's gradient is a scale by the same constant, each permute's a permute
/// by the inverse perm, and every gradient but the last has that one user.
/// Returns the gradient of chain.base.
std::optional<Value> walkChainBackward(Value grad, const OperandChain& chain,
                                       SmallVector<Operation*>& ops, std::string& why) {
  for (const ChainStep& step : chain.steps) {
    Operation* user = soleUser(grad);
    const bool matches =
        step.kind == ChainStep::Kind::scale
            ? isScaleGrad(user, grad, step)
            : llvm::isa_and_nonnull<md::PermuteOp>(user) &&
                  llvm::cast<md::PermuteOp>(user).getPerm() == ArrayRef(invertPerm(step.perm));
    if (!matches) return fail(why, "an operand chain's gradient does not mirror the forward");
    ops.push_back(user);
    grad = user->getResult(0);
  }
  return grad;
}

}  // namespace

std::optional<AttentionBackward> matchBackward(const AttentionForward& fwd, std::string& why) {
  AttentionBackward bwd;
  const Value p = fwd.softmax.getResult();
  const int64_t last = llvm::cast<mlir::RankedTensorType>(p.getType()).getRank() - 1;

  // 1. Softmax backward: dX = p * (dP - sum(dP * p, last, keepdim)).
  Value dP, dX;
  for (Operation* user : p.getUsers()) {
    auto gradTimesProbs = llvm::dyn_cast<md::MulOp>(user);
    if (!gradTimesProbs) continue;
    Value grad = gradTimesProbs.getLhs() == p ? gradTimesProbs.getRhs() : gradTimesProbs.getLhs();
    if (grad == p || grad.getType() != p.getType()) continue;
    auto sum = llvm::dyn_cast_or_null<md::SumOp>(soleUser(gradTimesProbs.getResult()));
    if (!sum || sum.getDims() != ArrayRef<int64_t>{last} || !sum.getKeepdim()) continue;
    auto sub = llvm::dyn_cast_or_null<md::SubOp>(soleUser(sum.getResult()));
    if (!sub || sub.getLhs() != grad || sub.getRhs() != sum.getResult()) continue;
    auto gradInput = llvm::dyn_cast_or_null<md::MulOp>(soleUser(sub.getResult()));
    if (!gradInput || !readsPair(gradInput, p, sub.getResult())) continue;
    if (dX) return fail(why, "two softmax backwards read the probabilities");
    dP = grad;
    dX = gradInput.getResult();
    bwd.ops.append({gradTimesProbs, sum, sub, gradInput});
  }
  if (!dX) return fail(why, "no softmax backward reads the probabilities");

  // 2. dP = dropout(dO @ v^T) with the forward's RNG state, p and offset.
  Value dPd = dP;
  if (fwd.dropout) {
    auto dropout = dP.getDefiningOp<md::DropoutOp>();
    if (!dropout || dropout.getRngState() != fwd.dropout.getRngState() ||
        dropout.getP() != fwd.dropout.getP() || dropout.getOffset() != fwd.dropout.getOffset())
      return fail(why, "the probabilities' gradient is not the forward's dropout replayed");
    bwd.ops.push_back(dropout);
    dPd = dropout.getInput();
  }
  auto gradProbs = dPd.getDefiningOp<md::MatmulOp>();
  if (!gradProbs || !isTransposeOf(gradProbs.getRhs(), fwd.value()) ||
      gradProbs.getLhs().getType() != fwd.out().getType())
    return fail(why, "the probabilities' gradient is not dO @ v^T");
  bwd.ops.push_back(gradProbs);
  bwd.gradOut = gradProbs.getLhs();

  // 3. dv = probs^T @ dO (absent when v needs no gradient).
  for (Operation* user : bwd.gradOut.getUsers())
    if (auto matmul = llvm::dyn_cast<md::MatmulOp>(user))
      if (matmul.getRhs() == bwd.gradOut && isTransposeOf(matmul.getLhs(), fwd.probs())) {
        if (bwd.gradValue) return fail(why, "two matmuls compute dv");
        bwd.gradValue = matmul.getResult();
        bwd.ops.push_back(matmul);
      }

  // 4. The mask's gradient: where(mask, dX, 0) for a bool mask; a float
  //    mask passes it through.
  Value grad = dX;
  if (auto where = llvm::dyn_cast_or_null<md::WhereOp>(fwd.maskOp)) {
    auto gradWhere = llvm::dyn_cast_or_null<md::WhereOp>(soleUser(dX));
    if (!gradWhere || gradWhere.getCondition() != where.getCondition() ||
        gradWhere.getTrueValue() != dX || uniformConstant(gradWhere.getFalseValue()) != 0.0)
      return fail(why, "the masked scores' gradient is not where(mask, dX, 0)");
    bwd.ops.push_back(gradWhere);
    grad = gradWhere.getResult();
  }

  // 5. The score scales' gradients, then dS's users: dq' = dS @ kT^T and
  //    dkT = q'^T @ dS.
  for (const ChainStep& step : fwd.scoreScales) {
    Operation* user = soleUser(grad);
    if (!isScaleGrad(user, grad, step))
      return fail(why, "the scores' gradient is not scaled by the forward's constant");
    bwd.ops.push_back(user);
    grad = user->getResult(0);
  }
  const Value dS = grad;
  md::MatmulOp gradQueryOperand, gradKeyTOperand;
  for (Operation* user : dS.getUsers()) {
    auto matmul = llvm::dyn_cast<md::MatmulOp>(user);
    md::MatmulOp* slot = nullptr;
    if (matmul && matmul.getLhs() == dS && isTransposeOf(matmul.getRhs(), fwd.keyT.operand))
      slot = &gradQueryOperand;
    else if (matmul && matmul.getRhs() == dS && isTransposeOf(matmul.getLhs(), fwd.query.operand))
      slot = &gradKeyTOperand;
    if (!slot || *slot) return fail(why, "the scores' gradient has users besides dq and dk");
    *slot = matmul;
    bwd.ops.push_back(matmul);
  }
  if (!gradQueryOperand && !gradKeyTOperand) return fail(why, "the scores' gradient is unused");

  // 6. Back along the operand chains to the bases' gradients.
  if (gradQueryOperand) {
    std::optional<Value> g = walkChainBackward(gradQueryOperand, fwd.query, bwd.ops, why);
    if (!g) return std::nullopt;
    bwd.gradQueryBase = *g;
  }
  if (gradKeyTOperand) {
    std::optional<Value> g = walkChainBackward(gradKeyTOperand, fwd.keyT, bwd.ops, why);
    if (!g) return std::nullopt;
    bwd.gradKeyBase = *g;
  }

  // 7. One block, and every value of the chain but the three gradients
  //    read only inside it.
  llvm::SmallPtrSet<Operation*, 16> inChain(bwd.ops.begin(), bwd.ops.end());
  mlir::Block* block = fwd.softmax->getBlock();
  for (Operation* op : bwd.ops) {
    if (op->getBlock() != block) return fail(why, "the backward spans several blocks");
    if (!bwd.first || op->isBeforeInBlock(bwd.first)) bwd.first = op;
    Value result = op->getResult(0);
    if (result == bwd.gradValue || result == bwd.gradQueryBase || result == bwd.gradKeyBase)
      continue;
    for (Operation* user : result.getUsers())
      if (!inChain.contains(user))
        return fail(why, "a value inside the backward chain is read outside it");
  }
  return bwd;
}

}  // namespace mstep::passes::attention
