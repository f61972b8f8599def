// The operand and result layout of the fused optimizer op
// (`multi_tensor_update`, include/mstep/ir/dialect/OptimizerOps.td): its
// segments in order (operandSegmentSizes, resultSegmentSizes) and the
// codes of its `kind` attribute. Shared by every backend's kernel.
#pragma once

namespace mstep::multi_tensor_update {

enum Operand {
  kParams,
  kGrads,
  kStates,
  kSteps,
  kLr,
  kMomentum,
  kDampening,
  kBeta1,
  kBeta2,
  kRho,
  kEps,
  kWeightDecay,
  kNumOperandSegments
};
enum Result { kNewParams, kNewStates, kNewSteps, kClippedGrads, kTotalNorm, kNumResultSegments };
/// dialect::OptimizerKind's codes.
enum class Rule { sgd = 0, adam = 1, adamw = 2, adadelta = 3 };

}  // namespace mstep::multi_tensor_update
