// The GPU tests' driver (cuda_driver_gpu_test and the files linked into
// it): the real libcuda, loaded once. Without a usable GPU its status is
// the reason every test skips with, and main exits 77.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaDriverApi.h"

namespace mstep::cuda::testing {

absl::StatusOr<std::shared_ptr<const CudaDriver>>& gpu_driver();

} // namespace mstep::cuda::testing
