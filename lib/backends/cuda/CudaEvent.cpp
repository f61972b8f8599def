// CudaEvent.
#include "lib/backends/cuda/CudaEvent.h"

#include <utility>

#include "mstep/core/Error.h"

namespace mstep::cuda {

absl::StatusOr<CudaEvent> CudaEvent::create(const CudaContext& context, bool timing) {
  MSTEP_RETURN_IF_ERROR(context.make_current());
  CudaEvent event;
  MSTEP_RETURN_IF_ERROR(MSTEP_CUDA_CALL(context.api(), cuEventCreate, &event.event_,
                                        timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
  event.context_ = &context;
  return event;
}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    reset();
    context_ = std::exchange(other.context_, nullptr);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::reset() {
  if (event_ != nullptr && context_->make_current().ok())
    (void)context_->api().cuEventDestroy(event_);
  context_ = nullptr;
  event_ = nullptr;
}

absl::Status CudaEvent::record() {
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  return MSTEP_CUDA_CALL(context_->api(), cuEventRecord, event_, context_->stream());
}

absl::StatusOr<bool> CudaEvent::ready() const {
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  CUresult result = context_->api().cuEventQuery(event_);
  if (result == CUDA_ERROR_NOT_READY) return false;
  MSTEP_RETURN_IF_ERROR(check_cuda(context_->api(), result, "cuEventQuery"));
  return true;
}

absl::Status CudaEvent::synchronize() const {
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  return MSTEP_CUDA_CALL(context_->api(), cuEventSynchronize, event_);
}

absl::StatusOr<float> CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
  MSTEP_RETURN_IF_ERROR(start.context_->make_current());
  float ms = 0;
  MSTEP_RETURN_IF_ERROR(
      MSTEP_CUDA_CALL(start.context_->api(), cuEventElapsedTime, &ms, start.event_, end.event_));
  return ms;
}

} // namespace mstep::cuda
