// Lowering of step-graph ops to tile programs (issue 19, part 1, first
// slice): elementwise ops and mstep.fusion regions over f32/bf16 tensors,
// and matmul (batched too). A lowered op is a validated TileProgram plus how its HBM
// tensors map to the op's operands and results, and the cost model's
// estimate. An op the lowering cannot tile gets an error saying why; the
// backend then runs it as a counted host fallback (never a wrong answer).
//
// Elementwise: the flat tensor of N elements is viewed as [128, N/128]
// (partition p holds elements [p*F, (p+1)*F), F = N/128) and the tail of
// N mod 128 elements as one partition. The free dimension is cut into chunks, double-buffered in
// SBUF: DMA in, one Vector/Scalar instruction per op, DMA out, ordered by
// semaphores. Matmul: TiledMatmulProgram (K accumulated in PSUM); A is
// loaded as the graph holds it and transposed on chip, or, where A is a
// transpose in the graph, the transpose's operand is read as A^T
// (lower_matmul_of_transposes; B likewise, as B^T). Last-axis reductions, softmax, log_softmax,
// layer_norm, rms_norm, and elementwise ops with row/per-row broadcasts or
// casts: RowLowering.h. Embedding's index_select / index_add (dma_indirect):
// IndexedLowering.h; dropout (Philox on GpSimd): DropoutLowering.h; the
// fused optimizer update: OptimizerLowering.h; reshape, permute, expand,
// slice and cat (DMA copies, or no program where the bytes stay put):
// CopyLowering.h; arange, rand and randn (GpSimd iota / Philox):
// CreationLowering.h; bool and integer values in the elementwise and sum
// lowerings: IntegerValues.h.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/Simulator.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::neuron {

/// hbm_binding of an HBM tensor that LoweredOp::stage fills.
inline constexpr int32_t kStagedOnHost = std::numeric_limits<int32_t>::min();

struct LoweredOp {
  TileProgram program;
  /// Per HBM tensor of the program: the node operand it is loaded from
  /// (>= 0), the node result it is stored to (-1 - result index), or
  /// kStagedOnHost.
  std::vector<int32_t> hbm_binding;
  /// Host work before the program runs, where the op needs it: fills the
  /// kStagedOnHost tensors from the inputs (int64 row indices narrowed to
  /// the int32 the DMA reads, after ref's range check; the optimizer's
  /// scalars from its 0-d hyperparameters and step counts, as the Neuron
  /// runtime prepares scalars) and writes the results no HBM tensor holds
  /// (the optimizer's 0-d step counts).
  std::function<absl::Status(absl::Span<const host::HostBuffer* const> inputs,
                             absl::Span<host::HostBuffer* const> outputs, HbmContents& hbm)>
      stage;
  /// The cost model's report of one run (the program validated first);
  /// cost.total_ns is the estimate.
  CostReport cost;
};

/// The tile program of `node` (operand types `operand_types`), validated
/// and costed, or an error naming the op and why it cannot be tiled.
absl::StatusOr<LoweredOp> lower_node(const GraphNode& node,
                                     absl::Span<const TensorType> operand_types);

/// Whether `node` transposes a matrix (a permute {1, 0} of a rank-2 operand).
bool is_matrix_transpose(const GraphNode& node, absl::Span<const TensorType> types);
/// Whether `node` swaps the heads and sequence dims of attention's operand
/// or result: a permute of a rank r >= 3 operand exchanging dims r - 3 and
/// r - 2 ([..., S, H, D] <-> [..., H, S, D]; its own inverse).
bool is_head_permute(const GraphNode& node, absl::Span<const TensorType> types);
/// A 2-d matmul whose first operand is transpose(X) (`a_t`; types[0] is
/// X [K, M]) and/or whose second is transpose(Y) (`b_t`; types[1] is Y
/// [N, K]): the operands are bound to X's and Y's bytes. X is
/// tiled_matmul_program's A^T as it is (no transposes at all), Y is B^T
/// (transposed on chip, TiledMatmulShape::b_transposed). NeuronBackend
/// runs no program for a transpose all of whose uses are such matmuls.
absl::StatusOr<LoweredOp> lower_matmul_of_transposes(const GraphNode& node,
                                                     absl::Span<const TensorType> types, bool a_t,
                                                     bool b_t);

/// Runs `op` on `sim`: stages the inputs into HBM, runs, copies the results
/// out (each output buffer has the node's result type).
absl::Status run_lowered(const LoweredOp& op, Simulator& sim,
                         absl::Span<const host::HostBuffer* const> inputs,
                         absl::Span<host::HostBuffer* const> outputs);

} // namespace mstep::neuron
