// The mstep MLIR dialect, its enums and enum attributes.
//
// Includes MLIR headers: only compiler code (lib/ir/dialect, lib/passes,
// importers, backends' compile paths, tools) includes this file. The
// tracer, the Tensor API and the cache key never do (DESIGN.md).
#pragma once

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"

#include "mstep/ir/dialect/MstepDialect.h.inc"
#include "mstep/ir/dialect/MstepEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "mstep/ir/dialect/MstepAttrs.h.inc"

namespace mstep::dialect::OpTrait {

/// Marks an op that may sit inside an `mstep.fusion` region: elementwise
/// (with broadcasting), `expand`, `cast`, `constant`, `full`. Test with
/// `op->hasTrait<mstep::dialect::OpTrait::Fusible>()`.
template <typename ConcreteType>
class Fusible : public mlir::OpTrait::TraitBase<ConcreteType, Fusible> {};

}  // namespace mstep::dialect::OpTrait
