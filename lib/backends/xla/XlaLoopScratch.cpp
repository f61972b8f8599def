// attention_dq_scratch_floats, attention_scratch_bytes,
// pool_gradient_scratch_bytes and loop_scratch_bytes (XlaLoopScratch.h).
#include "lib/backends/xla/XlaLoopScratch.h"

#include <algorithm>

#include "lib/backends/xla/XlaConvShape.h"

namespace mstep::xla {

namespace {

bool is_16_bit_float(DType dtype) { return dtype == DType::bf16 || dtype == DType::f16; }

} // namespace

int64_t attention_dq_scratch_floats(const GraphNode& node) {
  // sdpa_grad's results: dq, dk, dv, then the mask gradient when asked.
  if (node.op != OpKind::sdpa_grad || node.results.empty() ||
      !is_16_bit_float(node.results[0].dtype))
    return 0;
  return (node.results[0].numel() + 15) / 16 * 16;
}

int64_t attention_scratch_bytes(const GraphNode& node) {
  const int64_t dq = attention_dq_scratch_floats(node);
  if (dq == 0) return 0;
  const bool mask = attr_int(node.attrs, AttrName::return_mask) != 0 && node.results.size() >= 4;
  return (dq + (mask ? node.results[3].numel() : 0)) * 4;
}

int64_t pool_gradient_scratch_bytes(const GraphNode& node) {
  if ((node.op != OpKind::max_pool2d_grad && node.op != OpKind::avg_pool2d_grad) ||
      node.results.size() != 1 || !is_16_bit_float(node.results[0].dtype))
    return 0;
  return node.results[0].numel() * 4;
}

int64_t loop_scratch_bytes(const TraceGraph& graph) {
  int64_t most = conv_scratch_bytes(graph);
  for (const GraphNode& n : graph.nodes)
    most = std::max({most, attention_scratch_bytes(n), pool_gradient_scratch_bytes(n)});
  return most;
}

} // namespace mstep::xla
