// Independent column sums over the same rows in one kernel pair (issue
// 21: fewer launches): a layer_norm's backward ends in two sums over the
// leading dims of [rows, n] values, its weight's and its bias's gradients,
// each a split column sum of two launches (CudaColumnSums.h). A run of
// such sums (sum or mean over leading dims, the same rows and columns,
// none reading another; CudaOpGroups.h' independent_runs) is wrapped as a
// batch (marked kColumnSumBatchAttr) whose two launches do every member's
// chunks and columns, each member's bytes those of its own kernels. With
// MSTEP_CUDA_ROW_REDUCTION=fused and MSTEP_CUDA_COLUMN_REDUCTION=split
// (the defaults) only. Library-internal; MLIR.
#pragma once

#include "absl/status/status.h"

namespace mlir {
class Operation;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace mstep::cuda {

class CudaViews;
struct CudaCodegenOptions;

/// The attribute marking a column-sum batch (a unit attribute).
inline constexpr const char kColumnSumBatchAttr[] = "mstep.column_sum_batch";

/// Batches `step`'s independent column sums; `views` is the views
/// analysis of the step as it is. Returns the number of batches.
int batch_column_sums(mlir::func::FuncOp step, const CudaViews& views,
                      const CudaCodegenOptions& options);

/// Whether `op` is a column-sum batch.
bool is_column_sum_batch(mlir::Operation* op);

/// Fills the empty entry block of `func` (parameters: memrefs of the
/// batch's inputs, op_group_inputs' order, then of its results) with the
/// batch's loops and a return.
absl::Status build_column_sum_batch_loops(mlir::Operation* batch, mlir::func::FuncOp func,
                                          const CudaCodegenOptions& options);

} // namespace mstep::cuda
