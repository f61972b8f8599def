// Before the cuda backend decides its views (CudaViews.h), the forms of an
// autocast linear's f32 bias that keep it from cuBLASLt epilogues. In the
// forward, the bias is cast to the product's dtype in the fusion that reads
// the product,
//   %y = mstep.fusion ins(%product, %bias_f32) {
//     %c = mstep.cast %bias_f32 -> bf16   %s = mstep.add %product, %c
//     [%a = relu / gelu-tanh of %s]       mstep.yield %s (or %a) }
// which is no bias epilogue (the fusion's bias operand is f32). The cast
// moves out of the fusion into an op of its own ([n] elements: a tiny
// kernel) before the matmul (the call reads the bias), so the fusion is
// the bias add (and activation) of a bias of the product's dtype, and the
// matmul's cuBLASLt call applies it as its BIAS / RELU_BIAS / GELU_BIAS
// epilogue (the call adds in f32 and rounds once; ref rounds twice). Nothing
// else changes: the cast rounds the bias to bf16 as the fusion did, and
// the add's fallback kernels (CudaMatmulInfo::fallback) are the fusion's.
// In the backward, the bias gradient (dY summed over the rows, bf16) is
// cast to f32 by a kernel right after the sum, before the weight
// gradient's matmul, so the call could not write the sum (a launch reads
// it first); that cast moves after the matmul, and the call writes the
// bias gradient through its BGRADB (or BGRADA) epilogue.
// Library-internal; MLIR.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mstep::cuda {

/// Moves each one-operand fusion (the cast of a bf16 bias gradient to the
/// f32 bias's dtype) that reads a sum over every dim but the last, through
/// reshapes, to just after the first later matmul that can write that sum
/// as its bias gradient (BGRADA / BGRADB, CudaViews step 4), when nothing
/// before that matmul reads the fusion. Returns how many moved.
int sink_bias_grad_casts(mlir::func::FuncOp step);

/// Moves the bias cast out of each fusion of `step` of the form above
/// whose product is a matmul's result that only the fusion reads (and
/// whose f32 bias exists before the matmul). Returns how many moved.
int hoist_bias_casts(mlir::func::FuncOp step);

}  // namespace mstep::cuda
