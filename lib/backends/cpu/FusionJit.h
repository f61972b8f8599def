// FusionJit: the native kernels of a step's mstep.fusion ops, compiled
// together (MLIR linalg -> vectorized LLVM -> one object file for the host
// CPU -> one shared object, by the system linker) and dlopen'ed; or loaded
// from their serialized form (the disk cache, an exported graph) without
// MLIR or LLVM. No MLIR or LLVM headers here.
//
// The compile half, compile() and compile_text(), is FusionJitCompile.cpp
// (MLIR and LLVM); the rest, FusionJit.cpp, is runtime code that links
// neither.
//
// Thread-safety: compile/compile_text use the given MLIRContext (or their
// own) and must not run concurrently with other users of it; load may run
// on any thread; a loaded FusionJit and its kernels are immutable and may
// be used from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "lib/backends/cpu/FusionJitFormat.h"

namespace mlir {
class ModuleOp;
}

namespace mstep::cpu {

/// OK when this host runs code generated for `target`: the same
/// architecture and a CPU with every feature the code was generated with.
/// Otherwise a FailedPrecondition error that starts with `who` and names
/// the missing features (FusionJit::load, the xla backend's loader).
absl::Status check_target(const FusionTarget& target, absl::string_view who);

class FusionJit : public std::enable_shared_from_this<FusionJit> {
public:
  ~FusionJit();

  /// Compiles every top-level mstep.fusion of func @step in `module`
  /// (program order k = 0, 1, ...) into one object. `module` is not
  /// modified; its context gets the dialects the kernels need. A fusion
  /// with an op that has no scalar form is skipped: kernel(k) is nullptr.
  static absl::StatusOr<std::shared_ptr<FusionJit>> compile(mlir::ModuleOp module);
  /// compile() on a module given as text (mstep dialect), parsed in a
  /// context of its own. For tests and tools that hold no MLIR objects.
  static absl::StatusOr<std::shared_ptr<FusionJit>> compile_text(absl::string_view module_text);
  /// Loads what object() returned: dlopens its shared object, with this
  /// process's symbols (libm) for the calls the code makes. A corrupt or
  /// truncated string is a DataLoss error; code generated for a CPU with a
  /// feature this host lacks (or another architecture) is a
  /// FailedPrecondition error that names the features, and nothing of it
  /// is loaded.
  static absl::StatusOr<std::shared_ptr<FusionJit>> load(absl::string_view object);

  /// The shared object and the index that load() needs, as one string.
  std::string object() const;

  /// The kernel of fusion k for `request`, a fusion node with the MLIR
  /// op's operand and result types (an error names a mismatch). nullptr
  /// when fusion k was skipped. The kernel keeps this FusionJit alive. It
  /// splits outputs of kParallelElements or more over the OpenMP threads.
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel(int k, const KernelRequest& request) const;

  int num_fusions() const { return static_cast<int>(index_.fusions.size()); }
  /// Why fusion k was skipped ("" when compiled), for logs.
  absl::string_view skip_reason(int k) const;

  /// Below this many elements a nest runs on the calling thread.
  static constexpr int64_t kParallelElements = 32 * 1024;

private:
  struct Code; // the loaded shared object and each nest's entry
  FusionJit(FusionObject index, std::unique_ptr<Code> code);
  static absl::StatusOr<std::shared_ptr<FusionJit>> from_object(FusionObject object);

  FusionObject index_;
  std::unique_ptr<Code> code_;
};

} // namespace mstep::cpu
