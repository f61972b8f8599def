// Verifier and registration of mstep.custom.
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"

#define GET_OP_CLASSES
#include "mstep/ir/dialect/CustomOps.cpp.inc"

namespace mstep::dialect {

/// A name, at least one result, and attribute values the trace graph can
/// hold (i64, f64, array<i64>, an element type).
llvm::LogicalResult CustomOp::verify() {
  if (getOpName().empty()) return emitOpError("needs a non-empty op_name");
  if (getNumResults() == 0) return emitOpError("'") << getOpName() << "' has no results";
  for (mlir::NamedAttribute a : getUserAttrs()) {
    mlir::Attribute v = a.getValue();
    auto i = llvm::dyn_cast<mlir::IntegerAttr>(v);
    auto f = llvm::dyn_cast<mlir::FloatAttr>(v);
    if ((i && i.getType().isInteger(64)) || (f && f.getType().isF64()) ||
        llvm::isa<mlir::DenseI64ArrayAttr>(v) || llvm::isa<mlir::TypeAttr>(v))
      continue;
    return emitOpError("'") << getOpName() << "': attribute '" << a.getName().strref() << "' is "
                            << v << "; user attributes are i64, f64, array<i64> or "
                            << "an element type";
  }
  return mlir::success();
}

void MstepDialect::registerCustomOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/CustomOps.cpp.inc"
      >();
}

} // namespace mstep::dialect
