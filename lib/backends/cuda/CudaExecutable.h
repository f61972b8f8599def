// The cuda backend's executable: a CudaPlan run on a CudaBackend. Each
// run allocates the values the launches compute from the backend's
// caching allocator, then queues the steps (kernel launches, cuBLASLt
// matmuls through the runtime's CublasLtMatmul) in order through
// CudaBackend::enqueue (one stream, an event after each: the seam's
// asynchronous contract) and returns without waiting. Library-internal;
// runtime half (no MLIR).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaModule.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cuda {

class CudaExecutable final : public Executable {
 public:
  /// Loads every kernel of `plan` on `backend`'s device: the cubin built
  /// for its architecture, else the PTX (JIT). A plan that refers to a
  /// value or kernel it does not have is an error. A plan with cuBLASLt
  /// steps gets a CublasLtMatmul on the backend's context over `cublaslt`
  /// (null: load_cublaslt(); tests give a fake table); a missing library
  /// is the loader's "cublasLt: unavailable" error.
  static absl::StatusOr<std::unique_ptr<CudaExecutable>> create(
      CudaBackend& backend, CudaPlan plan, std::shared_ptr<const CublasLtApi> cublaslt = nullptr);

  using Executable::run;
  /// Nothing is donated or written in place: every computed value gets a
  /// buffer of its own (the caching allocator makes that cheap).
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override;
  size_t num_kernels() const override { return plan_.launches.size(); }

  const CudaPlan& plan() const { return plan_; }

 private:
  CudaExecutable(CudaBackend& backend, CudaPlan plan) : backend_(backend), plan_(std::move(plan)) {}
  /// Queues cuBLASLt step `launch` (one call per batch matrix).
  absl::Status run_matmul(const CudaLaunchStep& launch, const std::vector<BufferPtr>& values);

  CudaBackend& backend_;
  CudaPlan plan_;
  std::vector<std::unique_ptr<CudaKernelModule>> modules_;  // one per kernel
  std::vector<const CudaKernel*> kernels_;                  // plan_.kernels' order
  std::unique_ptr<CublasLtMatmul> matmul_;                  // when the plan has matmuls
};

/// Checks that `plan`'s launches, arguments and outputs name values and
/// kernels it has (a plan read from disk is checked before it runs).
absl::Status validate_cuda_plan(const CudaPlan& plan);

}  // namespace mstep::cuda
