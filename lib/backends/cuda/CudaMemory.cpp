// CudaDeviceBuffer and CudaPinnedBuffer.
#include "lib/backends/cuda/CudaMemory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

std::string describe_bytes(size_t bytes) {
  if (bytes >= (size_t{1} << 20) && bytes % (size_t{1} << 20) == 0)
    return absl::StrCat(bytes >> 20, " MiB");
  return absl::StrCat(bytes, " bytes");
}

namespace {
std::string on_device(const CudaContext& context, size_t bytes, absl::string_view what) {
  return absl::StrFormat("allocating %s of %s on device %d (%s)", describe_bytes(bytes), what,
                         context.device().ordinal, context.device().name);
}
} // namespace

absl::StatusOr<CudaDeviceBuffer> CudaDeviceBuffer::allocate(const CudaContext& context,
                                                            size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("cuda: a device buffer of 0 bytes");
  MSTEP_RETURN_IF_ERROR(context.make_current());
  CudaDeviceBuffer buffer;
  MSTEP_RETURN_IF_ERROR(check_cuda(context.api(), context.api().cuMemAlloc(&buffer.pointer_, bytes),
                                   "cuMemAlloc", on_device(context, bytes, "device memory")));
  buffer.context_ = &context;
  buffer.size_ = bytes;
  return buffer;
}

CudaDeviceBuffer& CudaDeviceBuffer::operator=(CudaDeviceBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    pointer_ = std::exchange(other.pointer_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void CudaDeviceBuffer::reset() {
  if (pointer_ != 0 && context_->make_current().ok()) (void)context_->api().cuMemFree(pointer_);
  context_ = nullptr;
  pointer_ = 0;
  size_ = 0;
}

absl::StatusOr<CudaPinnedBuffer> CudaPinnedBuffer::allocate(const CudaContext& context,
                                                            size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("cuda: a pinned buffer of 0 bytes");
  MSTEP_RETURN_IF_ERROR(context.make_current());
  void* data = nullptr;
  MSTEP_RETURN_IF_ERROR(check_cuda(context.api(), context.api().cuMemHostAlloc(&data, bytes, 0),
                                   "cuMemHostAlloc",
                                   on_device(context, bytes, "pinned host memory")));
  CudaPinnedBuffer buffer;
  buffer.context_ = &context;
  buffer.data_ = static_cast<std::byte*>(data);
  buffer.size_ = bytes;
  return buffer;
}

CudaPinnedBuffer& CudaPinnedBuffer::operator=(CudaPinnedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void CudaPinnedBuffer::reset() {
  if (data_ != nullptr && context_->make_current().ok()) (void)context_->api().cuMemFreeHost(data_);
  context_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

} // namespace mstep::cuda
