// The xla backend's compile half: after the shared passes, the arena plan
// (mstep-plan-memory, the cpu planner), then the whole step as one native
// function: the fusion nests emitted as the cpu backend's vectorized
// linalg kernels, the step function that calls them, the gemms and the
// callouts (XlaStepEmitter.h), lowered to LLVM, generated for this host
// and linked into one shared object that XlaExecutable loads
// (compile_xla_program, XlaCompile.h).
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_join.h"
#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/FusionJitLowering.h"
#include "lib/backends/cpu/FusionKernelEmitter.h"
#include "lib/backends/cpu/SharedObjectLink.h"
#include "lib/backends/xla/XlaCompile.h"
#include "lib/backends/xla/XlaElementTypes.h"
#include "lib/backends/xla/XlaExecutable.h"
#include "lib/backends/xla/XlaFormat.h"
#include "lib/backends/xla/XlaRemat.h"
#include "lib/backends/xla/XlaStepEmitter.h"
#include "llvm/IR/Module.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/passes/Pipeline.h"

namespace mstep::xla {

absl::StatusOr<XlaProgram> compile_xla_program(mlir::ModuleOp module, const ExtendStepModule& extend,
                                               const std::vector<std::string>& link_args) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) return absl::InvalidArgumentError("xla backend: the module has no func @step");
  XlaProgram program;
  MSTEP_ASSIGN_OR_RETURN(program.graph, export_trace_graph(step));
  MSTEP_ASSIGN_OR_RETURN(program.plan, cpu::read_arena_plan(step));
  MSTEP_ASSIGN_OR_RETURN(program.layout, lay_out_step(program.graph, program.plan));

  mlir::OwningOpRef<mlir::ModuleOp> kernels =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(module.getContext()));
  cpu::EmittedKernels emitted = cpu::emit_fusion_kernels(step, *kernels);
  program.target = cpu::host_target();
  auto add_step = [&](llvm::Module& llvm_module) -> absl::Status {
    // f16 loads and stores use F16C where the target has it (XlaElementTypes.h).
    const std::vector<std::string>& features = program.target.features;
    if (std::find(features.begin(), features.end(), "f16c") != features.end())
      llvm_module.addModuleFlag(llvm::Module::Max, kF16cModuleFlag, 1);
    MSTEP_ASSIGN_OR_RETURN(program.callouts, emit_step_function(llvm_module, program.graph,
                                                                program.layout, emitted.fusions));
    return extend ? extend(llvm_module, program) : absl::OkStatus();
  };
  MSTEP_ASSIGN_OR_RETURN(std::string object,
                         cpu::generate_object(*kernels, emitted.nests, program.target, add_step));
  MSTEP_ASSIGN_OR_RETURN(program.shared_object,
                         cpu::link_shared_object(object, cpu::system_linker(), link_args));
  return program;
}

namespace {

class XlaCompiler final : public BackendCompiler {
public:
  absl::string_view backend_name() const override { return "xla"; }

  /// One temp arena: values with disjoint lifetimes share it; under a
  /// memory limit (RuntimeOptions::xla_memory_limit), cheap values are
  /// recomputed to fit (XlaRemat.h).
  void build_target_pipeline(mlir::OpPassManager& pm,
                             const RuntimeOptions& runtime) const override {
    if (!runtime.xla_memory_limit.empty())
      pm.nest<mlir::func::FuncOp>().addPass(create_remat_pass(runtime.xla_memory_limit));
    passes::add_arena_plan(pm);
  }

  /// The fusion nests are built in linalg/vector and lowered to LLVM.
  void get_dependent_dialects(mlir::DialectRegistry& registry) const override {
    cpu::declare_kernel_dialects(registry);
  }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend&,
                                                      const RuntimeOptions& options) override {
    MSTEP_ASSIGN_OR_RETURN(XlaProgram program, compile_xla_program(module));
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<XlaExecutable> exe,
                           XlaExecutable::create(std::move(program), options.cpu_disable,
                                                 options.log_recompiles));
    // MSTEP_LOG_FALLBACK=1: what the function calls out for, once per compile.
    if (options.log_fallback && exe->num_callouts() > 0)
      std::fprintf(stderr, "mstep xla: the step function calls out for %zu ops: %s\n",
                   exe->num_callouts(), absl::StrJoin(exe->callout_names(), ", ").c_str());
    return std::unique_ptr<Executable>(std::move(exe));
  }

  /// The stored form (XlaFormat.h), for mstep-compile: code for this host.
  absl::StatusOr<std::string> compile_stored(mlir::ModuleOp module,
                                             const RuntimeOptions&) override {
    MSTEP_ASSIGN_OR_RETURN(XlaProgram program, compile_xla_program(module));
    return write_xla_format(program);
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "xla", [] { return std::unique_ptr<BackendCompiler>(new XlaCompiler()); });
  return true;
}();

} // namespace
} // namespace mstep::xla
