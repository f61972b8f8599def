// A cuda plan's counts, for comparing plans (mstep-compile prints them):
// the steps it runs per replay by kind, and how many of its kernel launches
// only move data (reshape, permute, slice: a copy a view could avoid).
// Library-internal.
#pragma once

#include <cstdint>
#include <string>

#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

struct CudaPlanSummary {
  int64_t steps = 0;     ///< every step of the plan
  int64_t launches = 0;  ///< kernel launches
  int64_t cublaslt = 0;  ///< cuBLASLt matmuls
  /// cuBLASLt matmuls that read an operand through its transpose flag (or
  /// write the transposed product): a permute kernel folded into the call.
  int64_t transposed = 0;
  /// cuBLASLt matmuls with an epilogue (bias, ReLU, GELU, a bias gradient).
  int64_t epilogues = 0;
  /// Values that are views of others' bytes (CudaPlan::aliases): no launch.
  int64_t aliases = 0;
  int64_t cudnn = 0;     ///< cuDNN SDPA executions
  int64_t copies = 0;    ///< launches of mstep.reshape / permute / slice kernels
  /// Launches of the row-wise ops' kernels (softmax, log_softmax,
  /// layer_norm, rms_norm, nll_loss), whichever MSTEP_CUDA_ROW_REDUCTION.
  int64_t row_launches = 0;
  /// Launches of kernels that do several ops' work (MSTEP_CUDA_ROW_REDUCTION=
  /// fused): row groups, elementwise and column-sum batches, fusions with
  /// their slice_scatters.
  int64_t fused_launches = 0;
  /// Launches of mstep.sum / mstep.mean kernels (rows and columns, both
  /// passes of a split column sum: MSTEP_CUDA_COLUMN_REDUCTION) and their
  /// threads (grid x block).
  int64_t sum_launches = 0;
  int64_t sum_threads = 0;
  int64_t arena_bytes = 0;
  /// Convolutions (conv2d and its gradients) by form: the cuBLASLt
  /// matmuls of the im2col form, and the launches of the direct loops
  /// (MSTEP_CUDA_CONV, CudaConvLowering.h).
  int64_t conv_gemms = 0;
  int64_t conv_direct = 0;
};

CudaPlanSummary summarize_cuda_plan(const CudaPlan& plan);

/// "412 steps: 300 kernel launches (40 copies, 30 row-wise, 20 fused), 100 cuBLASLt (20 transposed, 10
/// with an epilogue), 12 cuDNN; 60 aliases; arena 12.5 MiB; sum/mean: 40 launches, 1048576
/// threads" (and "; conv: 3 im2col gemms, 1 direct launches" where the plan has convolutions)
std::string describe_cuda_plan_summary(const CudaPlanSummary& summary);

} // namespace mstep::cuda
