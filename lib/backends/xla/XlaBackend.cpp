// The xla backend's runtime half: host memory (the same 64-byte aligned
// blocks as ref and cpu) and XlaExecutable, which runs a whole step as one
// native function. deserialize() loads an executable's stored form
// (XlaFormat.h: the step function's shared object, the graph, the arena
// plan, the callouts) without MLIR or LLVM: the disk cache and mstep-run.
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/host/HostMemoryBackend.h"
#include "lib/backends/ref/RefKernels.h"
#include "lib/backends/xla/XlaExecutable.h"
#include "lib/backends/xla/XlaFormat.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Backend.h"

namespace mstep::xla {

namespace {

class XlaBackend final : public host::HostMemoryBackend {
public:
  absl::string_view name() const override { return "xla"; }
  DeviceType device_type() const override { return DeviceType::xla; }

  /// The stored form; Unimplemented for anything else (a disk-cache entry
  /// of module text, which the compile half compiles again). Code
  /// generated for a CPU feature this host lacks is refused before it is
  /// loaded (FailedPrecondition).
  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override {
    MSTEP_ASSIGN_OR_RETURN(XlaProgram program, read_xla_format(blob));
    MSTEP_RETURN_IF_ERROR(cpu::check_target(program.target, "xla executable"));
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<XlaExecutable> exe,
                           XlaExecutable::create(std::move(program), options.cpu_disable,
                                                 options.log_recompiles));
    return std::unique_ptr<Executable>(std::move(exe));
  }

  /// Every op the ref backend runs: in the step function or as a callout.
  bool supports(OpKind op, DType) const override {
    return op == OpKind::parameter || ref::ref_kernel(op) != nullptr;
  }
};

const bool registered = [] {
  BackendRegistry::register_backend("xla", DeviceType::xla,
                                    [] { return std::unique_ptr<Backend>(new XlaBackend()); });
  return true;
}();

} // namespace
} // namespace mstep::xla
