// Independent elementwise kernels in one launch (issue 21: fewer
// launches). A training step under autocast casts each parameter to bf16
// before its matmul and each weight gradient back to f32 after its own:
// dozens of small kernels that nothing orders against each other. A batch
// is a set of such ops: mstep.fusion and standalone elementwise ops whose
// operands and results are all one shape (or scalars), none reading
// another's result. First those the optimizer update reads first move down
// to just before it (never past a collective or a custom op), so that the
// gradients' casts meet there; then runs of
// independent ones in program order become a batch (CudaOpGroups.h,
// marked kElementwiseBatchAttr), one launch over the members' elements
// laid end to end, each lane computing its member's element with the
// member's scalar forms (the bytes of the member's own kernel).
// With MSTEP_CUDA_ROW_REDUCTION=fused (the default) only. Library-internal;
// MLIR.
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

/// The attribute marking a batch (a unit attribute).
inline constexpr const char kElementwiseBatchAttr[] = "mstep.elementwise_batch";

/// Sinks and batches `step`'s independent elementwise ops (after its row
/// groups); `views` is the views analysis of the step as it is. Returns
/// the number of batches.
int batch_elementwise(mlir::func::FuncOp step, const CudaViews& views);

/// Whether `op` is a batch.
bool is_elementwise_batch(mlir::Operation* op);

/// Fills the empty entry block of `func` (parameters: memrefs of the
/// batch's inputs, op_group_inputs' order, then of its results) with the
/// batch's loop and a return.
absl::Status build_elementwise_batch_loops(mlir::Operation* batch, mlir::func::FuncOp func);

} // namespace mstep::cuda
