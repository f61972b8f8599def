// neuron's compile half, for now: the module back to a TraceGraph, run by
// make_neuron_executable (every op a host fallback). The tile lowering
// (issue 19's pipeline) replaces it op family by op family.
#include <cstdio>

#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/NkiSource.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::neuron {

namespace {

class NeuronCompiler final : public BackendCompiler {
public:
  absl::string_view backend_name() const override { return "neuron"; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend& backend,
                                                      const RuntimeOptions& options) override {
    auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
    if (!step) return absl::InvalidArgumentError("neuron backend: the module has no func @step");
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Executable> exe,
                           make_neuron_executable(std::move(graph)));
    // MSTEP_DUMP_DIR: each tile program's NKI kernel (NkiSource.h); a dump
    // that cannot be written is reported, the step still runs.
    if (!options.dump_dir.empty())
      for (const TileProgram* program : lowered_programs(*exe))
        if (absl::StatusOr<std::string> path = write_nki_source(options.dump_dir, *program);
            !path.ok())
          std::fprintf(stderr, "mstep: %s\n", std::string(path.status().message()).c_str());
    return exe;
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "neuron", [] { return std::unique_ptr<BackendCompiler>(new NeuronCompiler()); });
  return true;
}();

} // namespace
} // namespace mstep::neuron
