// StableHLO out: a module of the mstep dialect (a step function as
// import_trace_graph builds it: forward, backward and optimizer, unfused)
// written as a StableHLO module in MLIR text, which XLA (jaxlib) and IREE
// (iree-compile) compile. `mstep-opt --mstep-export-stablehlo` and
// Graph::export_stablehlo use it.
//
// - Every func.func becomes a public func.func of the same name (the only
//   function of a module is named @main: XLA runs @main) whose body
//   is StableHLO ops in the generic form (stablehlo.dot_general,
//   broadcast_in_dim, reduce with a region, select, compare, convert, the
//   elementwise ops, reshape, transpose, slice, concatenate; dropout as an
//   explicit Philox4x32-10 in integer ops, drawing mstep's stream).
// - An argument with `mstep.aliased_result = N` (donated to result N) gets
//   `tf.aliasing_output = N : i32`, the attribute JAX writes for donated
//   buffers and XLA reads as an input/output alias; `mstep.role` and
//   `mstep.name` on arguments and results are kept.
// - An op with no StableHLO form is an error at the op's location naming
//   it; nothing is written then.
//
// Includes MLIR headers: compiler code only (docs/architecture.md).
#pragma once

#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace mstep {

/// Writes `module` as StableHLO text to `os`. On failure the error is
/// emitted as a diagnostic at the offending op and `os` is left untouched.
mlir::LogicalResult export_stablehlo(mlir::ModuleOp module, llvm::raw_ostream& os);

}  // namespace mstep
