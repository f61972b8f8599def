// Registers the cuda backend as "cuda" (libmstep_runtime only: the GPU
// check's binary links CudaBackend.cpp without the registry). Creation
// loads the driver on first use; without one, BackendRegistry::get returns
// "cuda: unavailable: <reason>" and the other backends are unaffected.
// Its executables load from their stored form (CudaPlanFormat.h) through
// load_cuda_executable.
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaExecutable.h"

namespace mstep::cuda {
namespace {

const bool registered = [] {
  // Executables from the disk cache and exported graphs load as plans.
  BackendRegistry::register_backend("cuda", DeviceType::cuda,
                                    []() -> absl::StatusOr<std::unique_ptr<Backend>> {
                                      CudaBackendOptions options;
                                      const RuntimeOptions env = RuntimeOptions::from_env();
                                      options.no_epilogues = env.cuda_no_epilogues;
                                      options.log_fallback = env.log_fallback;
                                      options.profile = env.cuda_profile;
                                      options.load_executable = [](CudaBackend& backend,
                                                                   absl::string_view blob) {
                                        return load_cuda_executable(backend, blob);
                                      };
                                      return CudaBackend::create_default(options);
                                    });
  return true;
}();

} // namespace
} // namespace mstep::cuda
