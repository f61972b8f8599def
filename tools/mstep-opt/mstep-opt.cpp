// mstep-opt: parses, verifies and transforms MLIR that uses the mstep
// dialect, like mlir-opt. It registers the mstep dialect and passes, the
// upstream dialects mstep modules use or lower to (func, arith, math,
// tensor, linalg), the upstream transforms (canonicalize, cse, symbol-dce,
// inline, ...) and the backends' pipelines `mstep-pipeline[=<backend>]` and
// `mstep-pipeline-unfused[=<backend>]`. MlirOptMain provides the flags:
// --pass-pipeline, --split-input-file, --verify-diagnostics,
// --mlir-print-ir-after-all and the rest.
//
// With MSTEP_DUMP_DIR set, every run writes the module before the first
// pass and after each pass to $MSTEP_DUMP_DIR/mstep-opt/chunk_<N>/ (one
// chunk per --split-input-file section), as mark_step() does.
//
// --load-plugin libmyops.so (repeatable) loads a shared library that
// registers custom ops (mstep/runtime/Plugin.h) before the input is
// parsed: the mstep.custom verifier checks each call against the op
// registered under its name and version (an op no plugin registers is an
// error at the op).
//
// --xla-memory-limit=BYTES: the xla pipeline's memory limit (as
// MSTEP_XLA_MEMORY_LIMIT, which it overrides; lib/backends/xla/XlaRemat.h).
// A value that is not a positive integer is an error before any input is
// read.
//
// --mstep-export-stablehlo writes the input module (after the passes given,
// if any) as StableHLO text instead of MLIR (compiler/StableHloExport.h);
// an op with no StableHLO form is an error at the op, and nothing is
// written.
//
// --mstep-import-stablehlo reads the input as a StableHLO module (as JAX
// prints it, compiler/StableHloImport.h) and runs the passes given on the
// mstep module it becomes (func @step); an op it cannot import is an
// error at the op's line in the input. A large constant (more than 64
// distinct elements) becomes an argument named "constant<k>" (the API
// passes its value; mstep's constants are scalars).
#include <cstdlib>
#include <memory>
#include <string>

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/compiler/Pipelines.h"
#include "mstep/compiler/StableHloExport.h"
#include "mstep/compiler/StableHloImport.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/passes/IRDump.h"
#include "mstep/passes/Passes.h"
#include "mstep/passes/Pipeline.h"
#include "mstep/runtime/Plugin.h"

