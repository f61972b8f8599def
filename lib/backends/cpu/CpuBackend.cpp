// The cpu backend: host memory (the same 64-byte aligned blocks as ref),
// and executables that run oneDNN primitives, MLIR-JIT fusion kernels, a
// flash-style attention kernel and hand-written host kernels from one
// static arena (CpuExecutable). An op none of them covers runs its ref
// kernel, counted as a host fallback. compile() reads the graph and the
// memory plan off MLIR; deserialize() reads them from the native form
// (NativeFormat.h) without MLIR.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/CpuExecutable.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/NativeFormat.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/ref/RefKernels.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"

namespace mstep::cpu {

namespace {

constexpr Device kCpu{DeviceType::cpu, 0};

CpuExecutable::BuildOptions build_options(const RuntimeOptions& options) {
  return {.disabled_families = options.cpu_disable, .profile = options.cpu_profile};
}

/// Builds the executable of the step function of `module`. `jit` holds its
/// compiled fusions.
absl::StatusOr<std::unique_ptr<Executable>> build_executable(mlir::ModuleOp module,
                                                             std::shared_ptr<FusionJit> jit,
                                                             const RuntimeOptions& options) {
  auto step = module.lookupSymbol<mlir::func::FuncOp>("step");
  if (!step) return absl::InvalidArgumentError("cpu backend: the module has no func @step");
  MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, export_trace_graph(step));
  MSTEP_ASSIGN_OR_RETURN(ArenaPlan plan, read_arena_plan(step));
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> exe,
                         CpuExecutable::create(std::move(graph), std::move(plan), std::move(jit),
                                               build_options(options)));
  return std::unique_ptr<Executable>(std::move(exe));
}

class CpuBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::cpu; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(mlir::ModuleOp module,
                                                      const RuntimeOptions& options) override {
    std::shared_ptr<FusionJit> jit;
    MSTEP_ASSIGN_OR_RETURN(jit, FusionJit::compile(module));
    return build_executable(module, std::move(jit), options);
  }

  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override {
    // No MLIR: the graph, the plan and the fusion object are stored.
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutable> exe,
                           load_native_format(blob, build_options(options)));
    return std::unique_ptr<Executable>(std::move(exe));
  }

  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override {
    return std::make_shared<host::HostBuffer>(type, kCpu);
  }

  absl::StatusOr<BufferPtr> wrap_host(const TensorType& type, void* data,
                                      std::function<void()> release) override {
    return host::host_wrap(type, kCpu, data, std::move(release));
  }

  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override {
    return host::host_copy_in(dst, src, bytes);
  }

  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override {
    return host::host_copy_out(src, dst, bytes);
  }

  void synchronize() override {}

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
