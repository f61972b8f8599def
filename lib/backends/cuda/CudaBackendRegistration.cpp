// Registers the cuda backend as "cuda" (libmstep_runtime only: the GPU
// check's binary links CudaBackend.cpp without the registry). Creation
// loads the driver on first use; without one, BackendRegistry::get returns
// "cuda: unavailable: <reason>" and the other backends are unaffected.
#include "lib/backends/cuda/CudaBackend.h"

namespace mstep::cuda {
namespace {

const bool registered = [] {
  BackendRegistry::register_backend("cuda", DeviceType::cuda, &CudaBackend::create_default);
  return true;
}();

} // namespace
} // namespace mstep::cuda
