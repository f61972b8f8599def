// The scratch the xla step function's own loops need beside the planned
// arena (lay_out_step puts it after the plan, XlaLayout::scratch_offset;
// one region every such node shares, as they run one after another): the
// im2col + gemm convolutions' (conv_scratch_bytes, XlaConvShape.h), a bf16
// attention backward's f32 dq and mask gradient sums and a bf16 pool
// gradient's.
// Plain data; no LLVM or MLIR headers.
#pragma once

#include <cstdint>

#include "mstep/ir/TraceGraph.h"

namespace mstep::xla {

/// A bf16 sdpa_grad's scratch starts with its f32 dq sums (one [L, E]
/// slice per batch-head, in dq's order): their floats, rounded up to 64
/// bytes, or 0 for any other node. The mask gradient's sums follow.
int64_t attention_dq_scratch_floats(const GraphNode& node);

/// A bf16 sdpa_grad's scratch in bytes: its dq sums, then the f32 sums of
/// its float mask's gradient (result 3 with return_mask) if any; 0 for any
/// other node.
int64_t attention_scratch_bytes(const GraphNode& node);

/// The f32 sums of a bf16 max_pool2d_grad or avg_pool2d_grad (its result's
/// size) in bytes, or 0 for any other node.
int64_t pool_gradient_scratch_bytes(const GraphNode& node);

/// The scratch the step's loops need: the most any one node needs.
int64_t loop_scratch_bytes(const TraceGraph& graph);

} // namespace mstep::xla
