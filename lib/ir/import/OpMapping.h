// How trace-graph ops and attributes are spelled in the `mstep` dialect:
// the one table the importer and the exporter both read, so the two stay
// inverse to each other. Library-internal.
#pragma once

#include <optional>

#include "llvm/ADT/StringRef.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/OpKind.h"

namespace mstep::ir_mapping {

/// "mstep.add"; "mstep.sdpa_backward" for sdpa_grad.
llvm::StringRef mlir_op_name(OpKind op);
/// The trace op of an mstep op name, or nullopt.
std::optional<OpKind> trace_op(llvm::StringRef mlir_name);

/// How a trace attribute appears on the MLIR op.
enum class AttrEncoding {
  plain,      // int64 -> i64, double -> f64, int list -> array<i64>
  boolean,    // int64 0/1 -> BoolAttr
  gelu_approximation, loss_reduction, padding_side, softmax_mode,  // int code -> enum attr
  optimizer_kind, reduce_op,                                       // int code -> enum attr
  implied,    // not an attribute: the result type (shape, dtype) or an
              // optional operand's presence (has_mask, has_weight, ...)
};

struct AttrSpelling {
  llvm::StringRef name;  // the MLIR attribute name
  AttrEncoding encoding;
};

/// The spelling of `name` on op `op` (names differ only on sdpa).
AttrSpelling mlir_attr(OpKind op, AttrName name);
/// The trace attribute an MLIR attribute of `op` stands for, or nullopt for
/// attributes with no trace form (operandSegmentSizes, discardable mstep.*).
std::optional<AttrName> trace_attr(OpKind op, llvm::StringRef mlir_name);

}  // namespace mstep::ir_mapping
