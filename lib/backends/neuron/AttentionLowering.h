// Lowering of the step graph's `sdpa` node (scaled dot-product attention)
// to attention_forward_program, and of its backward `sdpa_grad` (operands
// grad_out, q, k, v; results dq, dk, dv) to attention_backward_program.
// Covered: q, k, v of one dtype (f32 or bf16), any leading batch/head
// dims, head dim <= 128, value dim <= 512 (<= 128 in the backward), scale,
// is_causal, valid_seq_len (i32 or i64, left or right; with a positive
// scale). Refused (the op then runs on the host, counted): a
// mask, dropout, returned probabilities or dropout mask,
// probabilities saved for the backward (recompute = 0), and shapes
// attention_tileable (attention_backward_tileable) refuses. q, k, v,
// grad_out and the results can also be read and written at the heads'
// strides of the [..., S, H, D] tensors that head permutes turn into them
// (AttentionHeadStrides; NeuronBackend folds those permutes).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// Which operands and results of an attention node are read or written at
/// the heads' strides (AttentionShape::HeadStrides), by node operand and
/// result index (empty: none). A flagged operand is bound to the bytes of
/// the [..., len, H, d] tensor whose head permute (is_head_permute) is the
/// [..., H, len, d] operand_types[o]; a flagged result is stored as its
/// head permute [..., len, H, d]. Only q, k, v (and the backward's
/// grad_out) and the results can be flagged.
struct AttentionHeadStrides {
  std::vector<bool> operands, results;
};

/// The lowered attention forward of `node` (an sdpa node), or why not.
absl::StatusOr<LoweredOp> lower_attention(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types,
                                          const AttentionHeadStrides& strided = {});

/// lower_attention with `strided`, validated and costed (as lower_node):
/// NeuronBackend's fold of head permutes into attention.
absl::StatusOr<LoweredOp>
lower_attention_at_head_strides(const GraphNode& node, absl::Span<const TensorType> operand_types,
                                const AttentionHeadStrides& strided);

} // namespace mstep::neuron
