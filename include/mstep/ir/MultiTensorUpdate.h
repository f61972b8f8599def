// The operand and result layout of the fused optimizer op
// (`multi_tensor_update`, include/mstep/ir/dialect/OptimizerOps.td): its
// segments in order (operandSegmentSizes, resultSegmentSizes) and the
// codes of its `kind` attribute. Shared by every backend's kernel.
#pragma once

#include <array>
#include <optional>

#include "mstep/ir/Attr.h"

namespace mstep {
struct GraphNode;
}

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

/// First position and length of each segment, from the op's
/// operand_segments / result_segments attribute (nullopt: not N segments).
template <int N> struct Segments {
  std::array<int, N> first{}, count{};

  static std::optional<Segments> of(const IntList& sizes) {
    if (static_cast<int>(sizes.size()) != N) return std::nullopt;
    Segments s;
    for (int i = 0, at = 0; i < N; at += static_cast<int>(sizes[i]), ++i) {
      s.first[i] = at;
      s.count[i] = static_cast<int>(sizes[i]);
    }
    return s;
  }
  int at(int segment, int i = 0) const { return first[segment] + i; }
};

/// A node's segments, rule and flags, read once for every backend's kernel.
struct Layout {
  Segments<kNumOperandSegments> in;
  Segments<kNumResultSegments> out;
  Rule rule = Rule::sgd;
  bool nesterov = false, amsgrad = false, maximize = false;
  int num_params = 0;
  int slots = 0;  // optimizer-state tensors per parameter

  /// nullopt unless the segments fit together (counts per parameter, the
  /// state slots the rule needs, every operand and result in a segment)
  /// and the rule's hyperparameters are present.
  static std::optional<Layout> of(const GraphNode& node);
};

}  // namespace mstep::multi_tensor_update
