// The cpu backend: host memory (the same 64-byte aligned blocks as ref),
// and executables that run oneDNN primitives, MLIR-JIT fusion kernels, a
// flash-style attention kernel and hand-written host kernels from one
// static arena (CpuExecutable). An op none of them covers runs its ref
// kernel, counted as a host fallback. This is the runtime half: deserialize()
// reads the graph, the memory plan and the fusion object from the native
// form (NativeFormat.h) without MLIR. The compile half is CpuCompiler.cpp.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/backends/cpu/NativeFormat.h"
#include "lib/backends/host/HostMemoryBackend.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

namespace {

class CpuBackend final : public host::HostMemoryBackend {
 public:
  absl::string_view name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::cpu; }

  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override {
    // No MLIR: the graph, the plan and the fusion object are stored.
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> exe,
                           load_native_format(blob, CpuExecutable::BuildOptions::from(options)));
    return std::unique_ptr<Executable>(std::move(exe));
  }

  /// Every op the ref backend runs: the cpu backend's own kernels or, for
  /// the rest, the counted host fallback.
  bool supports(OpKind op, DType) const override {
    return op == OpKind::parameter || ref::ref_kernel(op) != nullptr;
  }
};

const bool registered = [] {
  BackendRegistry::register_backend("cpu", DeviceType::cpu,
                                    [] { return std::unique_ptr<Backend>(new CpuBackend()); });
  return true;
}();

}  // namespace
}  // namespace mstep::cpu
