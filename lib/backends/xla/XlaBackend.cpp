// The xla backend's runtime half: host memory (the same 64-byte aligned
// blocks as ref and cpu) and XlaExecutable, which runs a whole step as one
// native function. Executables have no stored form yet: the disk cache
// keeps the module text and the compile half (XlaCompiler.cpp) compiles it
// again on load.
#include "lib/backends/host/HostMemoryBackend.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/runtime/Backend.h"

namespace mstep::xla {

namespace {

class XlaBackend final : public host::HostMemoryBackend {
public:
  absl::string_view name() const override { return "xla"; }
  DeviceType device_type() const override { return DeviceType::xla; }

  /// No stored form yet: Unimplemented, so the disk cache hands the module
  /// text to the compile half; a saved step (Graph::save) does not load
  /// where only the runtime is (mstep-run).
  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view,
                                                          const RuntimeOptions&) override {
    return absl::UnimplementedError(
        "xla executables have no stored form yet: the step function is generated when the step "
        "is compiled, which needs libmstep_compiler; replay the step with libmstep (or save it "
        "from the cpu device for mstep-run)");
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
