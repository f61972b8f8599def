// The ops of the mstep dialect (generated from the *Ops.td files next to
// this header). Includes MLIR headers; see MstepDialect.h.
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mstep/ir/dialect/MstepDialect.h"

#define GET_OP_CLASSES
#include "mstep/ir/dialect/CreationOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/ElementwiseOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/FusionOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/ReductionOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/ShapeOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/LinalgOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/NNOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/AttentionOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/OptimizerOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/CustomOps.h.inc"
#define GET_OP_CLASSES
#include "mstep/ir/dialect/CollectiveOps.h.inc"
