// Device time per plan step of a cuda executable (MSTEP_CUDA_PROFILE=1,
// `mstep-run --profile`): where a GPU spends a training step, kernel by
// kernel, to find the launches that hold it back (issue 21's performance
// work is planned from it). A timing event is queued before the first
// step and after each step of a run, through the backend like any work;
// at the end of the run the host waits for the last one and adds each
// step's time to its total. So a profiled run waits for the device (runs
// no longer overlap the host), and each step's time includes the gap the
// events leave between launches: compare steps with each other, not the
// sum with an unprofiled run's time. Steps recorded into a CUDA graph are
// not profiled (the events would be graph nodes). Library-internal.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaEvent.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

class CudaStepProfile {
public:
  /// Events for a plan of `steps` steps, on `backend`'s context.
  static absl::StatusOr<std::unique_ptr<CudaStepProfile>> create(CudaBackend& backend,
                                                                 size_t steps);

  /// Queues mark `i` on the backend's stream: 0 before the first step,
  /// i after step i - 1.
  absl::Status mark(size_t i);
  /// Waits for the last mark and adds each step's time to its total.
  absl::Status collect();

  int runs() const { return runs_; }
  /// Milliseconds step `i` took over all collected runs.
  double total_ms(size_t i) const { return total_ms_[i]; }
  /// The `top` steps by time (mean per run, share of the run, the step as
  /// describe_cuda_step puts it), then the time per kind of step (kernels,
  /// cuBLASLt, cuDNN, NCCL). `plan`: the plan as run.
  std::string report(const CudaPlan& plan, size_t top) const;

private:
  explicit CudaStepProfile(CudaBackend& backend) : backend_(backend) {}
  CudaBackend& backend_;
  std::vector<CudaEvent> marks_;
  std::vector<double> total_ms_;
  int runs_ = 0;
};

} // namespace mstep::cuda
