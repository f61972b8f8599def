// Verifiers and registration of the collectives (CollectiveOps.td): the
// result shape each one implies for its world size.
#include "lib/ir/dialect/Verification.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"

#define GET_OP_CLASSES
#include "mstep/ir/dialect/CollectiveOps.cpp.inc"

namespace mstep::dialect {

namespace {

/// The result has the input's shape, except dim `dim` (when >= 0), which is
/// the input's times `num` / `den`.
llvm::LogicalResult verifyCollectiveShape(mlir::Operation* op, mlir::Value input,
                                          mlir::Value result, int64_t dim, int64_t num,
                                          int64_t den) {
  llvm::SmallVector<int64_t> want(dimsOf(input));
  if (dim >= static_cast<int64_t>(want.size()))
    return op->emitOpError() << "dim " << dim << " is out of range for input " << input.getType();
  if (dim >= 0) {
    if (want[dim] * num % den != 0)
      return op->emitOpError() << "dim " << dim << " of input " << input.getType()
                               << " is not divisible by the world size " << den;
    want[dim] = want[dim] * num / den;
  }
  if (dimsOf(result) != llvm::ArrayRef<int64_t>(want))
    return op->emitOpError() << "result shape " << shapeOf(result) << " must be "
                             << rules::shapeString(want);
  return mlir::success();
}

}  // namespace

llvm::LogicalResult AllReduceOp::verify() {
  return verifyCollectiveShape(*this, getInput(), getResult(), -1, 1, 1);
}

llvm::LogicalResult AllGatherOp::verify() {
  return verifyCollectiveShape(*this, getInput(), getResult(), static_cast<int64_t>(getDim()),
                               static_cast<int64_t>(getWorldSize()), 1);
}

llvm::LogicalResult BroadcastOp::verify() {
  if (getRoot() >= getWorldSize())
    return emitOpError() << "root " << getRoot() << " is not a rank of a world of "
                         << getWorldSize();
  return verifyCollectiveShape(*this, getInput(), getResult(), -1, 1, 1);
}

llvm::LogicalResult ReduceScatterOp::verify() {
  return verifyCollectiveShape(*this, getInput(), getResult(), static_cast<int64_t>(getDim()), 1,
                               static_cast<int64_t>(getWorldSize()));
}

void MstepDialect::registerCollectiveOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/CollectiveOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect
