// Verifier and result-type syntax of mstep.multi_tensor_update.
#include <cmath>

#include "lib/ir/dialect/Verification.h"
#include "mlir/IR/Builders.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::dialect {

using llvm::LogicalResult;
using mlir::failure;
using mlir::success;

namespace {

/// `T1, T2, ...`: the types of params (or states), which are also the
/// types of the updated results, so the syntax gives them once.
mlir::ParseResult parseUpdatedTypes(mlir::OpAsmParser& parser,
                                    llvm::SmallVectorImpl<mlir::Type>& types,
                                    llvm::SmallVectorImpl<mlir::Type>& updated) {
  if (parser.parseTypeList(types)) return failure();
  updated.assign(types.begin(), types.end());
  return success();
}

void printUpdatedTypes(mlir::OpAsmPrinter& printer, mlir::Operation*, mlir::TypeRange types,
                       mlir::TypeRange) {
  llvm::interleaveComma(types, printer);
}

/// `%t0, %t1, ...`: the step counters (all tensor<i64>), each advanced
/// into a result of the same type.
mlir::ParseResult
parseStepCounters(mlir::OpAsmParser& parser,
                  llvm::SmallVectorImpl<mlir::OpAsmParser::UnresolvedOperand>& steps,
                  llvm::SmallVectorImpl<mlir::Type>& updated) {
  if (parser.parseOperandList(steps)) return failure();
  updated.assign(steps.size(), mlir::RankedTensorType::get({}, parser.getBuilder().getI64Type()));
  return success();
}

void printStepCounters(mlir::OpAsmPrinter& printer, mlir::Operation*, mlir::OperandRange steps,
                       mlir::TypeRange) {
  printer << steps;
}


}  // namespace

LogicalResult MultiTensorUpdateOp::verify() {
  const OptimizerKind kind = getKind();
  const llvm::StringRef kindName = stringifyOptimizerKind(kind);
  const size_t n = getParams().size();
  if (n == 0) return emitOpError("needs at least one parameter");
  if (getGrads().size() != n)
    return emitOpError() << "has " << n << " params but " << getGrads().size() << " grads";
  for (size_t i = 0; i < n; ++i)
    if (getGrads()[i].getType() != getParams()[i].getType())
      return emitOpError() << "grads #" << i << " has type " << getGrads()[i].getType()
                           << " but params #" << i << " has type " << getParams()[i].getType();

  // Hyperparameters: which ones this kind takes.
  const bool sgd = kind == OptimizerKind::sgd;
  const bool adam = kind == OptimizerKind::adam || kind == OptimizerKind::adamw;
  const bool adadelta = kind == OptimizerKind::adadelta;
  const struct {
    llvm::StringRef name;
    mlir::Value value;
    bool allowed, required;
  } hypers[] = {
      {"momentum", getMomentum(), sgd, false},
      {"dampening", getDampening(), sgd && getMomentum(), false},
      {"beta1", getBeta1(), adam, adam},
      {"beta2", getBeta2(), adam, adam},
      {"rho", getRho(), adadelta, adadelta},
      {"eps", getEps(), adam || adadelta, adam || adadelta},
  };
  for (const auto& h : hypers) {
    if (h.value && !h.allowed)
      return emitOpError() << h.name << " is not a hyperparameter of " << kindName
                           << (h.name == "dampening" && sgd ? " without momentum" : "");
    if (!h.value && h.required)
      return emitOpError() << kindName << " needs the hyperparameter " << h.name;
  }
  if (getNesterov() && (!sgd || !getMomentum() || getDampening()))
    return emitOpError("nesterov needs sgd with momentum and without dampening");
  if (getAmsgrad() && !adam) return emitOpError("amsgrad applies to adam and adamw only");

  // State, slot-major, each of its parameter's type.
  const int64_t slots = optimizerStateSlots(kind, static_cast<bool>(getMomentum()), getAmsgrad());
  if (getStates().size() != slots * n)
    return emitOpError() << kindName << " keeps " << slots << " state tensors per parameter ("
                         << slots * n << " for " << n << " params), got " << getStates().size();
  for (size_t i = 0; i < getStates().size(); ++i)
    if (getStates()[i].getType() != getParams()[i % n].getType())
      return emitOpError() << "states #" << i << " (slot " << i / n << " of params #" << i % n
                           << ") has type " << getStates()[i].getType() << ", expected "
                           << getParams()[i % n].getType();

  // Step counters: exactly for the rules that count steps.
  const bool counts = !sgd || getMomentum();
  if (getSteps().size() != (counts ? n : 0))
    return emitOpError() << kindName
                         << (sgd ? (counts ? " with momentum" : " without momentum") : "")
                         << " takes " << (counts ? n : 0) << " step counters, got "
                         << getSteps().size();

  // Clipping.
  if (getMaxGradNorm().has_value() != static_cast<bool>(getTotalGradNorm()))
    return emitOpError("returns total_grad_norm exactly when max_grad_norm is given");
  if (!getClippedGrads().empty()) {
    if (!getMaxGradNorm())
      return emitOpError("returns clipped_grads only when max_grad_norm is given");
    if (getClippedGrads().getTypes() != getGrads().getTypes())
      return emitOpError() << "returns " << getClippedGrads().size()
                           << " clipped_grads; expected none or one per grad (" << n
                           << "), each of its grad's type";
  }
  if (getMaxGradNorm()) {
    const double maxNorm = getMaxGradNorm()->convertToDouble();
    const double p = getGradNormType().convertToDouble();
    if (!std::isfinite(maxNorm) || maxNorm < 0)
      return emitOpError() << "max_grad_norm must be finite and >= 0, got "
                           << rules::formatDouble(maxNorm);
    if (!(p > 0))
      return emitOpError() << "grad_norm_type must be > 0 (or inf), got " << rules::formatDouble(p);
  }

  // Results mirror the operands (the syntax copies their types; a
  // builder could get them wrong).
  if (getNewParams().getTypes() != getParams().getTypes() ||
      getNewStates().getTypes() != getStates().getTypes() ||
      getNewSteps().size() != getSteps().size())
    return emitOpError("results must be the updated params, states and steps, each of its "
                       "operand's type");
  return success();
}

int64_t optimizerStateSlots(OptimizerKind kind, bool hasMomentum, bool amsgrad) {
  switch (kind) {
  case OptimizerKind::sgd:
    return hasMomentum ? 1 : 0;
  case OptimizerKind::adam:
  case OptimizerKind::adamw:
    return amsgrad ? 3 : 2;
  case OptimizerKind::adadelta:
    return 2;
  }
  return 0;
}

void MstepDialect::registerOptimizerOps() {
  addOperations<
#define GET_OP_LIST
#include "mstep/ir/dialect/OptimizerOps.cpp.inc"
      >();
}

}  // namespace mstep::dialect

#define GET_OP_CLASSES
#include "mstep/ir/dialect/OptimizerOps.cpp.inc"
