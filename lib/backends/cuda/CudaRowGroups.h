// Ops over the same rows in one kernel (issue 21: fewer launches). A
// training step decomposes its norms' backward into reductions over the
// last dim and the elementwise fusions between them (layer_norm's backward:
// four means and five fusions, fourteen launches); each of those ops alone
// is a kernel that reads and writes whole [rows, n] tensors. A row group
// is such a set of ops on one geometry W = [b..., n] (rows = prod(b)):
//   - sums and means over the last dim, keepdim, of a float [b..., n];
//   - softmax and log_softmax over the last dim, layer_norm and rms_norm
//     over it (weight and bias [n]), of a float [b..., n];
//   - mstep.fusion and standalone elementwise ops whose every value
//     broadcasts to W (numpy broadcasting, right-aligned: W itself, per
//     row [b..., 1], a column [n], a scalar, or any other such as a
//     position embedding's [s, n] in W = [batch, s, n]), and whose results
//     are wide or per-row;
// convex (no path leaves the group and comes back), seeded by a reduction
// and grown over producer/consumer edges (inductor's persistent
// reductions). The group becomes one block-per-row kernel
// (CudaRowGroupLoops.h): each reduction a statistic of the row (a norm
// or softmax its two), each
// elementwise value recomputed from the group's inputs where it is needed,
// the values read outside the group stored once.
//
// In the step, a group is wrapped as CudaOpGroups.h says, marked
// kRowGroupAttr (its value: W). Ops the views analysis (CudaViews.h) gives
// a role (views, epilogues, bias gradients) stay outside groups.
// Library-internal; MLIR.
#pragma once

#include <cstdint>
#include <optional>

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Value.h"

namespace mlir {
class Operation;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace mstep::cuda {

class CudaViews;
struct CudaCodegenOptions;

/// The attribute marking a row group (a DenseI64ArrayAttr: its W).
inline constexpr const char kRowGroupAttr[] = "mstep.row_group";

/// How a value's elements map onto a row group's (row r, element j).
enum class RowClass {
  wide,     ///< r * n + j
  per_row,  ///< r
  column,   ///< j
  scalar,   ///< 0
  strided,  ///< another broadcast: r's coordinates at the value's strides (0
            ///< where it broadcasts), + j where its last dim is n
};

/// `shape`'s class against W, or nullopt (it does not broadcast to W).
std::optional<RowClass> row_class(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> wide);

/// Wraps each row group of `step` (after the cuda pipeline) in its
/// scf.execute_region; `views` is the views analysis of the step as it
/// is. Returns the number of groups.
int group_rows(mlir::func::FuncOp step, const CudaViews& views, const CudaCodegenOptions& options);

/// The statistics `op` adds to a row group's kernel: 1 for a sum, a mean
/// or rms_norm, 2 for softmax, log_softmax and layer_norm, 0 for an
/// elementwise op.
size_t row_statistics(mlir::Operation* op);

/// Whether `op` is a row group.
bool is_row_group(mlir::Operation* op);

/// A row group's W.
llvm::SmallVector<int64_t> row_group_shape(mlir::Operation* group);

} // namespace mstep::cuda
