// The cpu backend's compile half: the arena plan as its own pass, then the
// step's fusions compiled to native code (FusionJit) and the CpuExecutable
// that runs them with oneDNN and the host kernels.
#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/FusionJitLowering.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/passes/Pipeline.h"

namespace mstep::cpu {

namespace {

/// The executable of func @step of `module` (after the cpu pipeline: its
/// arena plan is read from the IR). `jit` holds its compiled fusions.
absl::StatusOr<std::unique_ptr<Executable>> build_cpu_executable(mlir::ModuleOp module,
                                                                 std::shared_ptr<FusionJit> jit,
                                                                 const RuntimeOptions& options) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) return absl::InvalidArgumentError("cpu backend: the module has no func @step");
  MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
  MSTEP_ASSIGN_OR_RETURN(ArenaPlan plan, read_arena_plan(step));
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> exe,
                         CpuExecutable::create(std::move(graph), std::move(plan), std::move(jit),
                                               CpuExecutable::BuildOptions::from(options)));
  return std::unique_ptr<Executable>(std::move(exe));
}

class CpuCompiler final : public BackendCompiler {
 public:
  absl::string_view backend_name() const override { return "cpu"; }

  /// The cpu executable runs from one static arena.
  void build_target_pipeline(mlir::OpPassManager& pm, const RuntimeOptions&) const override {
    passes::add_arena_plan(pm);
  }

  /// The fused kernels are built in linalg/vector and lowered to LLVM.
  void get_dependent_dialects(mlir::DialectRegistry& registry) const override {
    declare_kernel_dialects(registry);
  }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module, Backend&,
                                                      const RuntimeOptions& options) override {
    MSTEP_ASSIGN_OR_RETURN(std::shared_ptr<FusionJit> jit, FusionJit::compile(module));
    return build_cpu_executable(module, std::move(jit), options);
  }
};

const bool registered = [] {
  CompilerRegistry::register_compiler(
      "cpu", [] { return std::unique_ptr<BackendCompiler>(new CpuCompiler()); });
  return true;
}();

}  // namespace
}  // namespace mstep::cpu
