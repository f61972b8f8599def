// The scratch the xla step function's own loops need beside the planned
// arena (lay_out_step puts it after the plan, XlaLayout::scratch_offset;
// one region every such node shares, as they run one after another): the
// im2col + gemm convolutions' (conv_scratch_bytes, XlaConvShape.h), a
// bf16 attention mask gradient's f32 sums and a bf16 pool gradient's.
// Plain data; no LLVM or MLIR headers.
#pragma once

#include <cstdint>

#include "mstep/ir/TraceGraph.h"

namespace mstep::xla {

/// The f32 sums of a bf16 float mask's gradient (an sdpa_grad node's
/// result 3 with return_mask) in bytes, or 0 for any other node.
int64_t mask_gradient_scratch_bytes(const GraphNode& node);

/// The f32 sums of a bf16 max_pool2d_grad or avg_pool2d_grad (its result's
/// size) in bytes, or 0 for any other node.
int64_t pool_gradient_scratch_bytes(const GraphNode& node);

/// The scratch the step's loops need: the most any one node needs.
int64_t loop_scratch_bytes(const TraceGraph& graph);

} // namespace mstep::xla
