// libmstep_compiler for a machine that only runs: the six functions libmstep
// calls into the compiler, with no MLIR or LLVM behind them. A program
// linked against libmstep runs with it in place of the real library (the
// GPU check's bundle puts it first on LD_LIBRARY_PATH) as long as every
// graph it meets is in the disk cache in a backend's native form: filled
// ahead on a machine with the compiler (MSTEP_CACHE=<dir>,,,<backend>;
// lib/runtime/CrossDeviceCache.h). Whatever needs the compiler fails with
// an error that says so and how to fill the cache, never a crash.
#include "absl/strings/str_cat.h"
#include "lib/compiler/Compiler.h"
#include "mstep/compiler/StableHloImport.h"

namespace mstep {
namespace {

absl::Status no_compiler(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      " needs the compiler, and this libmstep_compiler is the runtime-only stand-in "
      "(lib/compiler/absent): run where mstep was built, or fill the disk cache there for this "
      "device with MSTEP_CACHE=<dir>,,,<backend> and run the same program here with "
      "MSTEP_CACHE=<dir>"));
}

}  // namespace

absl::StatusOr<CompiledGraph> compile_graph(const TraceGraph& graph, Backend& backend,
                                            const CompileOptions&, const RuntimeOptions&) {
  return no_compiler(absl::StrCat("a graph of ", graph.nodes.size(), " nodes and ",
                                  graph.input_types.size(),
                                  " inputs that is not in the disk cache for ", backend.name()));
}

absl::StatusOr<std::unique_ptr<Executable>> load_compiled_module(absl::string_view text,
                                                                 Backend& backend,
                                                                 const RuntimeOptions& runtime) {
  absl::StatusOr<std::unique_ptr<Executable>> native = backend.deserialize(text, runtime);
  if (!absl::IsUnimplemented(native.status())) return native;
  return no_compiler(absl::StrCat("a disk cache entry of ", backend.name(),
                                  " in module text (not a native form)"));
}

absl::StatusOr<std::string> trace_graph_to_mlir(const TraceGraph&) {
  return no_compiler("printing a graph as MLIR");
}

absl::StatusOr<TraceGraph> trace_graph_from_mlir(absl::string_view) {
  return no_compiler("reading a graph from MLIR");
}

absl::StatusOr<std::string> trace_graph_to_stablehlo(const TraceGraph&,
                                                     const std::vector<std::string>&,
                                                     const std::vector<std::string>&) {
  return no_compiler("exporting StableHLO");
}

absl::StatusOr<ImportedStableHlo> stablehlo_to_trace_graph(absl::string_view,
                                                           absl::string_view) {
  return no_compiler("importing StableHLO");
}

}  // namespace mstep
