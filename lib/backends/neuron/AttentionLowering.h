// Lowering of the step graph's `sdpa` node (scaled dot-product attention)
// to attention_forward_program, and of its backward `sdpa_grad` (operands
// grad_out, q, k, v; results dq, dk, dv) to attention_backward_program.
// Covered: q, k, v of one dtype (f32 or bf16), any leading batch/head
// dims, head dim <= 128, value dim <= 512 (<= 128 in the backward), scale,
// is_causal, valid_seq_len (i32 or i64, left or right; with a positive
// scale). Refused (the op then runs on the host, counted): a
// mask, dropout, returned probabilities or dropout mask,
// probabilities saved for the backward (recompute = 0), and shapes
// attention_tileable (attention_backward_tileable) refuses.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// The lowered attention forward of `node` (an sdpa node), or why not.
absl::StatusOr<LoweredOp> lower_attention(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types);

} // namespace mstep::neuron
