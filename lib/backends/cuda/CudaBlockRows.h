// Block-wide row reductions for the cuda loop nests (CudaOpLoops.cpp,
// MSTEP_CUDA_ROW_REDUCTION=block): one block of T threads per row instead
// of one thread per row, the threads of a block reducing through shared
// memory.
//
// The form, on buffers, before the GPU mapping (the "tiled loop nest" the
// host-numerics tests run on the CPU):
//
//   %red = memref.alloca() : memref<Txf64>       // one per statistic
//   scf.parallel (%row) = (0) to (rows) {mstep_block_threads = T} {
//     scf.parallel (%t) = (0) to (T) { phase 1 }
//     scf.parallel (%t) = (0) to (T) { phase 2 }
//     ...
//   }
//
// Each phase is every thread of the block doing its part; the phases run
// one after the other. Phases pass values only through the allocas (the
// IR allows no other way: a phase's values do not dominate the next), and
// within a phase no thread reads an alloca element another thread writes
// in that phase. Under that rule, running the phases' iterations in any
// order (the host runs them one by one) gives what the GPU gives running
// them together with a barrier between phases. map_block_rows then makes
// each such loop a gpu.launch: a block per row (block id x), a thread per
// %t (thread id x), the allocas as the launch's workgroup (shared) memory,
// the phases' bodies inlined in order with a gpu.barrier between them.
// Library-internal; MLIR.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lib/backends/cuda/CudaLoopNest.h"

namespace mstep::cuda::loops {

/// The attribute marking a block-rows loop (its value: T).
inline constexpr const char kBlockThreadsAttr[] = "mstep_block_threads";

/// The threads of a block for rows of `n` elements: the power of two at
/// or above n, between 32 (a warp) and 256.
int64_t block_threads_for(int64_t n);

/// One row's block while its loop is built: shared buffers, phases,
/// strided loops over the row, tree reductions.
class BlockRow {
public:
  BlockRow(Nest& nest, int64_t threads, Operation* loop)
      : nest_(nest), threads_(threads), loop_(loop) {}

  int64_t threads() const { return threads_; }

  /// A shared buffer of one `type` value per thread (an alloca before the
/// loop: on the host, the rows use it in turn).
  Value shared(Type type);

  /// Every thread t in [0, T) runs `body(t)`: one phase.
  void phase(function_ref<void(Value)> body);

  /// Within a phase: thread t's serial loop over j = t, t + T, ... < n,
  /// carrying `init`.
  SmallVector<Value> strided(Value t, int64_t n, ValueRange init,
                             function_ref<SmallVector<Value>(Value, ValueRange)> body);

  /// Phases reducing buffer[0 .. T) into buffer[0] by `combine` (a tree:
  /// thread t < s takes combine(buffer[t], buffer[t + s]) for s = T/2,
  /// ..., 1). `combine` must be associative and commutative for the
  /// values it sees (f64 sums: as exact as the serial order, not equal).
  /// With `width` w (a power of two dividing T): buffer as T/w rows of w,
  /// reduced over the rows into buffer[0 .. w) (s counts rows: thread
  /// t < s·w takes buffer[t + s·w]); a column sum's tile (CudaColumnSums.h).
  void reduce(Value buffer, function_ref<Value(Value, Value)> combine, int64_t width = 1);

  /// Within a phase: the reduced value, buffer[0].
  Value result(Value buffer);

private:
  Nest& nest_;
  int64_t threads_;
  Operation* loop_;
};

/// A block-rows loop for `rows` rows of T threads: `body(row, block)`
/// builds the row's shared buffers and phases (and any index arithmetic
/// of the row, outside the phases).
void block_rows(Nest& nest, int64_t rows, int64_t threads,
                function_ref<void(Value, BlockRow&)> body);

/// A statistic of a row: `combine` over the row's terms from `init` (of
/// `type`: f64 unless set, e.g. i64 for an integer sum), then `finish`
/// (if any) on the result. `term(j, stats)` is element j's term given the
/// finished statistics before this one.
struct RowStat {
  double init = 0;
  std::function<Value(Value, ArrayRef<Value>)> term;
  std::function<Value(Value, Value)> combine;
  std::function<Value(Value)> finish;
  Type type;
};

/// A row-wise op's row: its statistics, in order, then `output(j, stats)`
/// for each element j (writes element j's outputs), and/or
/// `row_output(stats)` once for the row.
struct RowSpec {
  std::vector<RowStat> stats;
  std::function<void(Value, ArrayRef<Value>)> output;
  std::function<void(ArrayRef<Value>)> row_output;
};

/// `rows` rows of `n` elements, `spec(row)` describing each (its index
/// arithmetic is built once per row): one thread per row running the
/// statistics' serial loops (`block` false), or a block-rows loop
/// (block_threads_for(n) threads; each statistic a strided partial per
/// thread and a tree reduction; row_output by thread 0).
void row_loops(Nest& nest, bool block, int64_t rows, int64_t n,
               function_ref<RowSpec(Value)> spec);

/// The GPU mapping of every block-rows loop at the top level of `func`
/// (see above); the other loops are left to gpu-map-parallel-loops.
void map_block_rows(func::FuncOp func);

} // namespace mstep::cuda::loops
