// The cpu backend: host memory (the same 64-byte aligned blocks as ref),
// and executables that run oneDNN primitives, MLIR-JIT fusion kernels, a
// flash-style attention kernel and hand-written host kernels from one
// static arena (CpuExecutable). An op none of them covers runs its ref
// kernel, counted as a host fallback. This is the runtime half; the compile
// half is CpuCompiler.cpp.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/CpuCompiler.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/NativeFormat.h"
#include "lib/backends/host/HostBuffer.h"
#include "lib/backends/ref/RefKernels.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"

namespace mstep::cpu {

namespace {

constexpr Device kCpu{DeviceType::cpu, 0};

/// The context disk-cache entries are parsed in (compile() uses the
/// caller's module and context).
mlir::MLIRContext& load_context() {
  static mlir::MLIRContext* ctx = [] {
    auto* c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    register_mstep_dialects(*c);
    return c;
  }();
  return *ctx;
}

class CpuBackend final : public Backend {
 public:
  absl::string_view name() const override { return "cpu"; }
  DeviceType device_type() const override { return DeviceType::cpu; }

  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override {
    MSTEP_ASSIGN_OR_RETURN(NativeParts parts, read_native_format(blob));
    mlir::MLIRContext& ctx = load_context();
    auto module = parse_mstep_module(parts.module_text, ctx, "its module text");
    if (!module.ok())
      return absl::DataLossError(absl::StrCat("cpu executable: ", module.status().message()));
    std::shared_ptr<FusionJit> jit;
    if (!parts.object.empty()) {
      MSTEP_ASSIGN_OR_RETURN(jit, FusionJit::load(parts.object));
    }
    return build_cpu_executable(module->get(), std::move(jit), options);
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

  absl::Status synchronize() override { return absl::OkStatus(); }

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
