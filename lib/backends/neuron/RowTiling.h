// RowTiling: what the last-axis lowerings (reductions, softmax, norms,
// broadcast elementwise) share. A tensor is viewed as [rows, cols], cols
// being its last axis (or the normalized trailing axes); rows go on the 128
// partitions in tiles of up to 128 rows (the last one ragged), the free axis
// in chunks of at most kRowChunk columns that fit SBUF with their double
// buffers. RowKit bundles the builder with a DependencyTracker, so every
// emitted instruction gets the semaphores its data needs.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/Lowering.h"
#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron {

/// Widest free-axis chunk (as the elementwise lowering's).
inline constexpr int64_t kRowChunk = 4096;
/// SBUF bytes per partition the chunked (double-buffered) tiles may take;
/// the rest is for the small per-row tiles.
inline constexpr int64_t kRowChunkBudget = 160 * 1024;

struct RowTile {
  int64_t r0 = 0;    ///< first row
  int32_t parts = 0; ///< rows in this tile (partitions)
};
struct ColChunk {
  int64_t c0 = 0, w = 0;
};

std::vector<RowTile> row_tiles(int64_t rows);
/// Chunks of `cols` at most `width` wide.
std::vector<ColChunk> col_chunks(int64_t cols, int64_t width);
/// The chunk width for `cols` columns when each column costs
/// `bytes_per_column` bytes per partition over all chunked tiles; 0 when
/// not even one column fits.
int64_t chunk_width(int64_t cols, int64_t bytes_per_column);

/// HBM [rows, cols] row-major: rows of tile t on partitions, columns of c.
AccessPattern hbm_block(int32_t tensor, DType dt, int64_t cols, const RowTile& t,
                        const ColChunk& c);
/// HBM vector [cols]: chunk c on every one of `parts` partitions
/// (partition stride 0: a partition broadcast).
AccessPattern hbm_row_broadcast(int32_t tensor, DType dt, int32_t parts, const ColChunk& c);
/// HBM vector [rows]: one element per row of tile t, [parts, 1].
AccessPattern hbm_column(int32_t tensor, DType dt, const RowTile& t);

/// A program under construction: builder + dependency tracking.
class RowKit {
public:
  explicit RowKit(std::string name) : b(std::move(name)), deps(b) {}

  /// An SBUF tile of `width` elements of `dt` per partition, `slots` copies.
  struct Tile {
    std::array<int32_t, 2> slot{-1, -1};
    DType dtype = DType::f32;
  };
  Tile tile(DType dt, int64_t width, const std::string& name, int slots = 2);

  /// Slot s of t: [parts, w] from element `offset` of each partition.
  static AccessPattern at(const Tile& t, int s, int32_t parts, int64_t w, int64_t offset = 0);
  /// Element `col` of slot s of t read as [parts, w]: stride 0 along the
  /// free axis (a per-row scalar broadcast along the row).
  static AccessPattern spread(const Tile& t, int s, int32_t parts, int64_t w, int64_t col = 0);

  /// HBM -> SBUF (the pending stores stay pending unless one reads `dst`).
  int64_t load(const AccessPattern& dst, const AccessPattern& src);
  /// load() as one DMA per 32 partitions when it moves 64 KiB or more (on
  /// as many DMA engines: a large load's transfer is split, its fixed cost
  /// paid in parallel); `dst` starts at partition 0.
  void load_split(const AccessPattern& dst, const AccessPattern& src);
  /// dma_indirect (TileInstruction.h): HBM rows picked by `index` to SBUF,
  /// or SBUF rows to (with `accumulate`, added into) HBM rows; on DMA
  /// engine `dma_engine` when >= 0 (the same engine keeps HBM writes in
  /// order). Emitted now, as load().
  int64_t indirect(const AccessPattern& dst, const AccessPattern& src, const AccessPattern& index,
                   bool accumulate = false, int32_t dma_engine = -1);
  /// SBUF -> HBM, emitted before the next compute instruction emitted
  /// through RowKit (or before anything that overwrites its source), so
  /// after all of the next chunk's loads: the Sync queue is in order, so a
  /// store that waits for its chunk's compute would otherwise hold back the
  /// next chunk's loads (no overlap of load and compute).
  void store(const AccessPattern& dst, const AccessPattern& src);

  int64_t tt(const AccessPattern& dst, const AccessPattern& a, const AccessPattern& x, AluOp op) {
    flush_stores();
    return deps.track(b.tensor_tensor(Engine::vector, dst, a, x, op));
  }
  int64_t ts(const AccessPattern& dst, const AccessPattern& src, AluOp op, float s) {
    flush_stores();
    return deps.track(b.tensor_scalar(Engine::vector, dst, src, op, s));
  }
  int64_t reduce(const AccessPattern& dst, const AccessPattern& src, AluOp op) {
    flush_stores();
    return deps.track(b.tensor_reduce(Engine::vector, dst, src, op));
  }
  int64_t copy(const AccessPattern& dst, const AccessPattern& src) {
    flush_stores();
    return deps.track(b.tensor_copy(Engine::vector, dst, src));
  }
  int64_t bn_stats(const AccessPattern& dst, const AccessPattern& src) {
    flush_stores();
    return deps.track(b.bn_stats(dst, src));
  }
  int64_t bn_aggr(const AccessPattern& dst, const AccessPattern& src) {
    flush_stores();
    return deps.track(b.bn_aggr(dst, src));
  }
  /// Scalar: dst = f(src * scale + bias) with bias (and, when given,
  /// scale_column in place of scale) a [P,1] pattern, optionally summing
  /// each row of the result into `accum`.
  int64_t act(const AccessPattern& dst, const AccessPattern& src, ActivationFunction f,
              float scale = 1.0f, const AccessPattern* bias = nullptr, float bias_value = 0.0f,
              const AccessPattern* accum = nullptr, const AccessPattern* scale_column = nullptr);

  /// The finished program with its HBM binding (see LoweredOp).
  LoweredOp finish(std::vector<int32_t> binding);

  TileBuilder b;
  DependencyTracker deps;

  /// Emits the pending stores now if one reads what `dst` overwrites (call
  /// it before an instruction emitted through `b` that writes `dst`).
  void before_write(const AccessPattern& dst);

private:
  void flush_stores();

  std::vector<std::pair<AccessPattern, AccessPattern>> pending_stores_;
};

/// The input x of a multi-pass row lowering (softmax, the norms), chunk by
/// chunk into the two slots of its tile: the first pass over a row tile
/// loads every chunk into the next slot; a later pass reuses the chunk when
/// the row is one chunk (it stays in SBUF), else loads it again.
class RowInput {
public:
  RowInput(RowKit& k, const RowKit::Tile& x, int32_t hbm, int64_t cols,
           const std::vector<ColChunk>& chunks)
      : k_(k), x_(x), hbm_(hbm), cols_(cols), chunks_(chunks) {}

  /// Chunk c of row tile t, [t.parts, chunk width].
  AccessPattern chunk(const RowTile& t, int64_t c, bool first_pass);

private:
  RowKit& k_;
  RowKit::Tile x_;
  int32_t hbm_;
  int64_t cols_;
  const std::vector<ColChunk>& chunks_;
  int64_t loads_ = 0;
  int slot_ = 0; ///< the slot of the last load
};

} // namespace mstep::neuron
