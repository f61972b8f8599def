// The one way the runtime reaches the compiler: a trace graph in, an
// executable out (import -> pass pipeline -> backend compile), and the
// textual form of compiled modules that the disk cache and the NaN-guard
// reproducers store. No MLIR in this header, so the tracer stays free of
// MLIR headers. Library-internal; not thread-safe (one MLIRContext, used
// from the tracer's thread).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Backend.h"

namespace mlir {
class ModuleOp;
}

namespace mstep {

struct CompileOptions {
  bool fuse = true;
  /// When non-empty, the MLIR after import and after every pass is written
  /// to <dump_dir>/graph_<key>/NN_<stage>.mlir.
  std::string dump_dir;
  uint64_t key = 0;
  /// Also print the optimized module (CompiledGraph::module_text), for
  /// the disk cache.
  bool keep_module_text = false;
};

struct CompiledGraph {
  std::unique_ptr<Executable> executable;
  /// The module after the pass pipeline, when keep_module_text was set.
  std::string module_text;
  /// mstep.arena_size of the planned step function (0 when unplanned).
  int64_t arena_bytes = 0;
};

/// Imports `graph`, runs the pipeline and compiles the result on `backend`,
/// which reads its settings in `runtime`.
absl::StatusOr<CompiledGraph> compile_graph(const TraceGraph& graph, Backend& backend,
                                            const CompileOptions& options,
                                            const RuntimeOptions& runtime);

/// Imports `graph`, runs the pipeline for the compile half registered as
/// `backend_name` and returns its stored form (BackendCompiler::
/// compile_stored): ahead-of-time compilation, with no backend instance.
absl::StatusOr<std::string> compile_graph_stored(const TraceGraph& graph,
                                                 absl::string_view backend_name,
                                                 const CompileOptions& options,
                                                 const RuntimeOptions& runtime);

/// Imports `graph`, runs the pipeline for the compile half registered as
/// `backend_name` (as `runtime` sets it) and hands the optimized module to
/// `use`: for a tool that turns it into something else than an executable
/// (mstep-aot).
absl::Status with_optimized_module(const TraceGraph& graph, absl::string_view backend_name,
                                   const CompileOptions& options, const RuntimeOptions& runtime,
                                   const std::function<absl::Status(mlir::ModuleOp)>& use);

/// Loads a disk-cache payload (Executable::serialize()): through
/// Backend::deserialize when the backend has a native format, otherwise
/// parses the module text and hands it to `backend` without running the
/// pipeline again. A payload that does not load is an error, never a crash.
absl::StatusOr<std::unique_ptr<Executable>> load_compiled_module(absl::string_view text,
                                                                 Backend& backend,
                                                                 const RuntimeOptions& runtime);

/// The imported (not yet optimized) module of `graph` as text.
absl::StatusOr<std::string> trace_graph_to_mlir(const TraceGraph& graph);
/// Parses a module printed by trace_graph_to_mlir (or written by hand in the
/// same form) back into a graph: its func @step, or its only function.
/// Errors carry the parser's and verifier's diagnostics with locations.
absl::StatusOr<TraceGraph> trace_graph_from_mlir(absl::string_view text);

/// `graph` as a StableHLO module (compiler/StableHloExport.h) whose one
/// function is `func.func public @main`. `input_names` / `output_names`
/// (empty, or one per input / output) become `mstep.name` attributes of
/// its arguments / results. An op with no StableHLO form is Unimplemented,
/// naming the op and its trace node (`%12`).
absl::StatusOr<std::string> trace_graph_to_stablehlo(const TraceGraph& graph,
                                                     const std::vector<std::string>& input_names,
                                                     const std::vector<std::string>& output_names);

}  // namespace mstep
