// Every op of the mstep dialect, by family. Each family file is generated
// on its own (see CMakeLists.txt); this file is the whole set in one place,
// for documentation (mlir-tblgen -gen-op-doc).
#ifndef MSTEP_IR_DIALECT_MSTEPOPS_TD
#define MSTEP_IR_DIALECT_MSTEPOPS_TD

include "mstep/ir/dialect/CreationOps.td"
include "mstep/ir/dialect/ElementwiseOps.td"
include "mstep/ir/dialect/FusionOps.td"
include "mstep/ir/dialect/ReductionOps.td"
include "mstep/ir/dialect/ShapeOps.td"
include "mstep/ir/dialect/LinalgOps.td"
include "mstep/ir/dialect/NNOps.td"
include "mstep/ir/dialect/AttentionOps.td"
include "mstep/ir/dialect/OptimizerOps.td"
include "mstep/ir/dialect/CustomOps.td"
include "mstep/ir/dialect/CollectiveOps.td"

#endif  // MSTEP_IR_DIALECT_MSTEPOPS_TD
