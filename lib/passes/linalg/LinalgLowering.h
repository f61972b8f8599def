// Internal interface of mstep-lower-to-linalg (lib/passes/LowerToLinalg.cpp):
// the conversion patterns of each op family and the tensor helpers they
// share. Library-internal; include only from lib/passes. The scalar forms
// the patterns build loop bodies from are shared with the cpu backend:
// mstep/ir/dialect/ScalarForms.h.
#pragma once

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mstep/ir/dialect/ScalarForms.h"

namespace mstep::passes::linalg_lowering {

//===----------------------------------------------------------------------===//
// Pattern families. Each one adds its patterns and marks the ops it lowers
// illegal on `target`, so the pass file only wires the families together.
//===----------------------------------------------------------------------===//

/// Elementwise ops (every op with a scalar form, see `dialect::hasScalarForm`) and
/// `mstep.fusion` regions. Sets the dialect-wide legality rule of `mstep`:
/// the other families override it for their ops with op-specific rules.
void populateElementwiseToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

/// `mstep.sum`, `mean`, `max`, `min`.
void populateReductionToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

/// `mstep.matmul`, any rank and any broadcast of the batch dims.
void populateMatmulToLinalg(mlir::RewritePatternSet& patterns, mlir::ConversionTarget& target);

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
