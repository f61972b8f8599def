// The miss path of mark_step(): TraceGraph -> mstep MLIR module -> pass
// pipeline -> backend executable. One MLIRContext lives for the process:
// types and attributes are uniqued once and reused by every compile.
#include "lib/runtime/Compiler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/passes/IRDump.h"
#include "mstep/passes/Pipeline.h"

namespace mstep {

namespace {

mlir::MLIRContext& context() {
  static mlir::MLIRContext* ctx = [] {
    auto* c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    register_mstep_dialects(*c);
    return c;
  }();
  return *ctx;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> compile_graph(const TraceGraph& graph,
                                                          Backend& backend,
                                                          const CompileOptions& options) {
  mlir::MLIRContext& ctx = context();
  auto module = import_trace_graph(graph, ctx);
  if (!module.ok()) return module.status();

  mlir::PassManager pm(&ctx);
  passes::build_pipeline(pm, {.fuse = options.fuse});
  if (!options.dump_dir.empty())
    passes::add_ir_dump(pm, absl::StrFormat("%s/graph_%016x", options.dump_dir, options.key),
                        "import");
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    llvm::raw_string_ostream os(diagnostics);
    os << "\n  " << d.getLocation() << ": " << d;
    return mlir::success();
  });
  if (mlir::failed(pm.run(module->get())))
    return absl::InternalError(absl::StrCat("the mstep pass pipeline failed:", diagnostics));
  return backend.compile(module->get());
}

}  // namespace mstep
