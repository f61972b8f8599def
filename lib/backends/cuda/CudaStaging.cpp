// CudaStaging. copy_in: for each chunk, 1. wait until its slot's previous
// copy has run, 2. memcpy the chunk into the slot's pinned buffer, 3. queue
// cuMemcpyHtoDAsync from it and record the slot's event; a copy of at
// most kRingCopyBytes takes the ring's next bytes instead. copy_out: queue
// the device-to-pinned copy of chunk i, then finish chunk i-1 (wait for
// its event, memcpy it to the caller), so both directions overlap. Each
// host memcpy runs on the copy pool's threads.
#include "lib/backends/cuda/CudaStaging.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

absl::StatusOr<std::unique_ptr<CudaStaging>>
CudaStaging::create(const CudaContext& context, size_t chunk_bytes, unsigned copy_threads) {
  if (chunk_bytes == 0) return absl::InvalidArgumentError("cuda: staging chunks of 0 bytes");
  if (copy_threads == 0) copy_threads = HostCopyPool::default_threads();
  std::unique_ptr<CudaStaging> staging(new CudaStaging(context, chunk_bytes, copy_threads));
  for (Slot& slot : staging->slots_) {
    MSTEP_ASSIGN_OR_RETURN(slot.pinned, CudaPinnedBuffer::allocate(context, chunk_bytes));
    MSTEP_ASSIGN_OR_RETURN(slot.done, CudaEvent::create(context));
  }
  return staging;
}

absl::Status CudaStaging::wait(Slot& slot) {
  if (!slot.in_use) return absl::OkStatus();
  MSTEP_RETURN_IF_ERROR(slot.done.synchronize());
  slot.in_use = false;
  return absl::OkStatus();
}

absl::Status CudaStaging::close_ring_group(size_t group) {
  MSTEP_RETURN_IF_ERROR(ring_groups_[group].done.record());
  ring_groups_[group].in_use = true;
  ring_next_ = (group + 1) % kRingGroups * kRingGroupBytes;
  return absl::OkStatus();
}

absl::Status CudaStaging::copy_in_ring(CUdeviceptr target, std::span<const std::byte> source) {
  if (ring_.data() == nullptr) {
    MSTEP_ASSIGN_OR_RETURN(ring_,
                           CudaPinnedBuffer::allocate(context_, kRingGroups * kRingGroupBytes));
    for (Slot& group : ring_groups_) {
      MSTEP_ASSIGN_OR_RETURN(group.done, CudaEvent::create(context_));
    }
  }
  const size_t bytes = (source.size() + kRingAlignment - 1) / kRingAlignment * kRingAlignment;
  // Past the rest of this group: the next group's start.
  if (ring_next_ % kRingGroupBytes + bytes > kRingGroupBytes)
    MSTEP_RETURN_IF_ERROR(close_ring_group(ring_next_ / kRingGroupBytes));
  // Entering a group: its copies of the last round must have run.
  if (ring_next_ % kRingGroupBytes == 0)
    MSTEP_RETURN_IF_ERROR(wait(ring_groups_[ring_next_ / kRingGroupBytes]));
  std::byte* pinned = ring_.data() + ring_next_;
  std::memcpy(pinned, source.data(), source.size());
  const CudaDriverApi& api = context_.api();
  MSTEP_RETURN_IF_ERROR(check_cuda(
      api, api.cuMemcpyHtoDAsync(target, pinned, source.size(), context_.stream()),
      "cuMemcpyHtoDAsync", absl::StrCat("copying ", describe_bytes(source.size()), " in")));
  ring_next_ += bytes;
  // The group is full: leave it now.
  if (ring_next_ % kRingGroupBytes == 0)
    MSTEP_RETURN_IF_ERROR(close_ring_group(ring_next_ / kRingGroupBytes - 1));
  return absl::OkStatus();
}

absl::Status CudaStaging::copy_in(CUdeviceptr target, std::span<const std::byte> source) {
  MSTEP_RETURN_IF_ERROR(context_.make_current());
  if (!source.empty() && source.size() <= std::min(kRingCopyBytes, chunk_bytes_))
    return copy_in_ring(target, source);
  const CudaDriverApi& api = context_.api();
  for (size_t offset = 0, chunk = 0; offset < source.size(); offset += chunk_bytes_, ++chunk) {
    Slot& slot = slots_[chunk % slots_.size()];
    size_t bytes = std::min(chunk_bytes_, source.size() - offset);
    MSTEP_RETURN_IF_ERROR(wait(slot));
    pool_.copy(slot.pinned.data(), source.data() + offset, bytes);
    MSTEP_RETURN_IF_ERROR(check_cuda(
        api, api.cuMemcpyHtoDAsync(target + offset, slot.pinned.data(), bytes, context_.stream()),
        "cuMemcpyHtoDAsync", absl::StrCat("copying ", describe_bytes(source.size()), " in")));
    MSTEP_RETURN_IF_ERROR(slot.done.record());
    slot.in_use = true;
  }
  return absl::OkStatus();
}

absl::Status CudaStaging::copy_out(std::span<std::byte> target, CUdeviceptr source) {
  MSTEP_RETURN_IF_ERROR(context_.make_current());
  const CudaDriverApi& api = context_.api();
  // Chunk `chunk`'s bytes are in its slot once its event is; move them out.
  auto finish = [&](size_t chunk) -> absl::Status {
    Slot& slot = slots_[chunk % slots_.size()];
    MSTEP_RETURN_IF_ERROR(wait(slot));
    size_t offset = chunk * chunk_bytes_;
    pool_.copy(target.data() + offset, slot.pinned.data(),
               std::min(chunk_bytes_, target.size() - offset));
    return absl::OkStatus();
  };
  size_t chunks = (target.size() + chunk_bytes_ - 1) / chunk_bytes_;
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    Slot& slot = slots_[chunk % slots_.size()];
    size_t offset = chunk * chunk_bytes_;
    size_t bytes = std::min(chunk_bytes_, target.size() - offset);
    MSTEP_RETURN_IF_ERROR(wait(slot));
    MSTEP_RETURN_IF_ERROR(check_cuda(
        api, api.cuMemcpyDtoHAsync(slot.pinned.data(), source + offset, bytes, context_.stream()),
        "cuMemcpyDtoHAsync", absl::StrCat("copying ", describe_bytes(target.size()), " out")));
    MSTEP_RETURN_IF_ERROR(slot.done.record());
    slot.in_use = true;
    if (chunk > 0) MSTEP_RETURN_IF_ERROR(finish(chunk - 1));
  }
  if (chunks > 0) MSTEP_RETURN_IF_ERROR(finish(chunks - 1));
  return absl::OkStatus();
}

absl::Status CudaStaging::copy_device(CUdeviceptr target, CUdeviceptr source, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(context_.make_current());
  return check_cuda(context_.api(),
                    context_.api().cuMemcpyDtoDAsync(target, source, bytes, context_.stream()),
                    "cuMemcpyDtoDAsync", absl::StrCat("copying ", describe_bytes(bytes)));
}

} // namespace mstep::cuda
