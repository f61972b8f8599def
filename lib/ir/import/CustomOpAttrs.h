// What the exporter (ExportTraceGraph.cpp) and the mstep.custom registry
// check (CustomOpCheck.cpp) share: MLIR types as mstep types, and an
// mstep.custom's version and attributes in trace form. Library-internal.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlir/IR/Types.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// The dtype of an element type; InvalidArgument naming it when mstep has
/// none.
absl::StatusOr<DType> to_dtype(mlir::Type t);
/// The mstep type of a static ranked tensor type; InvalidArgument otherwise.
absl::StatusOr<TensorType> to_tensor_type(mlir::Type t);

/// The op's `version` attribute, 1 when absent.
int64_t custom_op_version(dialect::CustomOp op);

/// Appends `op`'s `user_attrs` to `attrs` as `custom_attr` entries in
/// `custom`'s declaration order, typed by its schema (a left-out attribute
/// with a default gets it). InvalidArgument naming the op and the attribute
/// for one the op does not declare, a missing one without default, or a
/// value of the wrong type.
absl::Status append_custom_attrs(dialect::CustomOp op, const CustomOp& custom, AttrList& attrs);

} // namespace mstep
