// A stand-in for libcuda.so.1, dlopen'ed by load_cuda_driver in the
// loader tests: it exports the symbols the loader takes by name
// (cuDriverGetVersion, cuGetProcAddress_v2, cuGetErrorName/String) and
// hands out the rest through cuGetProcAddress, recording each name and
// version asked for. Tests configure it through mstep_fake_libcuda_*
// (found with dlsym on the same handle).
#include <cuda.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

int g_version = 13000;
CUresult g_init_result = CUDA_SUCCESS;
int g_device_count = 1;
std::string g_missing;                // a function cuGetProcAddress does not find
std::vector<std::string> g_requested; // "name@version" per cuGetProcAddress call

CUresult fake_init(unsigned) { return g_init_result; }
CUresult fake_device_get_count(int* count) {
  *count = g_device_count;
  return CUDA_SUCCESS;
}
// Every other function: present, and never called by the loader tests.
CUresult fake_not_supported() { return CUDA_ERROR_NOT_SUPPORTED; }

} // namespace

extern "C" {

__attribute__((visibility("default"))) void
mstep_fake_libcuda_configure(int version, int init_result, int device_count, const char* missing) {
  g_version = version;
  g_init_result = static_cast<CUresult>(init_result);
  g_device_count = device_count;
  g_missing = missing;
  g_requested.clear();
}

/// The names asked for, "name@version" joined by spaces.
__attribute__((visibility("default"))) const char* mstep_fake_libcuda_requested() {
  static std::string joined;
  joined.clear();
  for (const std::string& r : g_requested) joined += r + " ";
  return joined.c_str();
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  *version = g_version;
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuGetErrorName(CUresult result, const char** name) {
  *name = result == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult cuGetErrorString(CUresult result,
                                                                 const char** text) {
  *text = result == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
  return CUDA_SUCCESS;
}

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t,
                    CUdriverProcAddressQueryResult* status) {
  g_requested.push_back(std::string(symbol) + "@" + std::to_string(version));
  *pfn = nullptr;
  if (g_missing == symbol) {
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *status = CU_GET_PROC_ADDRESS_SUCCESS;
  if (std::strcmp(symbol, "cuInit") == 0)
    *pfn = reinterpret_cast<void*>(fake_init);
  else if (std::strcmp(symbol, "cuDeviceGetCount") == 0)
    *pfn = reinterpret_cast<void*>(fake_device_get_count);
  else if (std::strcmp(symbol, "cuDriverGetVersion") == 0)
    *pfn = reinterpret_cast<void*>(cuDriverGetVersion);
  else if (std::strcmp(symbol, "cuGetErrorName") == 0)
    *pfn = reinterpret_cast<void*>(cuGetErrorName);
  else if (std::strcmp(symbol, "cuGetErrorString") == 0)
    *pfn = reinterpret_cast<void*>(cuGetErrorString);
  else
    *pfn = reinterpret_cast<void*>(fake_not_supported);
  return CUDA_SUCCESS;
}

} // extern "C"
