#include "lib/backends/cuda/CudaStepProfile.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

absl::StatusOr<std::unique_ptr<CudaStepProfile>> CudaStepProfile::create(CudaBackend& backend,
                                                                         size_t steps) {
  std::unique_ptr<CudaStepProfile> profile(new CudaStepProfile(backend));
  for (size_t i = 0; i <= steps; ++i) {
    MSTEP_ASSIGN_OR_RETURN(CudaEvent event, CudaEvent::create(backend.context(), /*timing=*/true));
    profile->marks_.push_back(std::move(event));
  }
  profile->total_ms_.assign(steps, 0.0);
  return profile;
}

absl::Status CudaStepProfile::mark(size_t i) {
  CudaEvent& event = marks_[i];
  return backend_.enqueue(absl::StrCat("profile mark ", i), [&event] { return event.record(); },
                          {}, {});
}

absl::Status CudaStepProfile::collect() {
  MSTEP_RETURN_IF_ERROR(marks_.back().synchronize());
  for (size_t i = 0; i < total_ms_.size(); ++i) {
    MSTEP_ASSIGN_OR_RETURN(float ms, CudaEvent::elapsed_ms(marks_[i], marks_[i + 1]));
    total_ms_[i] += ms;
  }
  ++runs_;
  return absl::OkStatus();
}

std::string CudaStepProfile::report(const CudaPlan& plan, size_t top) const {
  const double runs = std::max(runs_, 1);
  const double all = std::accumulate(total_ms_.begin(), total_ms_.end(), 0.0) / runs;
  std::string text = absl::StrFormat(
      "mstep cuda profile: %d run(s), %zu steps, %.3f ms per run (with a timing event after each "
      "step)\n",
      runs_, total_ms_.size(), all);
  std::vector<size_t> order(total_ms_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return total_ms_[a] > total_ms_[b]; });
  for (size_t k = 0; k < order.size() && k < top; ++k) {
    const size_t i = order[k];
    const double ms = total_ms_[i] / runs;
    absl::StrAppendFormat(&text, "  %9.1f us %5.1f%%  step %zu: %s\n", ms * 1e3,
                          all > 0 ? 100.0 * ms / all : 0.0, i,
                          describe_cuda_step(plan, plan.launches[i]));
  }
  double kinds[4] = {0, 0, 0, 0};  // kernels, cuBLASLt, cuDNN, NCCL
  int counts[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < total_ms_.size(); ++i) {
    const CudaLaunchStep& s = plan.launches[i];
    const int kind = s.matmul >= 0 ? 1 : s.attention >= 0 ? 2 : s.collective >= 0 ? 3 : 0;
    kinds[kind] += total_ms_[i] / runs;
    ++counts[kind];
  }
  const char* names[4] = {"kernels", "cuBLASLt", "cuDNN", "NCCL"};
  for (int kind = 0; kind < 4; ++kind)
    if (counts[kind] > 0)
      absl::StrAppendFormat(&text, "  %s: %d steps, %.1f us (%.1f%%)\n", names[kind], counts[kind],
                            kinds[kind] * 1e3, all > 0 ? 100.0 * kinds[kind] / all : 0.0);
  return text;
}

} // namespace mstep::cuda
