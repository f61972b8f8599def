// SpecialValueGuard: a oneDNN kernel for an op whose primitive treats
// non-finite inputs differently from the op. Measured differences:
// - max pooling (and oneDNN's softmax, which mstep does not use) take
//   maxima with an ordered compare starting
//   from -FLT_MAX, so a NaN is skipped instead of propagated and an
//   all -inf window yields -FLT_MAX;
// - convolutions pad their reduction blocks (channel blocks, bf16 pairs,
//   gemm panels) with zeros that meet an inf or NaN of a neighbouring
//   tap, turning finite or infinite results into NaN.
// The guard scans the operands first and, only when one holds NaN, an
// infinity or +-FLT_MAX, runs the ref kernel (exact by definition, and
// slow, but never taken in a healthy run). The scan reads the operands
// once more, which is cheap next to the primitive.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "mstep/core/DType.h"

namespace mstep::cpu::onednn {

/// Whether any of the `n` elements at `data` (f32 or bf16) is NaN, an
/// infinity or +-FLT_MAX (the start value of oneDNN's max reductions).
/// Runs on all cores for large inputs.
bool has_special_values(const void* data, DType dtype, int64_t n);

class SpecialValueGuard final : public CpuKernel {
 public:
  struct Scanned {
    int operand;
    DType dtype;
    int64_t numel;
  };

  SpecialValueGuard(std::unique_ptr<CpuKernel> fast, std::unique_ptr<CpuKernel> exact,
                    std::vector<Scanned> scanned)
      : fast_(std::move(fast)), exact_(std::move(exact)), scanned_(std::move(scanned)) {}

  void run(const void* const* operands, void* const* results) override;
  absl::string_view name() const override { return fast_->name(); }

 private:
  std::unique_ptr<CpuKernel> fast_;
  std::unique_ptr<CpuKernel> exact_;
  std::vector<Scanned> scanned_;
};

/// `fast` (a kernel for `request`'s node) behind a guard that scans every
/// operand and falls back to the node's ref kernel. Passes nullptr and
/// errors through. Not for kernels that read an operand through
/// transposed_source(): the ref kernel reads the operands as the graph
/// types them.
absl::StatusOr<std::unique_ptr<CpuKernel>> guard_special_values(
    const KernelRequest& request, absl::StatusOr<std::unique_ptr<CpuKernel>> fast);

}  // namespace mstep::cpu::onednn
