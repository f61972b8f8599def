// Column reductions with many threads per output for the cuda loop nests
// (MSTEP_CUDA_COLUMN_REDUCTION=split, the default): a float sum or mean
// over an input's leading dims (bias and layer_norm weight gradients:
// [B·S, E] summed over the rows), and the pieces clip_grad_norm_'s
// per-gradient norms share with it (CudaOptimizerLoops.cpp: a gradient is
// one column of numel rows).
//
// Two passes, no atomics (the same bits every run):
//  1. a block-rows loop (CudaBlockRows.h) of tiles x chunks blocks: block
//     (chunk, tile) has T threads, `tile` columns of contiguous elements
//     (a warp reads one row's tile: coalesced) by T / tile row lanes;
//     lane l folds rows first + l, first + l + lanes, ... < end of its
//     column in f64, then a tree over the lanes (shared memory) gives the
//     chunk's partial of each column, stored in an f64 temporary;
//  2. one thread per column folds its chunks' partials in chunk order and
//     rounds once (mean: / rows first), as ref rounds.
// With one chunk, pass 1 writes the output itself (one launch).
//
// ref (RefReduction.cpp) adds the rows in order in f64; this adds the
// same terms in f64 in another order (strided lanes, a tree, the chunks),
// so the f64 sums differ by at most 2(n-1)·2^-53·Σ|x| and the rounded
// results by that plus one unit in the last place of the output type.
// Library-internal; MLIR.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "lib/backends/cuda/CudaBlockRows.h"

namespace mstep::cuda {
struct CudaCodegenOptions;
}

namespace mstep::cuda::loops {

/// How `rows` x `columns` is cut into blocks of `threads` threads.
struct ColumnSplit {
  int64_t rows = 0, columns = 0;
  int64_t tile = 1;       ///< columns per block: a power of two, at most 32
  int64_t row_lanes = 1;  ///< threads per column of the tile: threads / tile
  int64_t tiles = 1;      ///< ceil(columns / tile)
  int64_t chunk_rows = 1; ///< rows per block: a multiple of row_lanes
  int64_t chunks = 1;     ///< ceil(rows / chunk_rows), at least 1
  int64_t blocks() const { return tiles * chunks; }
};

/// The split giving about `target_blocks` blocks (never fewer than 4 rows
/// per lane in a chunk, so a block does more than one load per thread).
ColumnSplit split_columns(int64_t rows, int64_t columns, int64_t threads, int64_t target_blocks);

/// An f64 fold: its start value and how two partials combine (associative
/// and commutative for the values it sees, as BlockRow::reduce needs).
struct Fold {
  double init = 0;
  std::function<Value(Value, Value)> combine;
};

/// The f64 fold from fold.init of term(r) for r = from, from + step, ...
/// < end (dynamic bounds; nothing when from >= end).
Value strided_fold(Nest& nest, Value from, Value end, int64_t step, const Fold& fold,
                   function_ref<Value(Value)> term);

/// Within a block-rows body of `tile` columns per block: the phases of
/// column tile `tile_index` (columns tile_index·tile + c for c < tile,
/// those below `columns`): thread t (c = t mod tile, lane = t / tile) runs
/// `partial(column, lane)` (its f64 partial; fold.init for a column past
/// the end), a tree over the lanes, then `write(column, value)` by lane 0.
void tile_partials(Nest& nest, BlockRow& block, int64_t tile, Value tile_index, int64_t columns,
                   const Fold& fold, function_ref<Value(Value, Value)> partial,
                   function_ref<void(Value, Value)> write);

/// The dims an mstep.sum / mstep.mean reduces (not empty), or none for
/// any other op (also CudaOpLoops.cpp's rows).
std::optional<ArrayRef<int64_t>> reduced_dims(Operation* op);

/// The {rows, columns} of a float mstep.sum / mstep.mean over its input's
/// leading dims (not all of them: that is a row, CudaOpLoops.cpp).
std::optional<std::pair<int64_t, int64_t>> leading_columns(Operation* op);

/// `op`'s split column sum (see above) on the func's parameters (input,
/// output).
void column_sum_loops(Operation* op, std::pair<int64_t, int64_t> shape,
                      const CudaCodegenOptions& options, Nest& nest);

/// One sum of several over the same {rows, columns}: its input, its
/// output, and whether it is a mean.
struct ColumnSum {
  Flat x, y;
  bool mean = false;
};

/// `sums`' split column sums in one launch per pass: each block does its
/// chunk and column tile of every sum in turn, the second pass a lane per
/// column of each sum. Each sum's bytes are those of its own kernels (the
/// same folds in the same order). A column-sum batch
/// (CudaColumnSumBatches.h): a layer_norm's weight and bias gradients.
void column_sums_loops(ArrayRef<ColumnSum> sums, std::pair<int64_t, int64_t> shape,
                       const CudaCodegenOptions& options, Nest& nest);

} // namespace mstep::cuda::loops
