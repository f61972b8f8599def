// The mstep compiler passes (declared in Passes.td) and their
// registration. Includes MLIR headers: compiler code and tools only.
#pragma once

#include <memory>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"
#include "mstep/ir/dialect/MstepDialect.h"

namespace mstep::passes {

#define GEN_PASS_DECL
#include "mstep/passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "mstep/passes/Passes.h.inc"

}  // namespace mstep::passes
