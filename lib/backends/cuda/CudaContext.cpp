// CudaContext: the device's attributes, its primary context (the context
// the CUDA runtime and libraries such as cuBLASLt share) and one
// non-blocking stream (it never waits on the legacy default stream).
#include "lib/backends/cuda/CudaContext.h"

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

std::string CudaDeviceInfo::arch() const {
  return absl::StrCat("sm_", compute_major, compute_minor);
}

absl::StatusOr<std::unique_ptr<CudaContext>>
CudaContext::create(std::shared_ptr<const CudaDriver> driver, int ordinal) {
  const CudaDriverApi& api = driver->api;
  if (ordinal < 0 || ordinal >= driver->info.device_count)
    return absl::InvalidArgumentError(absl::StrCat("cuda: no device ", ordinal, "; the driver has ",
                                                   driver->info.device_count, " (ordinals 0 to ",
                                                   driver->info.device_count - 1, ")"));
  CUdevice handle = 0;
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceGet, &handle, ordinal));
  CudaDeviceInfo device;
  device.ordinal = ordinal;
  char name[256] = {};
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceGetName, name, sizeof(name) - 1, handle));
  device.name = name;
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceGetAttribute, &device.compute_major,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle));
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceGetAttribute, &device.compute_minor,
                                        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle));
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceGetAttribute, &device.multiprocessor_count,
                                        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle));
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDeviceTotalMem, &device.total_memory, handle));

  std::unique_ptr<CudaContext> context(
      new CudaContext(std::move(driver), std::move(device), handle));
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(api, cuDevicePrimaryCtxRetain, &context->context_, handle));
  MSTEP_RETURN_IF_ERROR(context->make_current());
  MSTEP_RETURN_IF_ERROR(
      MSTEP_CUDA_CALL(api, cuStreamCreate, &context->stream_, CU_STREAM_NON_BLOCKING));
  return context;
}

CudaContext::~CudaContext() {
  // Errors cannot be reported from here; a context that failed is released
  // all the same.
  if (context_ != nullptr && make_current().ok() && stream_ != nullptr) {
    (void)api().cuStreamSynchronize(stream_);
    (void)api().cuStreamDestroy(stream_);
  }
  if (context_ != nullptr) (void)api().cuDevicePrimaryCtxRelease(handle_);
}

absl::Status CudaContext::make_current() const {
  return MSTEP_CUDA_CALL(api(), cuCtxSetCurrent, context_);
}

absl::Status CudaContext::synchronize() const {
  MSTEP_RETURN_IF_ERROR(make_current());
  return MSTEP_CUDA_CALL(api(), cuStreamSynchronize, stream_);
}

} // namespace mstep::cuda
