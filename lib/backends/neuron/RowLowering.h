// The last-axis lowerings (issue 19): reductions along the last axis
// (LowerReductions.cpp; over leading axes LowerLeadingReduction.cpp),
// softmax and log_softmax (LowerSoftmax.cpp), layer_norm and rms_norm
// (LowerNorms.cpp), constant fills (LowerFill.cpp), nll_loss
// (LowerNllLoss.cpp), and elementwise ops / fusions
// with row or per-row broadcasts or f32<->bf16 casts (LowerBroadcast.cpp).
// Each views its tensor as [rows, cols] (RowTiling.h). lower_node
// (Lowering.cpp) dispatches here for the nodes is_row_family names; each
// returns the unvalidated program (lower_node validates and costs it) or a
// refusal saying why.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

/// True for the ops the last-axis lowerings take: sum/mean/max/min,
/// softmax, log_softmax, layer_norm, rms_norm, nll_loss, cast, full and
/// constant-fill fusions, and elementwise ops or fusions whose values are
/// not all of the result's type (broadcasts, casts).
bool is_row_family(const GraphNode& node, absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_row_family(const GraphNode& node,
                                           absl::Span<const TensorType> operand_types);

absl::StatusOr<LoweredOp> lower_reduction(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types);
/// sum/mean/max/min of `in` over its leading axes, `rows` their product.
absl::StatusOr<LoweredOp> lower_leading_reduction(const GraphNode& node, const TensorType& in,
                                                  int64_t rows);
/// `full`, or a fusion whose every output is a constant broadcast
/// (LowerFill.cpp).
bool is_fill(const GraphNode& node);
absl::StatusOr<LoweredOp> lower_fill(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types);
/// nll_loss forward (LowerNllLoss.cpp).
absl::StatusOr<LoweredOp> lower_nll_loss(const GraphNode& node,
                                         absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_softmax(const GraphNode& node,
                                        absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_norm(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types);
absl::StatusOr<LoweredOp> lower_broadcast(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types);

} // namespace mstep::neuron
