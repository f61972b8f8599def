// The miss path of mark_step(): TraceGraph -> mstep MLIR module -> pass
// pipeline -> backend executable. One MLIRContext lives for the process:
// types and attributes are uniqued once and reused by every compile.
#include "lib/runtime/Compiler.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/passes/Passes.h"
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

void write_module(const std::filesystem::path& path, mlir::Operation* op) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path.string(), ec);
  if (!ec) op->print(os);
}

/// Writes the module after every pass: <dir>/NN_<pass-argument>.mlir.
class DumpAfterEachPass : public mlir::PassInstrumentation {
 public:
  explicit DumpAfterEachPass(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void runAfterPass(mlir::Pass* pass, mlir::Operation* op) override {
    if (pass->getArgument().empty()) return;  // a pass manager nesting passes
    // Nested passes run on functions; dump the whole module.
    while (op->getParentOp()) op = op->getParentOp();
    write_module(dir_ / absl::StrFormat("%02d_%s.mlir", ++count_, pass->getArgument().str()), op);
  }

 private:
  std::filesystem::path dir_;
  int count_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Executable>> compile_graph(const TraceGraph& graph,
                                                          Backend& backend,
                                                          const CompileOptions& options) {
  mlir::MLIRContext& ctx = context();
  auto module = import_trace_graph(graph, ctx);
  if (!module.ok()) return module.status();

  mlir::PassManager pm(&ctx);
  passes::build_pipeline(pm, {.fuse = options.fuse});
  if (!options.dump_dir.empty()) {
    std::filesystem::path dir =
        std::filesystem::path(options.dump_dir) / absl::StrFormat("graph_%016x", options.key);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    write_module(dir / "00_import.mlir", module->get());
    pm.addInstrumentation(std::make_unique<DumpAfterEachPass>(dir));
  }
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
