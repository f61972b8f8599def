// The kernel of a row group (CudaRowGroups.h): one block-per-row loop
// (CudaBlockRows.h' row_loops) over the group's rows. Each reduction of
// the group is a statistic of the row, in program order: its term for
// element j is the reduced value at (r, j), computed from the group's
// inputs and the statistics before it; its finish is the reduction's own
// (an f64 sum, / n for a mean, rounded once to the result's dtype, as the
// reduction's kernel alone does: the same bits). Every elementwise value
// is its ops' scalar forms (ScalarForms.h, as mstep-lower-to-linalg
// emits them) on the values it reads, built again in each phase that
// needs it (the GPU recomputes instead of storing). The group's wide
// results are stored in a last phase, its per-row results by thread 0.
// Library-internal; MLIR.
#pragma once

#include "absl/status/status.h"

namespace mlir {
class Operation;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace mstep::cuda {

/// Fills the empty entry block of `func` (parameters: memrefs of the
/// group's inputs, op_group_inputs' order, then of its results) with
/// `group`'s loops and a return.
absl::Status build_row_group_loops(mlir::Operation* group, mlir::func::FuncOp func);

} // namespace mstep::cuda
