// Internal interface of mstep-lower-to-linalg (lib/passes/LowerToLinalg.cpp):
// the conversion patterns of each op family and the tensor and scalar
// helpers they share. Library-internal; include only from lib/passes.
#pragma once

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mstep::passes::linalg_lowering {

//===----------------------------------------------------------------------===//
// Pattern families. Each one adds its patterns and marks the ops it lowers
// illegal on `target`, so the pass file only wires the families together.
//===----------------------------------------------------------------------===//

/// Elementwise ops (every op with a scalar form, see `hasScalarForm`) and
/// `mstep.fusion` regions. Sets the dialect-wide legality rule of `mstep`:
/// the other families override it for their ops with op-specific rules.
void populateElementwiseToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

/// `mstep.sum`, `mean`, `max`, `min`.
void populateReductionToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

/// `mstep.matmul`, any rank and any broadcast of the batch dims.
void populateMatmulToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

//===----------------------------------------------------------------------===//
// Scalar forms of the fusible ops (ScalarOps.cpp).
//===----------------------------------------------------------------------===//

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

//===----------------------------------------------------------------------===//
// Tensor helpers (ElementwiseToLinalg.cpp).
//===----------------------------------------------------------------------===//

/// The indexing map that reads an operand of `operandShape` inside a loop
/// nest over `resultShape` with numpy broadcasting: shapes align on the
/// right, missing leading dims are dropped and a size-1 dim that the result
/// grows reads index 0. `operandShape` must broadcast to `resultShape`.
mlir::AffineMap broadcastingMap(llvm::ArrayRef<int64_t> operandShape,
                                llvm::ArrayRef<int64_t> resultShape, mlir::MLIRContext* context);

/// True when a tensor of `shape` broadcasts to `target` (numpy rules).
bool broadcastsTo(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> target);

/// `tensor.empty` of `shape` and `elementType`: the init of a linalg op.
mlir::Value createEmptyTensor(mlir::OpBuilder& b, mlir::Location loc, llvm::ArrayRef<int64_t> shape,
                              mlir::Type elementType);

/// `value` broadcast to `type` (same element type) by a `linalg.generic`
/// with a broadcasting input map; `value` itself when the types match.
mlir::Value broadcastTensor(mlir::OpBuilder& b, mlir::Location loc, mlir::Value value,
                            mlir::RankedTensorType type);

/// A `linalg.generic` that applies `fn` to every element of `value`,
/// producing a tensor of the same shape with `resultElementType`.
mlir::Value
mapElements(mlir::OpBuilder& b, mlir::Location loc, mlir::Value value, mlir::Type resultElementType,
            llvm::function_ref<mlir::Value(mlir::OpBuilder&, mlir::Location, mlir::Value)> fn);

} // namespace mstep::passes::linalg_lowering
