// loop_failure (XlaStepFailure.h).
#include "lib/backends/xla/XlaStepFailure.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/KernelSelection.h"
#include "mstep/core/Error.h"

namespace mstep::xla {

absl::Status loop_failure(const XlaProgram& program, uint32_t node, void* const* inputs,
                          void* const* outputs, std::byte* arena) {
  const TraceGraph& graph = program.graph;
  const XlaLayout& layout = program.layout;
  if (node >= graph.nodes.size())
    return absl::InternalError(
        absl::StrCat("xla backend: the step stopped at node ", node, ", which it does not have"));
  const GraphNode& n = graph.nodes[node];
  const std::string generic =
      absl::StrCat("mstep::", op_name(n.op), ": invalid input data (the xla step stopped there)");
  auto address = [&](uint32_t value) -> void* {
    const ValueLocation& at = layout.values[value];
    switch (at.kind) {
    case ValueLocation::Kind::input:
      return inputs[at.at];
    case ValueLocation::Kind::output:
      return outputs[at.at];
    case ValueLocation::Kind::arena:
      break;
    }
    return arena + at.at;
  };
  std::vector<const void*> operands;
  for (ValueRef v : n.operands) operands.push_back(address(layout.value_of(v)));
  // Scratch results: the node's own may be memory its operands share.
  std::vector<std::vector<std::byte>> scratch;
  std::vector<void*> results;
  for (const TensorType& t : n.results) {
    scratch.emplace_back(t.bytes() + 64);
    results.push_back(scratch.back().data());
  }
  MSTEP_ASSIGN_OR_RETURN(cpu::SelectedKernel selected,
                         cpu::select_kernel(cpu::KernelRequest{graph, node}, nullptr, -1, "jit"));
  selected.kernel->run(operands.data(), results.data());
  if (selected.kernel->can_fail() && !selected.kernel->last_error().ok())
    return selected.kernel->last_error();
  return absl::InvalidArgumentError(generic);
}

} // namespace mstep::xla
