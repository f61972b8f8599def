// The mstep MLIR dialect, its enums and enum attributes.
//
// Includes MLIR headers: only compiler code (lib/ir/dialect, lib/passes,
// importers, backends' compile paths, tools) includes this file. The
// tracer, the Tensor API and the cache key never do (docs/architecture.md).
#pragma once

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "mstep/ir/dialect/MstepDialect.h.inc"
#include "mstep/ir/dialect/MstepEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "mstep/ir/dialect/MstepAttrs.h.inc"

namespace mstep::dialect {

/// The optimizer-state tensors each parameter has in an
/// mstep.multi_tensor_update of `kind` (sgd: a momentum buffer iff
/// momentum; adam, adamw: exp_avg, exp_avg_sq, max_exp_avg_sq iff amsgrad;
/// adadelta: square_avg, acc_delta).
int64_t optimizerStateSlots(OptimizerKind kind, bool hasMomentum, bool amsgrad);

}  // namespace mstep::dialect

namespace mstep::dialect::OpTrait {

/// Marks an op that may sit inside an `mstep.fusion` region: elementwise
/// (with broadcasting), `expand`, `cast`, `constant`, `full`. Test with
/// `op->hasTrait<mstep::dialect::OpTrait::Fusible>()`.
template <typename ConcreteType>
class Fusible : public mlir::OpTrait::TraitBase<ConcreteType, Fusible> {};

}  // namespace mstep::dialect::OpTrait
