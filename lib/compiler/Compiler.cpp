// The miss path of mark_step(): TraceGraph -> mstep MLIR module -> the
// backend's pass pipeline -> its compile half -> an executable of its
// runtime half. One MLIRContext lives for the process: types and attributes
// are uniqued once and reused by every compile; passes load the dialects
// they declare (dependentDialects) into it, and the driver those a
// backend's compile half declares (BackendCompiler::get_dependent_dialects).
#include "lib/compiler/Compiler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/compiler/StableHloExport.h"
#include "mstep/ir/MlirParse.h"
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

std::string print_module(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  return text;
}

}  // namespace

void load_dependent_dialects(mlir::MLIRContext& context, const BackendCompiler& compiler) {
  mlir::DialectRegistry registry;
  compiler.get_dependent_dialects(registry);
  context.appendDialectRegistry(registry);
  for (llvm::StringRef name : registry.getDialectNames()) context.getOrLoadDialect(name);
}

namespace {

/// `graph` imported and through the shared pipeline and `compiler`'s.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> optimized_module(const TraceGraph& graph,
                                                                   BackendCompiler& compiler,
                                                                   const CompileOptions& options,
                                                                   const RuntimeOptions& runtime) {
  mlir::MLIRContext& ctx = context();
  load_dependent_dialects(ctx, compiler);
  MSTEP_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module, import_trace_graph(graph, ctx));
  mlir::PassManager pm(&ctx);
  passes::build_pipeline(pm,
                         {.fuse = options.fuse,
                          .custom_scalar_forms = compiler.fuses_custom_scalar_forms()},
                         [&](mlir::OpPassManager& target) {
                           compiler.build_target_pipeline(target, runtime);
                         });
  if (!options.dump_dir.empty())
    passes::add_ir_dump(pm, absl::StrFormat("%s/graph_%016x", options.dump_dir, options.key),
                        "import");
  DiagnosticCollector diagnostics(ctx);
  if (mlir::failed(pm.run(module.get())))
    return absl::InternalError(absl::StrCat("the mstep pass pipeline failed:", diagnostics.text()));
  return module;
}

}  // namespace

absl::StatusOr<CompiledGraph> compile_graph(const TraceGraph& graph, Backend& backend,
                                            const CompileOptions& options,
                                            const RuntimeOptions& runtime) {
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get(backend.name()));
  MSTEP_ASSIGN_OR_RETURN(auto module, optimized_module(graph, *compiler, options, runtime));
  CompiledGraph compiled;
  if (auto step = module->lookupSymbol<mlir::func::FuncOp>("step"))
    if (auto size = step->getAttrOfType<mlir::IntegerAttr>("mstep.arena_size"))
      compiled.arena_bytes = size.getInt();
  if (options.keep_module_text) compiled.module_text = print_module(module.get());
  MSTEP_ASSIGN_OR_RETURN(compiled.executable, compiler->compile(module.get(), backend, runtime));
  return compiled;
}

absl::StatusOr<std::string> compile_graph_stored(const TraceGraph& graph,
                                                 absl::string_view backend_name,
                                                 const CompileOptions& options,
                                                 const RuntimeOptions& runtime) {
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get(backend_name));
  MSTEP_ASSIGN_OR_RETURN(auto module, optimized_module(graph, *compiler, options, runtime));
  return compiler->compile_stored(module.get(), runtime);
}

absl::Status with_optimized_module(const TraceGraph& graph, absl::string_view backend_name,
                                   const CompileOptions& options, const RuntimeOptions& runtime,
                                   const std::function<absl::Status(mlir::ModuleOp)>& use) {
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get(backend_name));
  MSTEP_ASSIGN_OR_RETURN(auto module, optimized_module(graph, *compiler, options, runtime));
  return use(module.get());
}

absl::StatusOr<std::unique_ptr<Executable>> load_compiled_module(absl::string_view text,
                                                                 Backend& backend,
                                                                 const RuntimeOptions& runtime) {
  auto native = backend.deserialize(text, runtime);
  if (!absl::IsUnimplemented(native.status())) return native;
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get(backend.name()));
  load_dependent_dialects(context(), *compiler);
  MSTEP_ASSIGN_OR_RETURN(auto module, parse_mstep_module(text, context(), "the cached module"));
  return compiler->compile(module.get(), backend, runtime);
}

absl::StatusOr<std::string> trace_graph_to_mlir(const TraceGraph& graph) {
  MSTEP_ASSIGN_OR_RETURN(auto module, import_trace_graph(graph, context()));
  return print_module(module.get());
}

absl::StatusOr<TraceGraph> trace_graph_from_mlir(absl::string_view text) {
  MSTEP_ASSIGN_OR_RETURN(auto module, parse_mstep_module(text, context(), "the graph"));
  // func @step, or the module's only function (a module a host wrote).
  auto step = module->lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) {
    auto funcs = module->getOps<mlir::func::FuncOp>();
    if (std::distance(funcs.begin(), funcs.end()) != 1)
      return absl::InvalidArgumentError(
          "the graph module has no func @step and not exactly one func.func; name the "
          "function to run @step");
    step = *funcs.begin();
  }
  return export_trace_graph(step);
}

absl::StatusOr<std::string> trace_graph_to_stablehlo(const TraceGraph& graph,
                                                     const std::vector<std::string>& input_names,
                                                     const std::vector<std::string>& output_names) {
  MSTEP_ASSIGN_OR_RETURN(auto module, import_trace_graph(graph, context(), "main"));
  auto main = module->lookupSymbol<mlir::func::FuncOp>("main");
  mlir::Builder b(&context());
  for (size_t i = 0; i < input_names.size() && i < main.getNumArguments(); ++i)
    main.setArgAttr(i, "mstep.name", b.getStringAttr(input_names[i]));
  for (size_t i = 0; i < output_names.size() && i < main.getNumResults(); ++i)
    main.setResultAttr(i, "mstep.name", b.getStringAttr(output_names[i]));
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticCollector diagnostics(context());
  if (mlir::failed(export_stablehlo(*module, os)))
    return absl::UnimplementedError(
        absl::StrCat("the step cannot be exported as StableHLO:", diagnostics.text()));
  return text;
}

}  // namespace mstep
