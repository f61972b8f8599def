// A CUDA event (move-only RAII): recorded on a context's stream, then
// queried, waited for, or timed against another event. The seam's
// asynchronous contract (a result is ready when its event is) and the
// staging copies' reuse of pinned buffers rest on it. Library-internal.
//
// Ownership: must not outlive its CudaContext.
#pragma once

#include "lib/backends/cuda/CudaContext.h"

namespace mstep::cuda {

class CudaEvent {
public:
  /// With `timing`, elapsed_ms works; without, the event is cheaper
  /// (CU_EVENT_DISABLE_TIMING).
  static absl::StatusOr<CudaEvent> create(const CudaContext& context, bool timing = false);

  CudaEvent() = default;
  CudaEvent(CudaEvent&& other) noexcept { *this = std::move(other); }
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  ~CudaEvent() { reset(); }

  /// Marks the point the context's stream has reached.
  absl::Status record();
  /// Whether the work before the recorded point has run (cuEventQuery:
  /// CUDA_ERROR_NOT_READY is false, not an error).
  absl::StatusOr<bool> ready() const;
  /// Waits for that work.
  absl::Status synchronize() const;
  /// Milliseconds from `start` to `end`, both recorded with timing and
  /// complete.
  static absl::StatusOr<float> elapsed_ms(const CudaEvent& start, const CudaEvent& end);

  CUevent handle() const { return event_; }

private:
  void reset();
  const CudaContext* context_ = nullptr;
  CUevent event_ = nullptr;
};

} // namespace mstep::cuda
