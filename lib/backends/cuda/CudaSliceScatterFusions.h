// A fusion that reads slice_scatters in one kernel (issue 21: fewer
// launches). The gradient of q, k and v taken as slices of one packed
// projection is three slice_scatters of the heads' gradients into zeros,
// added by a fusion: per layer three copies of the whole [b, s, 3·d]
// base, three scatters and the add, seven launches. A slice_scatter read
// only by a fusion (its result the fusion's shape; the fusion's other
// inputs of that shape or one element) joins it (CudaOpGroups.h, marked
// kSliceScatterFusionAttr): one launch over the fusion's elements, each
// slice_scatter's element its source's where the element is in the
// slice and its base's elsewhere (what its own kernels store), then the
// fusion's scalar forms: the bytes of the kernels it replaces. With
// MSTEP_CUDA_ROW_REDUCTION=fused only. Library-internal; MLIR.
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

/// The attribute marking a fusion with its slice_scatters (a unit
/// attribute).
inline constexpr const char kSliceScatterFusionAttr[] = "mstep.slice_scatter_fusion";

/// Wraps each fusion of `step` that reads slice_scatters with them;
/// `views` is the views analysis of the step as it is. Returns the number
/// wrapped.
int fuse_slice_scatters(mlir::func::FuncOp step, const CudaViews& views);

/// Whether `op` is such a wrapped fusion.
bool is_slice_scatter_fusion(mlir::Operation* op);

/// Fills the empty entry block of `func` (parameters: memrefs of the
/// group's inputs, op_group_inputs' order, then of its results) with its
/// loop and a return.
absl::Status build_slice_scatter_fusion_loops(mlir::Operation* group, mlir::func::FuncOp func);

} // namespace mstep::cuda
