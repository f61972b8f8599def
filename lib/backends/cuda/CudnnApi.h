// cuDNN 9's backend API for the cuda backend's attention (issue 21 §1):
// the library loaded at run time with dlopen into a table of functions,
// as cuBLASLt is (CublasLt.h), so nothing links it and a machine without
// it reports "cudnn: unavailable: <reason>". Only cudnn_graph.h's types
// are used (there is no cudnn-frontend). Library-internal.
//
// Where the library is looked for, in this order (cudnn_library_candidates):
//   1. "libcudnn.so.9" by name: the loader's path (LD_LIBRARY_PATH, the
//      ldconfig cache, where the CUDA toolkit's cuDNN usually is);
//   2. the file named by $MSTEP_CUDNN_LIBRARY, when it is set;
//   3. the CUDA toolkit's lib64/libcudnn.so.9 ($CUDA_HOME, else
//      /usr/local/cuda);
//   4. PyTorch's cuDNN: the nvidia-cudnn wheel's nvidia/cudnn/lib/
//      libcudnn.so.9, located by asking `python3` where the nvidia.cudnn
//      package is (a GPU machine may have cuDNN only inside PyTorch).
// The first that loads and has every function wins; the error for none
// lists every candidate and why it was refused.
//
// Thread-safety: a CudnnApi is immutable; a CudnnHandle is used by one
// thread at a time (cuDNN's rule for handles).
#pragma once

#include <cudnn_graph.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::cuda {

#define MSTEP_CUDNN_FUNCTIONS(X)                                                                   \
  X(cudnnGetVersion)                                                                               \
  X(cudnnGetErrorString)                                                                           \
  X(cudnnCreate)                                                                                   \
  X(cudnnDestroy)                                                                                  \
  X(cudnnSetStream)                                                                                \
  X(cudnnBackendCreateDescriptor)                                                                  \
  X(cudnnBackendDestroyDescriptor)                                                                 \
  X(cudnnBackendSetAttribute)                                                                      \
  X(cudnnBackendGetAttribute)                                                                      \
  X(cudnnBackendFinalize)                                                                          \
  X(cudnnBackendExecute)

/// The table: a field per function, named and typed as cudnn_graph.h
/// declares it.
struct CudnnApi {
#define MSTEP_CUDNN_FIELD(name) decltype(&::name) name = nullptr;
  MSTEP_CUDNN_FUNCTIONS(MSTEP_CUDNN_FIELD)
#undef MSTEP_CUDNN_FIELD
  /// Optional (cuDNN 9.0+ has it; a missing one is not an error): the
  /// message of the last failed call on this thread.
  decltype(&::cudnnGetLastErrorString) cudnnGetLastErrorString = nullptr;
  size_t version = 0; ///< cudnnGetVersion(): 10000 * major + 100 * minor + patch
  std::string path;   ///< the candidate that loaded (as dlopen'ed)
  std::string source; ///< which candidate: "name", "MSTEP_CUDNN_LIBRARY", "toolkit", "python"
};

struct CudnnLoadOptions {
  /// Candidate 1, dlopen'ed by name.
  std::string library = "libcudnn.so.9";
  /// Candidate 2: the environment variable naming a file ("" = none).
  std::string env_variable = "MSTEP_CUDNN_LIBRARY";
  /// Candidate 3: the toolkit's library folder ("" = none; the default
  /// is $CUDA_HOME/lib64, else /usr/local/cuda/lib64).
  std::string toolkit_lib_dir = default_toolkit_lib_dir();
  /// Candidate 4: the python asked where nvidia.cudnn is ("" = none).
  std::string python = "python3";

  static std::string default_toolkit_lib_dir();
};

/// One place to look, in search order.
struct CudnnCandidate {
  std::string source; ///< "name", "MSTEP_CUDNN_LIBRARY", "toolkit", "python"
  std::string path;   ///< what dlopen is given ("" when the source gave none)
  std::string note;   ///< why there is no path ("MSTEP_CUDNN_LIBRARY is not set", ...)
};

/// The candidates in search order (runs the python, when one is named, to
/// find the wheel's folder). Pure apart from the environment and python.
std::vector<CudnnCandidate> cudnn_library_candidates(const CudnnLoadOptions& options = {});

/// dlopen and dlsym of every function from the first candidate that has
/// them all, a major-version check (9), and a probe that creates and
/// destroys a tensor descriptor (cuDNN loads its sub-libraries lazily: a
/// missing libcudnn_graph.so.9 shows here, not at the first real call).
/// Needs no GPU. Errors: UnavailableError "cudnn: unavailable: <reason>"
/// listing every candidate and why it failed. The library is never
/// unloaded.
absl::StatusOr<std::shared_ptr<const CudnnApi>> load_cudnn(const CudnnLoadOptions& options = {});

/// "CUDNN_STATUS_BAD_PARAM (<cudnnGetLastErrorString>)".
std::string describe_cudnn_status(const CudnnApi& api, cudnnStatus_t status);

/// The error for a failed cuDNN call: "cudnn: <what>: <call>: <status>".
/// NOT_SUPPORTED* is Unimplemented, ALLOC_FAILED ResourceExhausted,
/// BAD_PARAM* InvalidArgument, anything else Internal.
absl::Status cudnn_error(const CudnnApi& api, cudnnStatus_t status, absl::string_view call,
                         absl::string_view what);

inline absl::Status check_cudnn(const CudnnApi& api, cudnnStatus_t status, absl::string_view call,
                                absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return cudnn_error(api, status, call, what);
}

/// A cuDNN handle bound to a stream (cudnnCreate needs a GPU: it is the
/// first step that does). The handle is destroyed with the object.
class CudnnHandle {
public:
  /// cudnnCreate, then cudnnSetStream(stream) (a CUstream is a
  /// cudaStream_t). The current CUDA context must be the stream's.
  static absl::StatusOr<std::unique_ptr<CudnnHandle>> create(std::shared_ptr<const CudnnApi> api,
                                                             void* stream);
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;

  cudnnHandle_t get() const { return handle_; }
  const CudnnApi& api() const { return *api_; }
  const std::shared_ptr<const CudnnApi>& shared_api() const { return api_; }

private:
  CudnnHandle(std::shared_ptr<const CudnnApi> api) : api_(std::move(api)) {}
  std::shared_ptr<const CudnnApi> api_;
  cudnnHandle_t handle_ = nullptr;
};

} // namespace mstep::cuda
