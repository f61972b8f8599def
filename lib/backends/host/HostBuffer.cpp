// HostBuffer: owned, view and external host memory, and the host
// wrap/copy_in/copy_out that host-memory backends share.
#include "lib/backends/host/HostBuffer.h"

#include <cstdint>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"

namespace mstep::host {

HostBuffer::HostBuffer(TensorType type, Device device) : Buffer(std::move(type), device) {
  const size_t bytes = this->type().bytes(); // a zero-element tensor still gets a block
  data_ = std::unique_ptr<std::byte[], Free>(host_allocate(bytes), Free{bytes});
}

HostBuffer::HostBuffer(TensorType type, Device device, std::byte* view_of)
    : Buffer(std::move(type), device), data_(view_of, Free{0, false}) {}

HostBuffer HostBuffer::view(TensorType type, Device device, std::byte* data) {
  return HostBuffer(std::move(type), device, data);
}

std::shared_ptr<HostBuffer> HostBuffer::external(TensorType type, Device device, std::byte* data,
                                                 std::function<void()> release) {
  auto buffer = std::make_shared<HostBuffer>(HostBuffer(std::move(type), device, data));
  buffer->release_ = std::move(release);
  return buffer;
}

HostBuffer::~HostBuffer() {
  data_.reset();
  if (release_) release_();
}

absl::StatusOr<std::shared_ptr<Buffer>> host_wrap(const TensorType& type, Device device, void* data,
                                                  std::function<void()> release) {
  if (reinterpret_cast<uintptr_t>(data) % 64 != 0)
    return absl::UnimplementedError("host memory that is not 64-byte aligned is copied");
  return HostBuffer::external(type, device, static_cast<std::byte*>(data), std::move(release));
}

void HostBuffer::rebind(std::byte* data) {
  data_.release(); // a view owns nothing
  data_.reset(data);
}

absl::Status host_copy_in(Buffer& dst, const void* src, size_t bytes) {
  if (bytes != dst.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat("copy_in of ", bytes, " bytes into ",
                                                   dst.type().to_string(), " (", dst.type().bytes(),
                                                   " bytes)"));
  if (bytes) std::memcpy(static_cast<HostBuffer&>(dst).bytes(), src, bytes);
  return absl::OkStatus();
}

absl::Status host_copy_out(const Buffer& src, void* dst, size_t bytes) {
  if (bytes != src.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat("copy_out of ", bytes, " bytes from ",
                                                   src.type().to_string(), " (", src.type().bytes(),
                                                   " bytes)"));
  if (bytes) std::memcpy(dst, static_cast<const HostBuffer&>(src).bytes(), bytes);
  return absl::OkStatus();
}

} // namespace mstep::host
