// RowTiling: row tiles, column chunks, the HBM patterns of a [rows, cols]
// view and RowKit's tracked emitters.
#include "lib/backends/neuron/RowTiling.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mstep::neuron {

std::vector<RowTile> row_tiles(int64_t rows) {
  std::vector<RowTile> out;
  for (int64_t r0 = 0; r0 < rows; r0 += kPartitions)
    out.push_back({r0, static_cast<int32_t>(std::min<int64_t>(kPartitions, rows - r0))});
  return out;
}

std::vector<ColChunk> col_chunks(int64_t cols, int64_t width) {
  std::vector<ColChunk> out;
  for (int64_t c0 = 0; c0 < cols; c0 += width) out.push_back({c0, std::min(width, cols - c0)});
  return out;
}

int64_t chunk_width(int64_t cols, int64_t bytes_per_column) {
  return std::min({cols, kRowChunk, kRowChunkBudget / std::max<int64_t>(bytes_per_column, 1)});
}

AccessPattern hbm_block(int32_t tensor, DType dt, int64_t cols, const RowTile& t,
                        const ColChunk& c) {
  return hbm_rows(tensor, dt, cols, t.r0, t.parts, c.c0, c.w);
}

AccessPattern hbm_row_broadcast(int32_t tensor, DType dt, int32_t parts, const ColChunk& c) {
  return hbm_rows(tensor, dt, /*row_length=*/0, 0, parts, c.c0, c.w);
}

AccessPattern hbm_column(int32_t tensor, DType dt, const RowTile& t) {
  return hbm_rows(tensor, dt, 1, t.r0, t.parts, 0, 1);
}

RowKit::Tile RowKit::tile(DType dt, int64_t width, const std::string& name, int slots) {
  Tile t;
  t.dtype = dt;
  for (int s = 0; s < slots; ++s)
    t.slot[s] = b.allocate(BufferKind::sbuf,
                           std::max<int64_t>(width, 1) * static_cast<int64_t>(element_size(dt)),
                           absl::StrCat(name, "_", s));
  if (slots == 1) t.slot[1] = t.slot[0];
  return t;
}

AccessPattern RowKit::at(const Tile& t, int s, int32_t parts, int64_t w, int64_t offset) {
  return tile_pattern(BufferKind::sbuf, t.slot[s], t.dtype, 0, parts, offset, {{w, 1}});
}

AccessPattern RowKit::spread(const Tile& t, int s, int32_t parts, int64_t w, int64_t col) {
  return tile_pattern(BufferKind::sbuf, t.slot[s], t.dtype, 0, parts, col, {{w, 0}});
}

int64_t RowKit::load(const AccessPattern& dst, const AccessPattern& src) {
  before_write(dst);
  return deps.track(b.dma_copy(dst, src));
}

void RowKit::load_split(const AccessPattern& dst, const AccessPattern& src) {
  constexpr int32_t kPiece = 32; // partitions per DMA (any start of 32 is aligned)
  // Below this a split saves less transfer time (3/4 of bytes / 282.5 B/ns
  // for four pieces) than the Sync engine spends triggering the extra DMAs
  // (3 x 64 cycles at 1.4 GHz).
  constexpr int64_t kMinSplitBytes = 64 * 1024;
  if (dst.elements() * static_cast<int64_t>(element_size(dst.dtype)) < kMinSplitBytes) {
    load(dst, src);
    return;
  }
  before_write(dst);
  for (int32_t q = 0; q < dst.partitions; q += kPiece) {
    AccessPattern to = dst, from = src;
    to.start_partition = q;
    to.partitions = from.partitions = std::min(kPiece, dst.partitions - q);
    from.offset += q * src.partition_stride;
    deps.track(b.dma_copy(to, from), /*partial_write=*/true);
  }
}

int64_t RowKit::indirect(const AccessPattern& dst, const AccessPattern& src,
                         const AccessPattern& index, bool accumulate, int32_t dma_engine) {
  if (dst.kind != BufferKind::hbm) before_write(dst);
  const int64_t i = b.dma_indirect(dst, src, index, accumulate);
  if (dma_engine >= 0) b.set_dma_engine(i, dma_engine);
  deps.track(i);
  flush_stores();
  return i;
}

void RowKit::store(const AccessPattern& dst, const AccessPattern& src) {
  pending_stores_.emplace_back(dst, src);
}

void RowKit::before_write(const AccessPattern& dst) {
  for (const auto& [to, from] : pending_stores_)
    if (from.buffer == dst.buffer) return flush_stores();
}

void RowKit::flush_stores() {
  for (const auto& [to, from] : pending_stores_) deps.track(b.dma_copy(to, from));
  pending_stores_.clear();
}

int64_t RowKit::act(const AccessPattern& dst, const AccessPattern& src, ActivationFunction f,
                    float scale, const AccessPattern* bias, float bias_value,
                    const AccessPattern* accum, const AccessPattern* scale_column) {
  flush_stores();
  const int64_t i = b.activation(dst, src, f, scale, bias_value);
  if (bias) b.at(i).bias = *bias;
  if (accum) b.at(i).accum = *accum;
  if (scale_column) b.at(i).scale_column = *scale_column;
  return deps.track(i);
}

AccessPattern RowInput::chunk(const RowTile& t, int64_t c, bool first_pass) {
  if (first_pass || chunks_.size() > 1) {
    slot_ = static_cast<int>(loads_++ % 2);
    k_.load_split(RowKit::at(x_, slot_, t.parts, chunks_[c].w),
                  hbm_block(hbm_, x_.dtype, cols_, t, chunks_[c]));
  }
  return RowKit::at(x_, slot_, t.parts, chunks_[c].w);
}

LoweredOp RowKit::finish(std::vector<int32_t> binding) {
  flush_stores();
  LoweredOp out;
  out.program = b.take();
  out.hbm_binding = std::move(binding);
  return out;
}

} // namespace mstep::neuron
