// Loop nests for the ops that mstep-lower-to-linalg does not lower, built
// directly on memrefs for the cuda compile half (CudaKernelGen.cpp):
// softmax, log_softmax, layer_norm, rms_norm, nll_loss, dropout (Philox),
// sum and mean over trailing dims (with block-wide row reductions) and
// over leading dims (column sums split into chunks, CudaColumnSums.h),
// arange, reshape, permute, slice, slice_scatter, cat (CudaCatLoops.h),
// index_select (embedding), index_add (its backward), gather and
// scatter_add (CudaIndexLoops.h), and the multi-tensor optimizer update
// (SGD, Adam, AdamW, Adadelta; clip_grad_norm_ included).
//
// Each op is one or more top-level scf.parallel loops (one GPU launch
// each; CudaKernelGen tiles them by the block size): a block per row for
// the row-wise ops with MSTEP_CUDA_ROW_REDUCTION=block (CudaBlockRows.h;
// rows shorter than a warp excepted), else one lane per row for
// the row-wise ops (softmax: each of the outer x inner lanes of the
// normalized dim), one lane per element for the elementwise and copy
// ops, one lane per column or per output element for index_add (per
// index position off the scattered dim for scatter_add), one lane in all for a reduction
// to a scalar (the clipping norms; nll_loss mean / sum too with
// MSTEP_CUDA_ROW_REDUCTION=thread, else a block). Within a lane,
// plain scf.for loops. The numerics follow lib/backends/ref op for op:
// statistics in f64 and one rounding per output; the optimizer's f32
// operations in ref's order, each rounded (no contraction); dropout's mask
// from the same Philox4x32-10 words as mstep/core/Philox.h; index_add's
// and scatter_add's duplicates added in index order. No atomics: every output element is
// written by one lane, so the results do not depend on scheduling.
// Where ref fails on a bad index or target (out of range), a kernel
// cannot: it reads nothing out of bounds and yields NaN (zero for
// integers; index_add and scatter_add skip the element), and reports it
// in the executable's error word (CudaErrorWord.h). A buffer an op needs between its
// launches is a memref.alloc, which CudaKernelGen turns into a temporary
// of the plan. Library-internal; MLIR.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mlir {
class Operation;
namespace func {
class FuncOp;
}
} // namespace mlir

namespace mstep::cuda {

struct CudaCodegenOptions;

/// The error for `op`, which the compile half cannot take to the GPU:
/// "cuda: op 'mstep.X' is not yet lowered for cuda: <why>".
absl::Status not_lowered_for_cuda(mlir::Operation* op, absl::string_view why);

/// Whether `op`'s kernels are built here rather than through
/// mstep-lower-to-linalg (under `options`: a float sum or mean over
/// trailing dims is built here as block-wide row reductions, and left to
/// mstep-lower-to-linalg with one thread per row; over leading dims, as a
/// split column sum, and left to it with one thread per column).
bool builds_op_loops(mlir::Operation* op, const CudaCodegenOptions& options);

/// Fills the empty entry block of `func` (parameters: memrefs of `op`'s
/// operands, then of its results) with `op`'s loop nest and a return. An
/// error (not_lowered_for_cuda) for a form of the op not handled yet.
/// `options` picks the row reductions' form (row_reduction).
absl::Status build_op_loops(mlir::Operation* op, mlir::func::FuncOp func,
                            const CudaCodegenOptions& options);

} // namespace mstep::cuda
