// Verifier and registration of mstep.custom.
#include <atomic>

#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/CustomOpCheck.h"
#include "mstep/ir/dialect/MstepOps.h"

#define GET_OP_CLASSES
#include "mstep/ir/dialect/CustomOps.cpp.inc"

namespace mstep::dialect {

namespace {
std::atomic<CustomOpChecker> g_checker{nullptr};
} // namespace

void set_custom_op_checker(CustomOpChecker checker) { g_checker.store(checker); }

/// A name, at least one result, a version of 1 or more when given, and
/// attribute values the trace graph can hold (i64, f64, i1, array<i64>, a
/// string, an element type); then the installed check against the
/// registered op (CustomOpCheck.h).
llvm::LogicalResult CustomOp::verify() {
  if (getOpName().empty()) return emitOpError("needs a non-empty op_name");
  if (getNumResults() == 0) return emitOpError("'") << getOpName() << "' has no results";
  if (mlir::Attribute version = (*this)->getAttr("version")) {
    auto v = llvm::dyn_cast<mlir::IntegerAttr>(version);
    if (!v || !v.getType().isInteger(64) || v.getInt() < 1)
      return emitOpError("'") << getOpName() << "': version is " << version
                              << "; it is an i64 of 1 or more";
  }
  for (mlir::NamedAttribute a : getUserAttrs()) {
    mlir::Attribute v = a.getValue();
    auto i = llvm::dyn_cast<mlir::IntegerAttr>(v);
    auto f = llvm::dyn_cast<mlir::FloatAttr>(v);
    if ((i && (i.getType().isInteger(64) || i.getType().isInteger(1))) ||
        (f && f.getType().isF64()) || llvm::isa<mlir::DenseI64ArrayAttr>(v) ||
        llvm::isa<mlir::StringAttr>(v) || llvm::isa<mlir::TypeAttr>(v))
      continue;
    return emitOpError("'") << getOpName() << "': attribute '" << a.getName().strref() << "' is "
                            << v << "; user attributes are i64, f64, bool, array<i64>, "
                            << "a string or an element type";
  }
  if (CustomOpChecker check = g_checker.load()) return check(*this);
  return mlir::success();
}

void MstepDialect::registerCustomOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/CustomOps.cpp.inc"
      >();
}

} // namespace mstep::dialect
