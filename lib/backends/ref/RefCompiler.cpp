// The ref backend's compile half: the module, after the shared pipeline
// (ref adds no passes of its own), exported back to a TraceGraph that the
// runtime half interprets node by node.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::ref {

namespace {

class RefCompiler final : public BackendCompiler {
 public:
  absl::string_view backend_name() const override { return "ref"; }

  /// The reference runs each custom op's kernel, never its scalar form.
  bool fuses_custom_scalar_forms() const override { return false; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend&,
                                                      const RuntimeOptions&) override {
    auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
    if (!step) return absl::InvalidArgumentError("ref backend: the module has no func @step");
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
    return make_ref_executable(std::move(graph));
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "ref", [] { return std::unique_ptr<BackendCompiler>(new RefCompiler()); });
  return true;
}();

}  // namespace
}  // namespace mstep::ref
