// The cpu backend's hand-vectorized host kernels: the compute ops of a
// training step that neither oneDNN nor the fusion JIT covers (the fused
// optimizer step, reductions, softmax and log_softmax, rms_norm, nll_loss,
// dropout and the embedding-style index ops). Each family lives in its own
// file and matches the ref kernel of its op (lib/backends/ref) to float
// rounding; every kernel splits its work over the cores with OpenMP.
//
// A family builds a kernel only for the cases it has a fast path for
// (f32 data, layouts it can vectorize) and returns nullptr otherwise, so
// the backend runs the ref kernel: always correct, only slower. The
// reductions, softmax, log_softmax, rms_norm, nll_loss and dropout also
// take bf16 and f16, read as f32 and rounded on store as ref rounds them
// (HostSimd.h).
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"

namespace mstep::cpu {

/// A host kernel for the node, or nullptr when no family handles it.
/// Never fails for a node the ref backend accepts. Built kernels keep no
/// reference to the graph; run() is not reentrant for one kernel.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_host_kernel(const KernelRequest& request);

/// False when the library was built for a CPU without AVX-512 (F and DQ),
/// which the kernels are written for: make_host_kernel then returns
/// nullptr for every node.
bool host_kernels_available();

/// A host kernel that reads index values (gather, index_select,
/// index_add, scatter_add, nll_loss). It checks every index before it
/// touches memory through it; since run() cannot return a status, a bad
/// index makes run() fill its result with NaN (zeros for integer dtypes)
/// and keep the error, which the backend should report after the run.
class IndexCheckedKernel : public CpuKernel {
public:
  bool can_fail() const override { return true; }
  absl::Status last_error() const override { return last_error_; }

protected:
  absl::Status last_error_;
};

// The families, tried in this order by make_host_kernel (same contract).
absl::StatusOr<std::unique_ptr<CpuKernel>> make_optimizer_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_reduction_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_loss_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_softmax_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_rms_norm_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_dropout_kernel(const KernelRequest& request);
/// permute that swaps the last two dims (any element size but 1 byte).
absl::StatusOr<std::unique_ptr<CpuKernel>> make_transpose_kernel(const KernelRequest& request);
/// reshape, permute, expand, slice, slice_scatter as row copies.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_strided_copy_kernel(const KernelRequest& request);
absl::StatusOr<std::unique_ptr<CpuKernel>> make_index_kernel(const KernelRequest& request);

} // namespace mstep::cpu
