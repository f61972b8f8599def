// Trace graph <-> MLIR: the importer that turns a cut of the trace graph
// into a module of the `mstep` dialect (the start of the compile path), and
// the exporter that turns a function of the dialect back into a TraceGraph
// (how the ref backend runs a compiled module with its kernels).
//
// Includes MLIR headers: compiler code only (docs/architecture.md).
#pragma once

#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

/// Builds `module { func.func @<name>(inputs...) -> (outputs...) }` with one
/// mstep op per node, in the graph's order:
/// - each input is an argument carrying `mstep.role` ("parameter",
///   "optimizer_state", "rng_state", "device_scalar" or "input") and, when
///   the program replaced it in place, `mstep.aliased_result = <output>`
///   (the argument is donated to that result);
/// - attributes follow the dialect (MstepDialect.td describes the mapping);
/// - each op's location names its node (`"%12"`), so diagnostics point at
///   the trace node.
/// The module is verified; an error means the graph broke an op's rules
/// (an internal error: the tracer checks every op as it is recorded).
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> import_trace_graph(const TraceGraph& graph,
                                                                     mlir::MLIRContext& context,
                                                                     llvm::StringRef name = "step");

/// The inverse of import_trace_graph for a function of plain mstep ops:
/// export(import(g)) has the nodes, attributes, inputs, roles, donations and
/// outputs of g. Fused ops (mstep.fusion, mstep.multi_tensor_update) export
/// to the trace ops of the same name; an op with no trace form is an error
/// that names it.
absl::StatusOr<TraceGraph> export_trace_graph(mlir::func::FuncOp func);

/// The TensorType of a static ranked tensor type of an mstep dtype; an
/// error names the type otherwise.
absl::StatusOr<TensorType> tensor_type_from_mlir(mlir::Type type);

/// Registers every dialect an imported module may contain.
void register_mstep_dialects(mlir::MLIRContext& context);

}  // namespace mstep
