// append_inlined (InlineGraph.h).
#include "mstep/ir/InlineGraph.h"

namespace mstep {

bool draws_random(OpKind op) {
  return op == OpKind::rand || op == OpKind::randn || op == OpKind::dropout ||
         op == OpKind::sdpa || op == OpKind::sdpa_grad;
}

std::vector<ValueRef> append_inlined(const TraceGraph& g, absl::Span<const ValueRef> inputs,
                                     uint64_t rng_offset, std::vector<GraphNode>& nodes) {
  std::vector<std::vector<ValueRef>> local(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    if (n.op == OpKind::parameter) {
      local[i].push_back(inputs[attr_int(n.attrs, AttrName::index)]);
      continue;
    }
    GraphNode copy = n;
    for (ValueRef& v : copy.operands) v = local[v.node][v.index];
    if (draws_random(n.op))
      for (Attr& a : copy.attrs)
        if (a.name == AttrName::offset && std::get<int64_t>(a.value) >= 0)
          a.value = std::get<int64_t>(a.value) + static_cast<int64_t>(rng_offset);
    const auto node = static_cast<uint32_t>(nodes.size());
    for (uint32_t r = 0; r < copy.results.size(); ++r) local[i].push_back({node, r});
    nodes.push_back(std::move(copy));
  }
  std::vector<ValueRef> results;
  for (ValueRef v : g.outputs) results.push_back(local[v.node][v.index]);
  return results;
}

}  // namespace mstep
