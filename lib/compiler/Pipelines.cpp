// mstep-pipeline[=<backend>]: a backend's whole pipeline by name (see
// Pipelines.h).
#include "mstep/compiler/Pipelines.h"

#include "absl/strings/str_cat.h"
#include "mlir/Pass/PassRegistry.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/passes/Pipeline.h"

namespace mstep {

namespace {

/// The device mark_step() uses when MSTEP_DEVICE is unset.
constexpr llvm::StringLiteral kDefaultBackend = "cpu";

mlir::PassRegistryFunction backend_pipeline(bool fuse, const RuntimeOptions& runtime) {
  return [fuse, &runtime](mlir::OpPassManager& pm, llvm::StringRef options,
                llvm::function_ref<mlir::LogicalResult(const llvm::Twine&)> error) {
    const llvm::StringRef name = options.trim().empty() ? llvm::StringRef(kDefaultBackend) : options.trim();
    absl::StatusOr<BackendCompiler*> compiler =
        CompilerRegistry::get(absl::string_view(name.data(), name.size()));
    if (!compiler.ok()) return error(std::string(compiler.status().message()));
    passes::build_pipeline(pm,
                           {.fuse = fuse,
                            .custom_scalar_forms = (*compiler)->fuses_custom_scalar_forms()},
                           [&](mlir::OpPassManager& target) {
      (*compiler)->build_target_pipeline(target, runtime);
    });
    return mlir::success();
  };
}

}  // namespace

void register_backend_pipelines(const RuntimeOptions& runtime) {
  // No pipeline options struct: the option text is the backend name itself.
  auto no_options = [](llvm::function_ref<void(const mlir::detail::PassOptions&)>) {};
  mlir::registerPassPipeline(
      "mstep-pipeline",
      "The pipeline mark_step() runs for a backend (=<backend>, default cpu): the shared passes "
      "(canonicalize, cse, fusion), the backend's own, the contract check",
      backend_pipeline(/*fuse=*/true, runtime), no_options);
  mlir::registerPassPipeline("mstep-pipeline-unfused",
                             "mstep-pipeline without the fusion passes (=<backend>, default cpu)",
                             backend_pipeline(/*fuse=*/false, runtime), no_options);
}

}  // namespace mstep
