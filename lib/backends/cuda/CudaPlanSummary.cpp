// summarize_cuda_plan: see CudaPlanSummary.h.
#include "lib/backends/cuda/CudaPlanSummary.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mstep::cuda {

namespace {

/// Whether a kernel's origin ("mstep.permute #4") is one of `ops`.
bool from_op(const CudaKernelInfo& kernel, std::initializer_list<absl::string_view> ops) {
  for (absl::string_view op : ops)
    if (absl::StartsWith(kernel.origin, absl::StrCat(op, " #"))) return true;
  return false;
}

} // namespace

CudaPlanSummary summarize_cuda_plan(const CudaPlan& plan) {
  CudaPlanSummary summary;
  summary.arena_bytes = plan.arena_bytes;
  summary.aliases = static_cast<int64_t>(plan.aliases.size());
  for (const CudaLaunchStep& step : plan.launches) {
    ++summary.steps;
    if (step.matmul >= 0) {
      ++summary.cublaslt;
      const MatmulShape& shape = plan.matmuls.at(step.matmul).shape;
      if (absl::EndsWith(plan.matmuls.at(step.matmul).origin, ": im2col gemm")) ++summary.conv_gemms;
      if (shape.transpose_a || shape.transpose_b) ++summary.transposed;
      if (shape.bias || shape.epilogue != MatmulEpilogue::none ||
          shape.bias_grad != MatmulBiasGrad::none)
        ++summary.epilogues;
      continue;
    }
    if (step.attention >= 0) {
      ++summary.cudnn;
      continue;
    }
    if (step.collective >= 0) continue;  // an NCCL call: a step, no launch
    ++summary.launches;
    const CudaKernelInfo& kernel = plan.kernels.at(step.kernel);
    if (from_op(kernel, {"mstep.reshape", "mstep.permute", "mstep.slice"})) ++summary.copies;
    if (absl::StrContains(kernel.origin, ": direct loops")) ++summary.conv_direct;
    if (from_op(kernel, {"mstep.softmax", "mstep.log_softmax", "mstep.layer_norm",
                         "mstep.rms_norm", "mstep.nll_loss"}))
      ++summary.row_launches;
    for (const char* fused : {"row group #", "elementwise batch #", "column-sum batch #",
                              "fusion with its slice_scatters #"})
      if (absl::StartsWith(kernel.origin, fused)) ++summary.fused_launches;
    if (from_op(kernel, {"mstep.sum", "mstep.mean"})) {
      ++summary.sum_launches;
      int64_t threads = 1;
      for (int d = 0; d < 3; ++d) threads *= int64_t{kernel.grid[d]} * kernel.block[d];
      summary.sum_threads += threads;
    }
  }
  return summary;
}

std::string describe_cuda_plan_summary(const CudaPlanSummary& s) {
  std::string conv;
  if (s.conv_gemms > 0 || s.conv_direct > 0)
    conv = absl::StrFormat("; conv: %d im2col gemms, %d direct launches", s.conv_gemms,
                           s.conv_direct);
  return absl::StrFormat(
      "%d steps: %d kernel launches (%d copies, %d row-wise, %d fused), %d cuBLASLt (%d "
      "transposed, %d with an epilogue), %d cuDNN; %d aliases; arena %.1f MiB; sum/mean: %d "
      "launches, %d threads%s",
      s.steps, s.launches, s.copies, s.row_launches, s.fused_launches, s.cublaslt, s.transposed, s.epilogues,
      s.cudnn, s.aliases, static_cast<double>(s.arena_bytes) / (1024.0 * 1024.0),
      s.sum_launches, s.sum_threads, conv);
}

} // namespace mstep::cuda
