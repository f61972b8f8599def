// Kernels loaded onto a device from a cubin, or JIT-compiled from PTX when
// the cubin does not load (built for another architecture, or for a driver
// newer than the one installed): cuLibraryLoadData, then each kernel by
// name, its function in the context and its parameter layout.
// Library-internal.
//
// Ownership: a module must not outlive its CudaContext; its kernels live
// as long as the module (cuLibraryUnload at destruction).
#pragma once

#include "absl/strings/string_view.h"
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaContext.h"

namespace mstep::cuda {

/// One parameter of a kernel as the driver lays it out.
struct CudaKernelParam {
  size_t offset = 0;
  size_t size = 0;
};

/// A kernel ready to launch on its context.
struct CudaKernel {
  std::string name;
  CUkernel kernel = nullptr;
  CUfunction function = nullptr;
  std::vector<CudaKernelParam> params; ///< from cuKernelGetParamInfo
};

/// The architecture a cubin's ELF header names ("sm_90"), or a sentence
/// saying it is not a cubin ("not a cubin (an ELF for NVIDIA GPUs)").
std::string describe_cubin_arch(absl::string_view cubin);
/// The architecture a PTX module targets (its `.target` line, e.g.
/// "compute_80"), or "no .target line".
std::string describe_ptx_target(absl::string_view ptx);

class CudaKernelModule {
public:
  enum class Source { kCubin, kPtx };

  /// Loads `cubin`; when that fails (or `cubin` is empty) JIT-compiles
  /// `ptx` (when not empty), and finds each of `kernel_names` in what
  /// loaded. When neither works, the error names the kernels, the device
  /// and its sm_XY, the cubin's architecture and why it failed, the PTX's
  /// target and why it failed, and the JIT's error log.
  static absl::StatusOr<std::unique_ptr<CudaKernelModule>>
  load(const CudaContext& context, absl::string_view cubin, absl::string_view ptx,
       std::span<const std::string> kernel_names);

  ~CudaKernelModule();
  CudaKernelModule(const CudaKernelModule&) = delete;
  CudaKernelModule& operator=(const CudaKernelModule&) = delete;

  /// The kernel `name` (one of those loaded); an error names the ones
  /// there are.
  absl::StatusOr<const CudaKernel*> kernel(absl::string_view name) const;
  /// What was loaded: the cubin or the PTX (JIT).
  Source source() const { return source_; }
  /// Why the cubin did not load, when the PTX was used.
  const std::string& cubin_failure() const { return cubin_failure_; }
  /// The JIT's information log (empty for a cubin).
  const std::string& jit_log() const { return jit_log_; }

private:
  explicit CudaKernelModule(const CudaContext& context) : context_(context) {}

  const CudaContext& context_;
  CUlibrary library_ = nullptr;
  Source source_ = Source::kCubin;
  std::string cubin_failure_;
  std::string jit_log_;
  std::vector<CudaKernel> kernels_;
};

} // namespace mstep::cuda
