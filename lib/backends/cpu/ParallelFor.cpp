// cpu_parallel_for (mstep/runtime/CustomOp.h): the helper custom cpu
// kernels split their work with, on the OpenMP team the cpu backend's own
// kernels and oneDNN use, so a custom kernel never oversubscribes them.
#include <omp.h>

#include <algorithm>
#include <exception>
#include <mutex>

#include "mstep/runtime/CustomOp.h"

namespace mstep {

int cpu_thread_count() { return omp_get_max_threads(); }

void cpu_parallel_for(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  // 1. As many ranges as threads, fewer when a range would be below grain.
  const int64_t ranges = std::min<int64_t>(omp_get_max_threads(), n / grain);
  if (ranges <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  // 2. Range r is [n * r / ranges, n * (r + 1) / ranges): contiguous, each
  //    at least floor(n / ranges) >= grain long. An
  //    exception must not leave the parallel region: keep the first.
  std::exception_ptr first_error;
  std::mutex error_mutex;
#pragma omp parallel for schedule(static, 1) num_threads(static_cast <int>(ranges))
  for (int64_t r = 0; r < ranges; ++r) {
    try {
      fn(n * r / ranges, n * (r + 1) / ranges);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

} // namespace mstep
