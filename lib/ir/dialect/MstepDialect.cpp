// The mstep dialect: registration of every op family, the enum attributes,
// and the helpers all families' verifiers share.
#include "mstep/ir/dialect/MstepDialect.h"

#include "lib/ir/dialect/Verification.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "mstep/ir/dialect/MstepDialect.cpp.inc"
#include "mstep/ir/dialect/MstepEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "mstep/ir/dialect/MstepAttrs.cpp.inc"

namespace mstep::dialect {

void MstepDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "mstep/ir/dialect/MstepAttrs.cpp.inc"
      >();
  registerCreationOps();
  registerElementwiseOps();
  registerFusionOps();
  registerReductionOps();
  registerShapeOps();
  registerLinalgOps();
  registerNNOps();
  registerAttentionOps();
  registerOptimizerOps();
  registerCustomOps();
  registerCollectiveOps();
}

llvm::ArrayRef<int64_t> dimsOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getShape();
}

mlir::Type elementTypeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getElementType();
}

}  // namespace mstep::dialect
