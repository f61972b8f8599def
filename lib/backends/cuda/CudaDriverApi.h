// The CUDA driver API as a table of function pointers, loaded at run time
// with dlopen("libcuda.so.1") and cuGetProcAddress, so a binary built with
// the CUDA runtime half starts (and every other backend works) on a machine
// without a GPU or driver. Only cuda.h's types are used; nothing links
// libcuda. Library-internal; no LLVM or MLIR.
//
// Tests fill a CudaDriverApi with fake functions that record their calls
// and hand it to init_cuda_driver() (the fake-driver tests).
//
// Thread-safety: a loaded CudaDriver is immutable; its functions may be
// called from any thread as the driver allows.
#pragma once

#include <cuda.h>

#include "absl/strings/string_view.h"
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace mstep::cuda {

/// Every driver function the runtime half calls, by its unversioned name
/// (the name cuGetProcAddress takes). cuda.h maps some names to versioned
/// symbols (cuMemAlloc -> cuMemAlloc_v2); a field's type is the prototype
/// of the version this header declares, and it is resolved for that
/// version (CUDA_VERSION), so the two always agree.
#define MSTEP_CUDA_DRIVER_FUNCTIONS(X)                                                             \
  X(cuGetErrorName)                                                                                \
  X(cuGetErrorString)                                                                              \
  X(cuInit)                                                                                        \
  X(cuDriverGetVersion)                                                                            \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceTotalMem)                                                                              \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuCtxSetCurrent)                                                                               \
  X(cuStreamCreate)                                                                                \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamQuery)                                                                                 \
  X(cuEventCreate)                                                                                 \
  X(cuEventRecord)                                                                                 \
  X(cuEventQuery)                                                                                  \
  X(cuEventSynchronize)                                                                            \
  X(cuEventElapsedTime)                                                                            \
  X(cuEventDestroy)                                                                                \
  X(cuMemAlloc)                                                                                    \
  X(cuMemFree)                                                                                     \
  X(cuMemHostAlloc)                                                                                \
  X(cuMemFreeHost)                                                                                 \
  X(cuMemcpyHtoDAsync)                                                                             \
  X(cuMemcpyDtoHAsync)                                                                             \
  X(cuMemcpyDtoDAsync)                                                                             \
  X(cuLibraryLoadData)                                                                             \
  X(cuLibraryUnload)                                                                               \
  X(cuLibraryGetKernel)                                                                            \
  X(cuKernelGetFunction)                                                                           \
  X(cuKernelGetParamInfo)                                                                          \
  X(cuFuncGetAttribute)                                                                            \
  X(cuLaunchKernel)                                                                                \
  X(cuStreamBeginCapture)                                                                          \
  X(cuStreamEndCapture)                                                                            \
  X(cuStreamIsCapturing)                                                                           \
  X(cuGraphInstantiateWithFlags)                                                                   \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphExecUpdate)                                                                             \
  X(cuGraphDestroy)                                                                                \
  X(cuGraphExecDestroy)

/// Functions the runtime half uses when the driver has them and does
/// without otherwise (a null field): patching an instantiated CUDA graph's
/// nodes in place when an input moves (CudaGraph::rebind; without them an
/// input's move re-records the step).
#define MSTEP_CUDA_DRIVER_OPTIONAL_FUNCTIONS(X)                                                    \
  X(cuFuncGetParamInfo)                                                                            \
  X(cuGraphGetNodes)                                                                               \
  X(cuGraphNodeGetType)                                                                            \
  X(cuGraphKernelNodeGetParams)                                                                    \
  X(cuGraphMemcpyNodeGetParams)                                                                    \
  X(cuGraphExecKernelNodeSetParams)                                                                \
  X(cuGraphExecMemcpyNodeSetParams)

/// The table. A field is named as the driver function (after cuda.h's
/// renaming, so `api.cuMemAlloc(...)` reads as the driver call).
struct CudaDriverApi {
#define MSTEP_CUDA_DRIVER_FIELD(name) decltype(&::name) name = nullptr;
  MSTEP_CUDA_DRIVER_FUNCTIONS(MSTEP_CUDA_DRIVER_FIELD)
  MSTEP_CUDA_DRIVER_OPTIONAL_FUNCTIONS(MSTEP_CUDA_DRIVER_FIELD)
#undef MSTEP_CUDA_DRIVER_FIELD
};

/// The oldest driver the table works with: 12.4 (cuGetProcAddress with
/// its query result and cuLibraryLoadData since 12.0, cuKernelGetParamInfo
/// since 12.4; stream capture and graph exec update, issue 22, are older). As cuDriverGetVersion reports it: 1000 * major + 10 * minor.
inline constexpr int kMinimumDriverVersion = 12040;

/// What init_cuda_driver found.
struct CudaDriverInfo {
  int driver_version = 0; ///< cuDriverGetVersion: 13000 is CUDA 13.0
  int device_count = 0;   ///< at least 1
};

/// A loaded, initialized driver: the table and what it reported. The
/// library is never unloaded (the driver cannot be unloaded safely).
struct CudaDriver {
  CudaDriverApi api;
  CudaDriverInfo info;
};

/// Where load_cuda_driver looks.
struct CudaDriverLoadOptions {
  /// The library dlopen'ed; tests point it at a missing name or at a fake.
  std::string library = "libcuda.so.1";
};

/// Loads the driver: dlopen, the entry points through cuGetProcAddress,
/// then init_cuda_driver. Every failure is absl::UnavailableError with
/// "cuda: unavailable: <reason>": no driver library (the dlerror), a
/// driver too old (the version found and the one needed) or lacking a
/// function, cuInit failing (its error name), no device.
absl::StatusOr<std::shared_ptr<const CudaDriver>>
load_cuda_driver(const CudaDriverLoadOptions& options = {});

/// Checks a filled table: every required function present (the optional
/// ones may be null), the driver version,
/// cuInit(0), at least one device. Errors as load_cuda_driver's.
absl::StatusOr<CudaDriverInfo> init_cuda_driver(const CudaDriverApi& api);

/// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)", the name and
/// description from the driver (or the number when it has none).
std::string describe_cuda_result(const CudaDriverApi& api, CUresult result);

/// The error for a failed driver call: the call, describe_cuda_result and
/// `context` (what was being done, e.g. "allocating 256 MiB"). The status
/// code follows the result: out of memory is ResourceExhausted, a bad
/// value InvalidArgument, a missing name NotFound, no binary for the GPU
/// FailedPrecondition, anything else Internal.
absl::Status cuda_error(const CudaDriverApi& api, CUresult result, absl::string_view call,
                        absl::string_view context = {});

/// OK for CUDA_SUCCESS, else cuda_error.
inline absl::Status check_cuda(const CudaDriverApi& api, CUresult result, absl::string_view call,
                               absl::string_view context = {}) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  return cuda_error(api, result, call, context);
}

} // namespace mstep::cuda

/// `MSTEP_CUDA_CALL(api, cuStreamSynchronize, stream)`: the call through
/// the table, as an absl::Status naming it (the name is taken before
/// cuda.h renames it).
#define MSTEP_CUDA_CALL(api, name, ...)                                                            \
  ::mstep::cuda::check_cuda((api), (api).name(__VA_ARGS__), #name)
