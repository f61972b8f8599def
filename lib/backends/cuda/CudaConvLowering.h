// The im2col form of mstep.conv2d and its two gradients on cuda (NCHW):
// generated kernels that lay the convolution out as matrices (CudaConvColumns.h)
// around one cuBLASLt strided batched matmul (CudaPlan.h), with R = the
// group's input channels x kernel taps and P = OH x OW:
//
//   conv2d      groups 1: columns [N][R][P] = im2col(x);
//                         y[n] = w [O, R] . columns[n]          (batch N)
//               groups G: columns [G][R][N*P];
//                         t[g] = w_g [O/G, R] . columns[g]      (batch G)
//                         y = t with its batch and channel dims swapped
//               then the bias (added by the swap, or by a kernel in place:
//               cuBLASLt's bias is per column, the conv's per row).
//   input grad  groups 1: dcol[n] = w^T . dy[n]                 (batch N)
//               groups G: dcol[g] = w_g^T . dy'[g], dy' = dy as [O][N*P]
//               dx = col2im(dcol): a lane per input element gathers its
//               taps in order (no atomics: the same result every run).
//   weight grad dw[g] = dy'[g] [O/G, N*P] . columns[g]^T        (batch G)
//
// A 1x1 kernel at stride 1 without padding reads x (or writes dx) as the
// columns where the layouts agree. The scratch values (columns, the
// swapped matrices) live only within their op's steps: one region at the
// arena's end holds every convolution's scratch in turn.
//
// Numerics: cuBLASLt sums in its own order (f32; bf16 and f16 accumulated
// in f32), not ref's, so results differ from ref's within the sums'
// rounding (the host test checks (n + 2) u sum |x w| + u |ref| per
// element). bf16's column gradients and pre-bias products are rounded to
// bf16 before col2im and the bias add; f16's stay f32 (an f32 matmul
// result), so an f16 output is rounded once from f32, as ref's: it is inf
// where its sum passes f16's range, and a partial sum past the range does
// not make inf or NaN of an output that is in range. The direct loops
// (CudaConvLoops.h) stay for MSTEP_CUDA_CONV=direct, dtypes cuBLASLt does
// not take (f64), empty tensors, and scratch over
// CudaCodegenOptions::conv_im2col_max_bytes.
// Library-internal; MLIR.
#pragma once

#include <string>
#include <vector>

#include "lib/backends/cuda/CudaComposedAttention.h"

namespace mstep::cuda {

/// Why `op` (an mstep.conv2d or a gradient, builds_conv_loops) keeps the
/// direct loops under `options` ("MSTEP_CUDA_CONV=direct", "f64: ..."), or
/// "" where it takes the im2col form.
std::string conv_direct_reason(mlir::Operation* op, const CudaCodegenOptions& options);

class CudaConvLowering {
public:
  CudaConvLowering(CudaCodegenOptions codegen, CudaKernelSink sink)
      : codegen_(std::move(codegen)), sink_(std::move(sink)) {}

  /// Appends the im2col form's steps of `op` (conv_direct_reason(op) is
  /// "") to `plan`: its operands are `ids`' values, its result plan value
  /// `result`; `name` ("op3") prefixes its kernels, `origin` names it.
  absl::Status lower(mlir::Operation* op, const std::string& origin, const std::string& name,
                     const llvm::DenseMap<mlir::Value, int>& ids, int result, CudaPlan& plan);

  /// After the arena is planned: the scratch values at its end, every
  /// op's from the same offset (their steps never overlap).
  void place_in_arena(CudaPlan& plan) const { place_scratch_at_arena_end(plan, scratch_); }

private:
  CudaCodegenOptions codegen_;
  CudaKernelSink sink_;
  std::vector<std::vector<int>> scratch_;  ///< each op's scratch values
};

}  // namespace mstep::cuda
