// The cpu backend's flash-style attention kernels for `sdpa` and
// `sdpa_grad`: tiled online softmax that never materializes an [L, S]
// score matrix (unless the node returns one), skips causal and padded key
// blocks, and replays the ref kernel's Philox dropout draws exactly.
#pragma once

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"

namespace mstep::cpu {

/// A flash attention kernel. Scratch is allocated once, at construction,
/// sized for omp_get_max_threads() threads at that time; run() never
/// allocates and uses at most that many threads. run() is not reentrant
/// (the scratch is shared by calls).
class FlashAttentionKernel : public CpuKernel {
 public:
  /// Bytes of scratch the kernel holds: per-thread tiles and O(L) row
  /// statistics, never anything [L, S].
  virtual size_t scratch_bytes() const = 0;
};

/// A FlashAttentionKernel for an `sdpa` or `sdpa_grad` node over f32 or
/// bf16 (bf16 computes in f32). nullptr for any other op or dtype, and for
/// bf16 with a mask gradient: the backend then uses the ref kernel. An
/// error when the node's operands disagree with its attributes.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_flash_attention_kernel(
    const KernelRequest& request);

}  // namespace mstep::cpu
