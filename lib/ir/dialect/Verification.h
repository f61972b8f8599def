// Verifier helpers shared by the op families of the mstep dialect, and the
// functions the generated op definitions call (ODS extraClassDefinition).
// Library-internal.
#pragma once

#include <string>

#include "lib/ir/dialect/ShapeRules.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"

namespace mstep::dialect {

// Upstream's DenseArray* attribute constraints name the attribute class
// unqualified; the generated verifiers live in this namespace.
using ::mlir::DenseI64ArrayAttr;

/// The dims of a statically shaped tensor value (ODS constraints make
/// every mstep operand and result one before any C++ verifier runs).
llvm::ArrayRef<int64_t> dimsOf(mlir::Value value);
inline int64_t rankOf(mlir::Value value) { return static_cast<int64_t>(dimsOf(value).size()); }
/// "[2, 3]"
inline std::string shapeOf(mlir::Value value) { return rules::shapeString(dimsOf(value)); }
mlir::Type elementTypeOf(mlir::Value value);

/// Binary/ternary elementwise ops: the operands (named `names`, in order)
/// broadcast with numpy rules and the result has the broadcast shape.
llvm::LogicalResult verifyBroadcastingOperands(mlir::Operation* op,
                                               llvm::ArrayRef<llvm::StringRef> names);

/// The extra rule a reduction adds to the common ones.
enum class ReductionCheck {
  none,
  nonEmpty,    // no identity element: every reduced dim has size > 0
  singleOrAll, // argmax: one dim, or every dim
};

/// Reductions: `dims` sorted, unique and in range, and the result has the
/// reduced shape.
llvm::LogicalResult verifyReduction(mlir::Operation* op, llvm::ArrayRef<int64_t> dims, bool keepdim,
                                    ReductionCheck check);

}  // namespace mstep::dialect
