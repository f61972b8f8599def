// The training step of a backend conformance case (test/unit/
// ConformanceCases.h) as the cuda tests compile it: the case traced on
// ref, its loss backward where it checks gradients. Shared by the
// conformance compile test and the host-numerics tests of its cases.
#pragma once

#include <exception>
#include <optional>

#include "mstep/mstep.h"
#include "test/unit/ConformanceCases.h"

namespace mstep::cuda::testing {

/// sum(out * w) over the outputs that require grad (the conformance
/// driver's loss), or undefined.
inline Tensor weighted_loss(const conformance::Outputs& outputs, Device device) {
  Tensor loss;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad()) continue;
    Tensor term = sum(to(out, DType::f32) * conformance::fixed_tensor(out.shape(), 500 + i, device));
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

/// The graph of `c`'s training step on ref (empty when the case throws
/// there: a case that checks an error).
inline std::optional<TraceGraph> conformance_step_graph(const conformance::ConformanceCase& c) {
  const Device ref{DeviceType::ref, 0};
  try {
    manual_seed(1234);
    conformance::Inputs in;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      in.push_back(conformance::make_input(c.inputs[i], i, ref));
    conformance::Outputs out = c.fn(in, ref);
    if (c.check_grads)
      if (Tensor loss = weighted_loss(out, ref); loss.defined()) loss.backward();
    TraceGraph graph = pending_graph();
    mark_step();
    return graph;
  } catch (const std::exception&) {
    mark_step();
    return std::nullopt;
  }
}

} // namespace mstep::cuda::testing
