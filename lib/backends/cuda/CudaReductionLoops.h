// Loop nests for the reductions mstep-lower-to-linalg does not lower:
// var, logsumexp and argmax, over any dims (keepdim or not; argmax over
// one dim or all of them, then the flat index). Each output is one row of
// the input's elements over the reduced dims (row-major among them, as
// ref's RowLayout), reduced through CudaBlockRows.h's row_loops: a block
// per row where the reduced dims are the trailing ones (contiguous rows)
// and the rows are long enough, else one lane per output walking its
// elements.
//
// The arithmetic is RefReduction.cpp's: var's two f64 passes (the mean,
// then the squared deviations) over max(0, n - correction); logsumexp's
// max (NaN skipped, as std::max), shifted by 0 when infinite, then
// log(sum(exp(x - m))) + m in f64; argmax's first maximum, a NaN winning
// (the first NaN). argmax is two exact statistics (the maximum with NaN
// propagating, then the smallest index holding it), so a block's tree
// gives ref's index; var's and logsumexp's f64 sums are ref's order with
// one lane per row and a tree with a block (then equal to ref's only
// after the rounding to the output dtype, not bit for bit in f64).
// Library-internal; MLIR.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
class Operation;
}

namespace mstep::cuda {

namespace loops {
class Nest;
}

/// Whether `op` is a reduction built here.
bool builds_reduction_loops(mlir::Operation* op);

/// `op`'s loop nest into `nest` (its func's parameters: the input, then
/// the result). `block_rows(n)`: whether rows of n contiguous elements
/// take a block each. An error (not_lowered_for_cuda) for rows of no
/// elements.
absl::Status reduction_op_loops(mlir::Operation* op, llvm::function_ref<bool(int64_t)> block_rows,
                                loops::Nest& nest);

} // namespace mstep::cuda