namespace {
llvm::cl::list<std::string> load_plugins(
    "load-plugin", llvm::cl::value_desc("libmyops.so"),
    llvm::cl::desc("Load a shared library that registers custom ops (repeatable)"));
llvm::cl::opt<std::string> xla_memory_limit_flag(
    "xla-memory-limit", llvm::cl::value_desc("bytes"),
    llvm::cl::desc("The xla pipeline's temp arena limit: cheap values are recomputed to meet "
                   "it (overrides MSTEP_XLA_MEMORY_LIMIT)"));
llvm::cl::opt<bool> export_stablehlo_flag(
    "mstep-export-stablehlo",
    llvm::cl::desc("Write the module as StableHLO text (for XLA and IREE) instead of MLIR"));
llvm::cl::opt<bool> import_stablehlo_flag(
    "mstep-import-stablehlo",
    llvm::cl::desc("Read the input as a StableHLO module (as JAX prints it) "
                   "and run the passes on the mstep module it becomes"));

/// --mstep-import-stablehlo: the input becomes an mstep module's text,
/// which MlirOptMain then parses and runs the passes on.
std::unique_ptr<llvm::MemoryBuffer> import_stablehlo_input(const llvm::MemoryBuffer& file,
                                                           mlir::DialectRegistry& registry) {
  absl::StatusOr<mstep::ImportedStableHlo> imported = mstep::stablehlo_to_trace_graph(
      absl::string_view(file.getBufferStart(), file.getBufferSize()),
      file.getBufferIdentifier().str());
  if (!imported.ok()) {
    llvm::errs() << std::string(imported.status().message()) << "\n";
    return nullptr;
  }
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  auto module = mstep::import_trace_graph(imported->graph, context);
  if (!module.ok()) {
    llvm::errs() << "mstep-opt: the imported StableHLO module is not a valid mstep module: "
                 << std::string(module.status().message()) << "\n";
    return nullptr;
  }
  mlir::Builder b(&context);
  auto step = (*module)->lookupSymbol<mlir::func::FuncOp>("step");
  for (size_t i = 0; i < imported->input_names.size(); ++i)
    step.setArgAttr(i, "mstep.name", b.getStringAttr(imported->input_names[i]));
  for (size_t i = 0; i < imported->output_names.size(); ++i)
    step.setResultAttr(i, "mstep.name", b.getStringAttr(imported->output_names[i]));
  std::string text;
  llvm::raw_string_ostream os(text);
  (*module)->print(os);
  return llvm::MemoryBuffer::getMemBufferCopy(text, file.getBufferIdentifier());
}

/// --mstep-export-stablehlo: MlirOptMain prints the module (after the
/// passes) into a string, which is parsed again and exported.
int export_stablehlo_main(std::unique_ptr<llvm::MemoryBuffer> file, mlir::DialectRegistry& registry,
                          const mlir::MlirOptMainConfig& config, llvm::raw_ostream& out) {
  if (!config.inputSplitMarker().empty()) {
    llvm::errs() << "mstep-opt: --mstep-export-stablehlo writes one module; run it on each "
                    "--split-input-file section separately\n";
    return EXIT_FAILURE;
  }
  // The printed module keeps its locations, so an op that cannot be
  // exported is reported at its line in the input.
  if (auto* debuginfo = llvm::cl::getRegisteredOptions().lookup("mlir-print-debuginfo"))
    static_cast<llvm::cl::opt<bool>*>(debuginfo)->setValue(true);
  std::string mlir_text;
  llvm::raw_string_ostream mlir_os(mlir_text);
  if (mlir::failed(mlir::MlirOptMain(mlir_os, std::move(file), registry, config)))
    return EXIT_FAILURE;
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr source_manager;
  mlir::SourceMgrDiagnosticHandler diagnostics(source_manager, &context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(mlir_text, &context);
  if (!module) return EXIT_FAILURE;
  return mlir::succeeded(mstep::export_stablehlo(*module, out)) ? EXIT_SUCCESS : EXIT_FAILURE;
}
}  // namespace

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mstep::dialect::MstepDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect>();
  mlir::registerTransformsPasses();
  mstep::passes::registerMstepPasses();
  // Read now, changed by the flags below before any pipeline is parsed.
  static mstep::RuntimeOptions runtime = mstep::RuntimeOptions::from_env();
  mstep::register_backend_pipelines(runtime);

  auto [input, output_name] =
      mlir::registerAndParseCLIOptions(argc, argv, "mstep optimizer driver\n", registry);
  for (const std::string& plugin : load_plugins)
    if (absl::Status s = mstep::load_plugin(plugin); !s.ok()) {
      llvm::errs() << "mstep-opt: " << std::string(s.message()) << "\n";
      return EXIT_FAILURE;
    }
  if (xla_memory_limit_flag.getNumOccurrences() > 0) {
    if (absl::StatusOr<int64_t> bytes = mstep::parse_xla_memory_limit(xla_memory_limit_flag);
        !bytes.ok()) {
      llvm::errs() << "mstep-opt: --xla-memory-limit: " << std::string(bytes.status().message())
                   << "\n";
      return EXIT_FAILURE;
    }
    runtime.xla_memory_limit = xla_memory_limit_flag;
  }
  mlir::MlirOptMainConfig config = mlir::MlirOptMainConfig::createFromCLOptions();
  if (const char* dir = std::getenv("MSTEP_DUMP_DIR"); dir && *dir) {
    auto chunk = std::make_shared<int>(0);
    config.setPassPipelineSetupFn(
        [from_flags = config, root = std::string(dir) + "/mstep-opt", chunk](mlir::PassManager& pm) {
          if (mlir::failed(from_flags.setupPassPipeline(pm))) return mlir::failure();
          mstep::passes::add_ir_dump(pm, root + "/chunk_" + std::to_string((*chunk)++));
          return mlir::success();
        });
  }

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << error << "\n";
    return EXIT_FAILURE;
  }
  std::unique_ptr<llvm::ToolOutputFile> output = mlir::openOutputFile(output_name, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return EXIT_FAILURE;
  }
  if (import_stablehlo_flag) {
    file = import_stablehlo_input(*file, registry);
    if (!file) return EXIT_FAILURE;
  }
  if (export_stablehlo_flag) {
    if (export_stablehlo_main(std::move(file), registry, config, output->os()) != EXIT_SUCCESS)
      return EXIT_FAILURE;
  } else if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(file), registry, config))) {
    return EXIT_FAILURE;
  }
  output->keep();
  return EXIT_SUCCESS;
}
