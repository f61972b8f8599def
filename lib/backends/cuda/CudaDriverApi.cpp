// load_cuda_driver: 1. dlopen the driver library (RTLD_NOW | RTLD_LOCAL);
// 2. cuDriverGetVersion and cuGetProcAddress_v2 by dlsym, the only two
// symbols taken by name (both exist in every driver new enough); 3. the
// version checked before anything else, so an old driver is named as such;
// 4. every other function through cuGetProcAddress for this header's
// CUDA_VERSION, so each pointer has the ABI of the prototype it is stored
// as; 5. init_cuda_driver: cuInit and the device count.
#include "lib/backends/cuda/CudaDriverApi.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mstep::cuda {
namespace {

absl::Status unavailable(absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat("cuda: unavailable: ", reason));
}

std::string version_text(int version) {
  return absl::StrFormat("%d.%d", version / 1000, version % 1000 / 10);
}

absl::Status check_version(int version) {
  if (version >= kMinimumDriverVersion) return absl::OkStatus();
  return unavailable(absl::StrCat("the NVIDIA driver supports CUDA ", version_text(version),
                                  "; mstep needs CUDA ", version_text(kMinimumDriverVersion),
                                  " or newer (update the driver)"));
}

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

} // namespace

std::string describe_cuda_result(const CudaDriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS ||
      name == nullptr)
    return absl::StrCat("CUresult ", static_cast<int>(result));
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != CUDA_SUCCESS ||
      text == nullptr)
    return name;
  return absl::StrCat(name, " (", text, ")");
}

absl::Status cuda_error(const CudaDriverApi& api, CUresult result, absl::string_view call,
                        absl::string_view context) {
  std::string message = absl::StrCat(call, ": ", describe_cuda_result(api, result));
  if (!context.empty()) absl::StrAppend(&message, ", ", context);
  switch (result) {
  case CUDA_ERROR_OUT_OF_MEMORY:
    return absl::ResourceExhaustedError(message);
  case CUDA_ERROR_INVALID_VALUE:
  case CUDA_ERROR_INVALID_HANDLE:
    return absl::InvalidArgumentError(message);
  case CUDA_ERROR_NOT_FOUND:
    return absl::NotFoundError(message);
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return absl::FailedPreconditionError(message);
  default:
    return absl::InternalError(message);
  }
}

absl::StatusOr<CudaDriverInfo> init_cuda_driver(const CudaDriverApi& api) {
#define MSTEP_CUDA_CHECK_PRESENT(name)                                                             \
  if (api.name == nullptr)                                                                         \
    return unavailable("the NVIDIA driver has no " #name "; update the driver");
  MSTEP_CUDA_DRIVER_FUNCTIONS(MSTEP_CUDA_CHECK_PRESENT)
#undef MSTEP_CUDA_CHECK_PRESENT
  CudaDriverInfo info;
  if (CUresult r = api.cuDriverGetVersion(&info.driver_version); r != CUDA_SUCCESS)
    return unavailable(absl::StrCat("cuDriverGetVersion failed: ", describe_cuda_result(api, r)));
  if (absl::Status s = check_version(info.driver_version); !s.ok()) return s;
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS)
    return unavailable(absl::StrCat("cuInit failed: ", describe_cuda_result(api, r),
                                    r == CUDA_ERROR_NO_DEVICE ? " (no CUDA device)" : ""));
  if (CUresult r = api.cuDeviceGetCount(&info.device_count); r != CUDA_SUCCESS)
    return unavailable(absl::StrCat("cuDeviceGetCount failed: ", describe_cuda_result(api, r)));
  if (info.device_count < 1) return unavailable("the driver reports no CUDA device");
  return info;
}

absl::StatusOr<std::shared_ptr<const CudaDriver>>
load_cuda_driver(const CudaDriverLoadOptions& options) {
  void* library = dlopen(options.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return unavailable(absl::StrCat("cannot load the NVIDIA driver library ", options.library, " (",
                                    why ? why : "unknown error",
                                    "); is the NVIDIA driver installed?"));
  }
  auto driver = std::make_shared<CudaDriver>();
  CudaDriverApi& api = driver->api;
  // Taken by name: the error functions (for the messages below), the
  // version (checked first) and the entry point to everything else.
  api.cuGetErrorName =
      reinterpret_cast<decltype(api.cuGetErrorName)>(dlsym(library, "cuGetErrorName"));
  api.cuGetErrorString =
      reinterpret_cast<decltype(api.cuGetErrorString)>(dlsym(library, "cuGetErrorString"));
  api.cuDriverGetVersion =
      reinterpret_cast<decltype(api.cuDriverGetVersion)>(dlsym(library, "cuDriverGetVersion"));
  if (api.cuDriverGetVersion == nullptr)
    return unavailable(absl::StrCat(options.library, " has no cuDriverGetVersion; it is not an "
                                                     "NVIDIA driver library"));
  int version = 0;
  if (CUresult r = api.cuDriverGetVersion(&version); r != CUDA_SUCCESS)
    return unavailable(absl::StrCat("cuDriverGetVersion failed: ", describe_cuda_result(api, r)));
  if (absl::Status s = check_version(version); !s.ok()) return s;
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return unavailable(absl::StrCat("the NVIDIA driver (CUDA ", version_text(version),
                                    ") has no cuGetProcAddress_v2; update the driver"));
  }
  // A symbol the driver lacks stays null; init_cuda_driver names a
  // required one.
#define MSTEP_CUDA_RESOLVE(name)                                                                   \
  {                                                                                                \
    void* fn = nullptr;                                                                            \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                   \
    if (get_proc(#name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) == CUDA_SUCCESS && \
        found == CU_GET_PROC_ADDRESS_SUCCESS)                                                      \
      api.name = reinterpret_cast<decltype(api.name)>(fn);                                         \
  }
  MSTEP_CUDA_DRIVER_FUNCTIONS(MSTEP_CUDA_RESOLVE)
  MSTEP_CUDA_DRIVER_OPTIONAL_FUNCTIONS(MSTEP_CUDA_RESOLVE)
#undef MSTEP_CUDA_RESOLVE
  absl::StatusOr<CudaDriverInfo> info = init_cuda_driver(api);
  if (!info.ok()) return info.status();
  driver->info = *info;
  return std::shared_ptr<const CudaDriver>(std::move(driver));
}

} // namespace mstep::cuda
