// Lowering of step-graph ops to tile programs (issue 19, part 1, first
// slice): elementwise ops and mstep.fusion regions over f32/bf16 tensors,
// and 2-d matmul. A lowered op is a validated TileProgram plus how its HBM
// tensors map to the op's operands and results, and the cost model's
// estimate. An op the lowering cannot tile gets an error saying why; the
// backend then runs it as a counted host fallback (never a wrong answer).
//
// Elementwise: the flat tensor of N elements is viewed as [128, N/128]
// (partition p holds elements [p*F, (p+1)*F), F = N/128) and the tail of
// N mod 128 elements as one partition. The free dimension is cut into chunks, double-buffered in
// SBUF: DMA in, one Vector/Scalar instruction per op, DMA out, ordered by
// semaphores. Matmul: TiledMatmulProgram (K accumulated in PSUM); its A^T
// operand is staged transposed into HBM by run_lowered (no on-chip
// transpose instruction yet). Last-axis reductions, softmax, log_softmax,
// layer_norm, rms_norm, and elementwise ops with row/per-row broadcasts or
// casts: RowLowering.h.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/Simulator.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::neuron {

struct LoweredOp {
  TileProgram program;
  /// Per HBM tensor of the program: the node operand it is loaded from
  /// (>= 0) or the node result it is stored to (-1 - result index).
  std::vector<int32_t> hbm_binding;
  /// Matmul: HBM tensor 0 holds operand 0 ([M, K]) transposed, [K, M].
  bool transpose_first = false;
  /// The cost model's estimate of one run.
  double estimated_ns = 0;
};

/// The tile program of `node` (operand types `operand_types`), validated
/// and costed, or an error naming the op and why it cannot be tiled.
absl::StatusOr<LoweredOp> lower_node(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types);

/// Runs `op` on `sim`: stages the inputs into HBM, runs, copies the results
/// out (each output buffer has the node's result type).
absl::Status run_lowered(const LoweredOp& op, Simulator& sim,
                         absl::Span<const host::HostBuffer* const> inputs,
                         absl::Span<host::HostBuffer* const> outputs);

} // namespace mstep::neuron
