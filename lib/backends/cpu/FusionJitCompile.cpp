// The compile half of FusionJit: emit the kernels (FusionKernelEmitter),
// lower and generate one object for this host (FusionJitLowering), link it
// into a shared object (SharedObjectLink), then load it as the runtime
// loads a serialized one.
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/FusionJitLowering.h"
#include "lib/backends/cpu/FusionKernelEmitter.h"
#include "lib/backends/cpu/SharedObjectLink.h"
#include "absl/strings/str_join.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"

namespace mstep::cpu {

namespace {

/// The kernel dialects are the compile half's declared dependencies: the
/// driver loads them. A context without them is a caller's bug, reported
/// rather than crashing in the op builder.
absl::Status check_kernel_dialects_loaded(mlir::MLIRContext& context) {
  mlir::DialectRegistry registry;
  declare_kernel_dialects(registry);
  std::vector<std::string> missing;
  for (llvm::StringRef name : registry.getDialectNames())
    if (!context.getLoadedDialect(name)) missing.push_back(name.str());
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "FusionJit::compile: the context has not loaded the kernel dialects ",
      absl::StrJoin(missing, ", "),
      "; load the cpu compiler's dependent dialects first (load_dependent_dialects)"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<FusionJit>> FusionJit::compile(mlir::ModuleOp module) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) return absl::InvalidArgumentError("FusionJit::compile: the module has no func @step");
  mlir::MLIRContext* context = module.getContext();
  MSTEP_RETURN_IF_ERROR(check_kernel_dialects_loaded(*context));
  mlir::OwningOpRef<mlir::ModuleOp> kernels =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(context));
  EmittedKernels emitted = emit_fusion_kernels(step, *kernels);
  FusionObject object;
  object.target = host_target();
  object.fusions = std::move(emitted.fusions);
  if (!emitted.nests.empty()) {
    MSTEP_ASSIGN_OR_RETURN(std::string code,
                           generate_object(*kernels, emitted.nests, object.target));
    MSTEP_ASSIGN_OR_RETURN(object.shared_object, link_shared_object(code));
  }
  return from_object(std::move(object));
}

absl::StatusOr<std::shared_ptr<FusionJit>> FusionJit::compile_text(absl::string_view module_text) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  register_mstep_dialects(context);
  MSTEP_ASSIGN_OR_RETURN(BackendCompiler * compiler, CompilerRegistry::get("cpu"));
  load_dependent_dialects(context, *compiler);
  MSTEP_ASSIGN_OR_RETURN(auto module, parse_mstep_module(module_text, context,
                                                         "FusionJit::compile_text: the text"));
  return compile(*module);
}

} // namespace mstep::cpu
