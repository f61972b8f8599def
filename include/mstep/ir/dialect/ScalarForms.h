// Scalar forms of the fusible mstep ops: one element of an op's result as
// arith and math ops on one element of each operand. Shared by every
// lowering that builds elementwise loop bodies from mstep ops:
// mstep-lower-to-linalg (its linalg.generic bodies) and the cpu backend's
// fusion kernel emitter (its vectorized tiles).
#pragma once

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mstep::dialect {

/// True when `emitScalarOp` knows `op`: every mstep op with the Fusible trait
/// today. An op without a scalar form (and any fusion holding one) is left
/// in place.
bool hasScalarForm(mlir::Operation* op);

/// Emits the scalar computation of `op` (which `hasScalarForm`) at `b`'s
/// insertion point: `operands` are single elements of `op`'s operands, in
/// their element types; the result is one element of `op`'s result.
/// bf16 and f16 arithmetic is computed in f32 and rounded once per op, as
/// PyTorch's CPU kernels do.
mlir::Value emitScalarOp(mlir::OpBuilder& b, mlir::Operation* op, mlir::ValueRange operands);

/// Converts one element to `to` with PyTorch's `to(dtype)` semantics:
/// floats round to nearest even, float to int truncates toward zero,
/// nonzero (and NaN) converts to true, bool converts to 0 or 1.
mlir::Value convertScalar(mlir::OpBuilder& b, mlir::Location loc, mlir::Value value, mlir::Type to);

/// The value of `mstep.constant` (a double) as an attribute of `type`:
/// integral for integer types, 0 or 1 for i1 (the op's verifier checks).
mlir::TypedAttr constantAttr(mlir::Builder& b, mlir::Type type, double value);

/// True for the element types computed in f32 (bf16 and f16).
bool isHalfFloat(mlir::Type type);

} // namespace mstep::dialect
