// The chains lib/api/optim records, as mstep-fuse-optimizer matches them:
// one parameter's SGD / Adam / AdamW / Adadelta update (optim::SGD::update
// and friends, written here as chain patterns), and the clip_grad_norm_
// chain over all gradients. Matching only reads the IR; FuseOptimizer.cpp
// groups the chains and rewrites. Library-internal.
#pragma once

#include <optional>

#include "lib/passes/optimizer/ChainPattern.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/ADT/SetVector.h"

namespace mstep::passes::optimizer {

/// The structural options of an update rule: what shapes PyTorch's code
/// path (and so the recorded graph), as opposed to hyperparameter values.
struct RuleVariant {
  dialect::OptimizerKind kind;
  bool weightDecay = false;
  bool momentum = false, dampening = false, nesterov = false; // sgd
  bool amsgrad = false;                                       // adam, adamw

  /// State tensors per parameter (mstep.multi_tensor_update's slots).
  int stateSlots() const;
  /// The op takes step counters (every rule but sgd without momentum).
  bool countsSteps() const;
  /// The chain reads its step counter (adam, adamw, sgd with dampening);
  /// otherwise the counter is only advanced, in a chain of its own.
  bool readsStep() const;
  /// Whether hyperparameter `h` is an operand under this variant.
  bool takes(Hyper h) const;
  bool operator==(const RuleVariant& o) const;
};

/// One parameter's matched update chain.
struct UpdateChain {
  RuleVariant variant;
  mlir::Value param, grad;
  mlir::Value step; ///< null when the chain does not read it (see readsStep)
  std::array<mlir::Value, kMaxStateSlots> states{};
  std::array<mlir::Value, kNumHypers> hypers{};
  /// The values that replace param, states and step (returned in place).
  mlir::Value newParam, newStep;
  std::array<mlir::Value, kMaxStateSlots> newStates{};
  /// Every op of the chain, in no particular order.
  llvm::SetVector<mlir::Operation*> ops;
};

/// Matches the update chain of `param` (a block argument with role
/// "parameter" updated in place): the variant whose pattern covers the
/// most ops, provided that every value it computes from tensors (other
/// than the new param and state) is read only inside the chain.
std::optional<UpdateChain> matchUpdateChain(const FunctionFacts& facts, mlir::Value param);

/// A step counter advanced in a chain of its own (add(step, 1), returned in
/// place): Adadelta and SGD without dampening keep one per parameter but
/// never read it.
std::optional<mlir::Value> advancedOnlyStep(const FunctionFacts& facts, mlir::BlockArgument arg);

/// A matched clip_grad_norm_ (optim::clip_grad_norm_):
///   norm_i = ||raw_i||_p;  total = ||stack(norm_i)||_p (norm_0 for one grad)
///   clamped = min(max_norm / (total + 1e-6), 1);  clipped_i = raw_i * clamped
struct ClipChain {
  double maxNorm = 0, normType = 2;
  mlir::Value total;
  llvm::SmallVector<mlir::Value> rawGrads;     ///< in the order of the stacked norms
  llvm::SmallVector<mlir::Value> clippedGrads; ///< clippedGrads[i] = rawGrads[i] * clamped
  /// Every op of the chain but the constants.
  llvm::SetVector<mlir::Operation*> ops;
};

/// Matches a clip_grad_norm_ whose clipped gradients are exactly `grads`
/// (in any order), all of one dtype; every intermediate but the total and
/// the clipped gradients must be read only inside the chain.
std::optional<ClipChain> matchClipChain(llvm::ArrayRef<mlir::Value> grads);

} // namespace mstep::passes::optimizer
