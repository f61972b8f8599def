// What the passes know of mstep.custom calls from the custom-op registry:
// the registered op a call names, and the expansion of a call into the
// mstep ops of its scalar form (mstep/runtime/CustomScalarForm.h), which
// mstep-fuse-elementwise runs before grouping.
#pragma once

#include <memory>

#include "mlir/IR/Block.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep::passes {

/// The registered op `call` names (its op_name and `version`, 1 when
/// absent), or null when this process has not registered it.
std::shared_ptr<const CustomOp> findRegisteredCustomOp(dialect::CustomOp call);

/// Replaces each mstep.custom at the top level of `block` whose op has a
/// scalar form, and whose inputs and results all have one ranked tensor
/// type of a floating element type, by the form's mstep ops (constants are
/// 0-d mstep.constant, a 0-d output is filled to the result's shape with
/// mstep.full). Other calls are left alone: their kernels run. Returns the
/// number of calls replaced.
unsigned expandCustomScalarForms(mlir::Block& block);

}  // namespace mstep::passes
