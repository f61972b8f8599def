// See RecordGraph.h.
#include "lib/api/graphs/RecordGraph.h"

#include "lib/api/OpBuilder.h"
#include "mstep/api/Autograd.h"

namespace mstep::detail {

std::vector<Tensor> record_trace_graph(absl::string_view api_name, const TraceGraph& graph,
                                       absl::Span<const Tensor> inputs, Device device) {
  NoGradGuard no_grad;  // a module is a plain function: no autograd
  std::vector<std::vector<Tensor>> results(graph.nodes.size());
  std::vector<Tensor> operands;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const GraphNode& node = graph.nodes[n];
    if (node.op == OpKind::parameter) {
      results[n] = {inputs[attr_int(node.attrs, AttrName::index)]};
      continue;
    }
    operands.clear();
    for (const ValueRef& v : node.operands) operands.push_back(results[v.node][v.index]);
    if (node.results.size() == 1)
      results[n] = {record(api_name, node.op, operands, node.attrs, node.results[0], device)};
    else
      results[n] = record_multi(api_name, node.op, operands, node.attrs, node.results);
  }
  std::vector<Tensor> out;
  for (const ValueRef& v : graph.outputs) out.push_back(results[v.node][v.index]);
  return out;
}

}  // namespace mstep::detail
