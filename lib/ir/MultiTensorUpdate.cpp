// Layout::of (MultiTensorUpdate.h).
#include "mstep/ir/MultiTensorUpdate.h"

#include "mstep/ir/TraceGraph.h"

namespace mstep::multi_tensor_update {

std::optional<Layout> Layout::of(const GraphNode& node) {
  auto in = Segments<kNumOperandSegments>::of(attr_ints(node.attrs, AttrName::operand_segments));
  auto out = Segments<kNumResultSegments>::of(attr_ints(node.attrs, AttrName::result_segments));
  if (!in || !out) return std::nullopt;
  Layout l{*in, *out};
  l.rule = static_cast<Rule>(attr_int(node.attrs, AttrName::kind));
  l.nesterov = attr_int_or(node.attrs, AttrName::nesterov, 0) != 0;
  l.amsgrad = attr_int_or(node.attrs, AttrName::amsgrad, 0) != 0;
  l.maximize = attr_int_or(node.attrs, AttrName::maximize, 0) != 0;
  const int n = l.num_params = in->count[kParams];
  switch (l.rule) {
  case Rule::sgd: l.slots = in->count[kMomentum] ? 1 : 0; break;
  case Rule::adam:
  case Rule::adamw: l.slots = l.amsgrad ? 3 : 2; break;
  case Rule::adadelta: l.slots = 2; break;
  default: return std::nullopt;
  }
  const bool counts_ok =
      in->count[kGrads] == n && in->count[kStates] == l.slots * n &&
      (in->count[kSteps] == 0 || in->count[kSteps] == n) && out->count[kNewParams] == n &&
      out->count[kNewStates] == l.slots * n && out->count[kNewSteps] == in->count[kSteps] &&
      (out->count[kClippedGrads] == 0 || out->count[kClippedGrads] == n) &&
      out->count[kTotalNorm] <= 1 && in->count[kLr] == 1 &&
      static_cast<int>(node.operands.size()) ==
          in->at(kNumOperandSegments - 1) + in->count[kNumOperandSegments - 1] &&
      static_cast<int>(node.results.size()) ==
          out->at(kNumResultSegments - 1) + out->count[kNumResultSegments - 1];
  if (!counts_ok) return std::nullopt;
  const bool adam_like = l.rule == Rule::adam || l.rule == Rule::adamw;
  if (adam_like && !(in->count[kBeta1] && in->count[kBeta2] && in->count[kEps]))
    return std::nullopt;
  if (l.rule == Rule::adadelta && !(in->count[kRho] && in->count[kEps])) return std::nullopt;
  return l;
}

}  // namespace mstep::multi_tensor_update
