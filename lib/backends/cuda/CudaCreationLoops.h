// The loops of the creation ops and of the shape ops that write a literal
// on cuda, one lane per element: mstep.constant (a 0-d literal not fused
// into its user: a pad's value), mstep.rand and mstep.randn (Philox4x32-10
// lanes drawing mstep/core/Philox.h's words), mstep.triu and mstep.tril
// (zero outside the triangle), mstep.pad (the value outside the input)
// (RefCreation.cpp, RefShape.cpp). Library-internal; MLIR.
#pragma once

#include <array>

#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mstep::cuda {

namespace loops {
class Nest;  // CudaLoopNest.h (not included: its `Value` is MLIR's)

/// Words 0 and 1 of Philox4x32-10 for `counter` under key `seed` (both
/// i64), as mstep::Philox::block computes them.
std::array<mlir::Value, 2> philox_words(Nest& nest, mlir::Value seed, mlir::Value counter);
}  // namespace loops

/// Whether `op` is one of the ops build_creation_loops builds.
bool builds_creation_loops(mlir::Operation* op);

/// `op`'s loops in `nest` (parameters: its operands, then its result).
void build_creation_loops(mlir::Operation* op, loops::Nest& nest);

}  // namespace mstep::cuda
