// NVRTC, the CUDA toolkit's runtime compiler, for custom ops' CUDA C++
// kernels (CudaCustomLowering.h): its functions as a table loaded with
// dlopen, like libcuda, cuBLASLt and cuDNN, so a build or machine without
// libnvrtc still starts (and only compiling such a kernel fails, naming
// where the library was looked for), and one compile: source -> PTX, with
// the lowered (mangled) name of the entry. Compile half; no MLIR.
//
// Thread-safety: the table is immutable once loaded; nvrtc_compile may run
// on several threads at once (NVRTC programs are independent).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <nvrtc.h>

namespace mstep::cuda {

#define MSTEP_NVRTC_FUNCTIONS(X)                                                                   \
  X(nvrtcGetErrorString)                                                                           \
  X(nvrtcVersion)                                                                                  \
  X(nvrtcCreateProgram)                                                                            \
  X(nvrtcDestroyProgram)                                                                           \
  X(nvrtcCompileProgram)                                                                           \
  X(nvrtcGetPTXSize)                                                                               \
  X(nvrtcGetPTX)                                                                                   \
  X(nvrtcGetProgramLogSize)                                                                        \
  X(nvrtcGetProgramLog)                                                                            \
  X(nvrtcAddNameExpression)                                                                        \
  X(nvrtcGetLoweredName)

/// The NVRTC functions mstep calls.
struct NvrtcApi {
#define MSTEP_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  MSTEP_NVRTC_FUNCTIONS(MSTEP_NVRTC_MEMBER)
#undef MSTEP_NVRTC_MEMBER
  int major = 0, minor = 0;
  std::string library; ///< the path or name that loaded
};

struct NvrtcLoadOptions {
  /// Tried in order; empty: default_nvrtc_candidates().
  std::vector<std::string> candidates;
};

/// libnvrtc.so.13 and .so.12 by name (the loader's path), then the
/// configured toolkit's lib64 and lib folders.
std::vector<std::string> default_nvrtc_candidates();

/// The table from the first candidate that loads and has every function.
/// UnavailableError "nvrtc: unavailable: ..." naming each candidate and why
/// it did not load, and what to do.
absl::StatusOr<std::shared_ptr<const NvrtcApi>> load_nvrtc(const NvrtcLoadOptions& options = {});
/// load_nvrtc() once per process (its result, error included, is kept).
absl::StatusOr<std::shared_ptr<const NvrtcApi>> default_nvrtc();

struct NvrtcOutput {
  std::string ptx;
  /// The entry's name in the PTX (the mangled name of a C++ function).
  std::string lowered_entry;
  /// NVRTC's log (warnings), possibly empty.
  std::string log;
};

/// Compiles `source` (named `program` in NVRTC's messages) to PTX for the
/// virtual architecture `arch` ("compute_80") with `options` added, and
/// lowers the name expression `entry`. Errors: InvalidArgument with NVRTC's
/// log when the source does not compile or `entry` names no __global__
/// function in it; Internal for other NVRTC failures.
absl::StatusOr<NvrtcOutput> nvrtc_compile(const NvrtcApi& api, absl::string_view source,
                                          absl::string_view program, absl::string_view entry,
                                          absl::string_view arch,
                                          const std::vector<std::string>& options);

} // namespace mstep::cuda
