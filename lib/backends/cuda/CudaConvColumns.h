// The kernels of the im2col form of mstep.conv2d and its gradients on cuda
// (CudaConvLowering.h), as loop nests: the column matrices a cuBLASLt
// matmul reads (im2col), the input gradient gathered back from the column
// gradients (col2im: one lane per input element adding its taps in order,
// no atomics, so the result is the same on every run), the swap of the
// batch and channel dims around a matmul of a group's [channels, N * OH *
// OW] matrix, and the bias add. Library-internal; MLIR.
#pragma once

#include "lib/backends/cuda/CudaConvGeometry.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mstep::cuda::conv {

/// Where column element (n, g, r, p) is, r = (group channel, kh, kw) the
/// row of group g's column matrix and p = (oh, ow) the output position:
/// by_batch [N][G][R][P] (a matrix per image and group), by_group
/// [G][R][N][P] (a matrix per group, the images side by side).
enum class ColumnLayout { by_batch, by_group };

/// The column matrices' element count (N * G * R * P).
inline int64_t column_elements(const Conv& conv) {
  return conv.batch * conv.groups * conv.column_rows() * conv.positions();
}

/// func(x, columns): columns[n, g, r, p] = x[n, g * Cg + c, ih, iw] at the
/// tap (ih, iw) of output position p and kernel tap r, 0 in the padding.
void build_im2col(const Conv& conv, ColumnLayout layout, func::FuncOp func);

/// func(columns, dx): dx[n, c, ih, iw] = sum over the kernel taps (kh, kw),
/// in that order, of columns[n, g, (c', kh, kw), p] where the output
/// position p's tap (kh, kw) is (ih, iw); summed in ref's accumulator
/// (the columns are dx's dtype, or f32 for f16: CudaConvLowering.cpp).
void build_col2im(const Conv& conv, ColumnLayout layout, func::FuncOp func);

/// func(x, [bias,] y): y[a, b, p] = x[b, a, p] (+ bias[b]) for y of dims
/// [outer, inner, positions]: [N][O][P] and [O][N][P] swapped; the bias
/// added in ref's accumulator (x is y's dtype, or f32 rounded to y's).
void build_swap_outer_dims(int64_t outer, int64_t inner, int64_t positions, bool bias,
                           func::FuncOp func);

/// func(bias, y): y[n, o, p] += bias[o] in place (y [N][O][P]); or
/// func(product, bias, y): y[n, o, p] = product[n, o, p] + bias[o], the
/// product f32 (f16's) or y's dtype, rounded once.
void build_add_bias(int64_t channels, int64_t positions, func::FuncOp func);

}  // namespace mstep::cuda::conv
