// BackendCompiler: a backend's compile half (IREE's target backend). The
// runtime half (Backend: memory, copies, loading and running executables)
// lives in libmstep_runtime and needs no MLIR; this half lives in
// libmstep_compiler. A backend registers both under one name.
//
// The compile pipeline of a backend is the shared passes (Pipeline.h:
// canonicalize, CSE, the fusion passes), then the passes it names in
// build_target_pipeline(), then compile().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Options.h"

namespace mlir {
class DialectRegistry;
class MLIRContext;
class ModuleOp;
class OpPassManager;
}  // namespace mlir

namespace mstep {

class BackendCompiler {
 public:
  virtual ~BackendCompiler() = default;

  /// The name of the Backend whose executables this compiles.
  virtual absl::string_view backend_name() const = 0;

  /// Appends the passes this target needs after the shared ones (e.g. the
  /// cpu backend's arena plan), as `runtime` sets them (e.g. the xla
  /// backend's memory limit; what it reads there is part of the compile
  /// key). Nothing by default.
  virtual void build_target_pipeline(mlir::OpPassManager& pm,
                                     const RuntimeOptions& runtime) const {}

  /// Whether mstep-fuse-elementwise replaces custom-op calls by their
  /// scalar forms (mstep/runtime/CustomScalarForm.h) for this target. Yes by
  /// default; the ref backend says no, so that it always runs the op's own
  /// kernel, the definition the fused form is checked against.
  virtual bool fuses_custom_scalar_forms() const { return true; }

  /// The dialects (and their LLVM IR translations) compile() builds ops of
  /// beyond those of the pipeline's passes, which declare their own. The
  /// driver loads them into its one context before compile(), as a
  /// PassManager does for a pass's dependentDialects. None by default.
  virtual void get_dependent_dialects(mlir::DialectRegistry& registry) const {}

  /// Compiles the module's step function (one public func.func named
  /// "step", after the whole pipeline) into an executable of `backend`,
  /// the runtime half registered under backend_name(). Errors name the
  /// first unsupported op. `options` are the runtime's (a backend reads its
  /// own settings there, e.g. cpu_disable).
  virtual absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module,
                                                              Backend& backend,
                                                              const RuntimeOptions& options) = 0;

  /// Ahead-of-time compilation for a device this machine may not have
  /// (mstep-compile): the stored form of the module's step, what
  /// Executable::serialize() of compile()'s result would return, made
  /// without a backend instance. The runtime half loads it where the device
  /// is. Unimplemented by default (a backend whose compile needs its device).
  virtual absl::StatusOr<std::string> compile_stored(mlir::ModuleOp module,
                                                     const RuntimeOptions& options);
};

/// Loads `compiler`'s dependent dialects into `context` (idempotent).
void load_dependent_dialects(mlir::MLIRContext& context, const BackendCompiler& compiler);

/// Compile halves by backend name. Each registers itself from a static
/// initializer in libmstep_compiler. Thread-safe; a compiler is created on
/// first use, once, and lives as long as the process.
class CompilerRegistry {
 public:
  using Factory = std::unique_ptr<BackendCompiler> (*)();

  /// Adds a compile half; a name registered twice aborts (a build error).
  static void register_compiler(absl::string_view backend_name, Factory factory);
  /// The compile half of `backend_name`; NotFound names the registered
  /// ones (a backend without one can load executables but not compile).
  static absl::StatusOr<BackendCompiler*> get(absl::string_view backend_name);
  /// Registered names, sorted.
  static std::vector<std::string> names();
};

}  // namespace mstep
