// sum and mean over the leading axes (the bias gradients: [N, D] -> [D],
// [B, T, D] over {0, 1} -> [D]): the input is viewed as [rows, cols], rows
// the product of the reduced axes. Rows sit on the partitions as loaded (a
// plain row-major DMA, no transposing access), and the reduction across
// partitions is a Tensor-engine matmul against a ones column:
// onesᵀ[K, 1] · x[K, w] = the K rows' column sums, [1, w] in PSUM, each
// 128-row tile accumulated into the same PSUM bank (fp32). Column blocks of
// up to 4 banks (2048 columns) are loaded at once, double-buffered; after
// the last row tile the Vector engine copies the bank to SBUF (mean:
// dividing by rows, converting to the result's dtype) and it is stored.
// A few rows (<= 32) are summed on the Vector engine instead, columns on
// the partitions (few_rows_sum). max and min have no such matmul: their input is loaded transposed (a
// block of up to 128 columns on the partitions, the rows along the free
// axis: partition stride 1, free stride cols, what the cost model charges
// at half bandwidth), each row chunk reduced on Vector into one column of
// a partials tile, the partials reduced into [w, 1] and stored (partition
// stride 1).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

namespace {

/// Columns per PSUM bank (fp32) and banks per column block.
constexpr int64_t kBankColumns = kMatmulMaxN;
constexpr int64_t kBlockBanks = 4;

} // namespace

namespace {

/// max/min over the leading `rows` of `in` viewed as [rows, cols].
LoweredOp leading_extremum(const GraphNode& node, const TensorType& in, int64_t rows) {
  const AluOp alu = node.op == OpKind::max ? AluOp::max : AluOp::min;
  const DType dt = in.dtype;
  const int64_t n = in.numel(), cols = n / rows;
  const int64_t width = chunk_width(rows, 2 * static_cast<int64_t>(element_size(dt)));
  const std::vector<ColChunk> chunks = col_chunks(rows, width);
  const int64_t nck = static_cast<int64_t>(chunks.size());
  RowKit k(absl::StrCat("neuron_", op_name(node.op), "_leading"));
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n), y_hbm = k.b.hbm_tensor("out", dt, cols);
  const RowKit::Tile x = k.tile(dt, width, "x"), part = k.tile(DType::f32, nck, "partials"),
                     y = k.tile(dt, 1, "y");
  int64_t load = 0;
  int ts = 0;
  // Column tiles of up to 128 columns: column c0 + p on partition p.
  for (const RowTile& t : row_tiles(cols)) {
    for (int64_t c = 0; c < nck; ++c, ++load) {
      const int s = static_cast<int>(load % 2);
      AccessPattern src = hbm_rows(x_hbm, dt, 1, t.r0, t.parts, 0, 1);
      src.offset = chunks[c].c0 * cols + t.r0;
      src.dims = {{chunks[c].w, cols}};
      k.load(RowKit::at(x, s, t.parts, chunks[c].w), src);
      k.reduce(RowKit::at(part, ts, t.parts, 1, c), RowKit::at(x, s, t.parts, chunks[c].w), alu);
    }
    k.reduce(RowKit::at(y, ts, t.parts, 1), RowKit::at(part, ts, t.parts, nck), alu);
    k.store(hbm_column(y_hbm, dt, t), RowKit::at(y, ts, t.parts, 1));
    ts ^= 1;
  }
  return k.finish({0, -1});
}

/// Most leading rows summed on the Vector engine (few_rows_sum) instead of
/// a ones matmul, whose K (the rows in a tile) would use a few of 128 rows
/// and whose [1, w] result leaves PSUM on one partition.
constexpr int64_t kFewRows = 32;

/// sum/mean over `rows` (<= kFewRows) leading rows of [rows, cols], cols a
/// multiple of 128: partition p holds columns [p f, p f + f) of every row
/// (f = cols / 128, in chunks), so the rows are summed elementwise on all
/// 128 lanes in row order (fp32), then divided (mean) and stored.
LoweredOp few_rows_sum(const GraphNode& node, const TensorType& in, int64_t rows) {
  const DType dt = in.dtype;
  const int64_t n = in.numel(), cols = n / rows, f = cols / kPartitions;
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  // x (rows x w) and y (w) in dt, acc (w) in f32, two slots each.
  const int64_t width = chunk_width(f, 2 * (rows + 1) * esize + 2 * 4);
  RowKit k(absl::StrCat("neuron_", op_name(node.op), "_leading_rows"));
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n), y_hbm = k.b.hbm_tensor("out", dt, cols);
  const RowKit::Tile x = k.tile(dt, rows * width, "x"), acc = k.tile(DType::f32, width, "acc"),
                     y = k.tile(dt, width, "y");
  int s = 0;
  for (const ColChunk& c : col_chunks(f, width)) {
    // Row r of the chunk at free offset r w.
    AccessPattern dst = RowKit::at(x, s, kPartitions, rows * c.w);
    dst.dims = {{rows, c.w}, {c.w, 1}};
    AccessPattern src = hbm_rows(x_hbm, dt, f, 0, kPartitions, c.c0, c.w);
    src.dims = {{rows, cols}, {c.w, 1}};
    k.load_split(dst, src);
    auto row = [&](int64_t r) { return RowKit::at(x, s, kPartitions, c.w, r * c.w); };
    const AccessPattern a = RowKit::at(acc, s, kPartitions, c.w);
    if (rows == 1)
      k.copy(a, row(0));
    else
      k.tt(a, row(0), row(1), AluOp::add);
    for (int64_t r = 2; r < rows; ++r) k.tt(a, a, row(r), AluOp::add);
    const AccessPattern yc = RowKit::at(y, s, kPartitions, c.w);
    if (node.op == OpKind::mean)
      k.ts(yc, a, AluOp::divide, static_cast<float>(rows));
    else
      k.copy(yc, a);
    k.store(hbm_rows(y_hbm, dt, f, 0, kPartitions, c.c0, c.w), yc);
    s ^= 1;
  }
  return k.finish({0, -1});
}

} // namespace

absl::StatusOr<LoweredOp> lower_leading_reduction(const GraphNode& node, const TensorType& in,
                                                  int64_t rows) {
  if (node.op == OpKind::max || node.op == OpKind::min) return leading_extremum(node, in, rows);
  if (node.op != OpKind::sum && node.op != OpKind::mean)
    return refuse(node.op, absl::StrCat(in.to_string(), ": over leading axes only sum, mean, "
                                                        "max and min"));
  const DType dt = in.dtype;
  const int64_t n = in.numel(), cols = n / rows;
  if (rows <= kFewRows && cols % kPartitions == 0) return few_rows_sum(node, in, rows);
  const int64_t block = std::min({cols, kBankColumns * kBlockBanks,
                                  chunk_width(cols, 2 * static_cast<int64_t>(element_size(dt)) +
                                                        static_cast<int64_t>(element_size(dt)))});
  RowKit k(absl::StrCat("neuron_", op_name(node.op), "_leading"));
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n), y_hbm = k.b.hbm_tensor("out", dt, cols);
  const RowKit::Tile x = k.tile(dt, block, "x"), y = k.tile(dt, block, "y", 1),
                     ones = k.tile(dt, 1, "ones", 1);
  const int32_t acc = k.b.allocate(BufferKind::psum, kBankColumns * kBlockBanks * 4, "column_sums");
  // The stationary ones column: GpSimd iota of the constant 1.
  k.deps.track(k.b.iota(RowKit::at(ones, 0, kPartitions, 1), AffineExpr{1, 0, {0}}));
  // Narrow rows (one column block) in groups: g consecutive rows per
  // partition, one load (split over DMA engines) per 128 g rows, g matmuls
  // into the same PSUM sums (a 128-row tile per load is latency-bound).
  int64_t g = 1;
  if (cols <= block)
    while (rows / (kPartitions * 2 * g) >= 4 && 2 * g * cols <= kBankColumns * kBlockBanks) g *= 2;
  const int64_t grouped = g > 1 ? rows / (kPartitions * g) * kPartitions * g : 0;
  RowKit::Tile xg;
  if (grouped > 0) xg = k.tile(dt, g * cols, "x_rows");
  std::vector<RowTile> tiles = row_tiles(rows - grouped);
  for (RowTile& t : tiles) t.r0 += grouped;
  int64_t load = 0;
  for (const ColChunk& c : col_chunks(cols, block)) {
    bool first = true; // the first matmul into the sums overwrites them
    auto add_rows = [&](const RowKit::Tile& from, int s, int32_t p, int64_t offset) {
      for (const ColChunk& bank : col_chunks(c.w, kBankColumns)) {
        const AccessPattern sums =
            tile_pattern(BufferKind::psum, acc, DType::f32, 0, 1, bank.c0, {{bank.w, 1}});
        k.deps.track(k.b.matmul(sums, RowKit::at(ones, 0, p, 1),
                                RowKit::at(from, s, p, bank.w, offset + bank.c0),
                                /*accumulate=*/!first));
      }
      first = false;
    };
    for (int64_t r0 = 0; r0 < grouped; r0 += kPartitions * g, ++load) {
      const int s = static_cast<int>(load % 2);
      k.load_split(RowKit::at(xg, s, kPartitions, g * cols),
                   hbm_rows(x_hbm, dt, g * cols, r0 / g, kPartitions, 0, g * cols));
      for (int64_t j = 0; j < g; ++j) add_rows(xg, s, kPartitions, j * cols);
    }
    for (size_t t = 0; t < tiles.size(); ++t, ++load) {
      const int s = static_cast<int>(load % 2);
      const int32_t p = tiles[t].parts;
      k.load(RowKit::at(x, s, p, c.w), hbm_block(x_hbm, dt, cols, tiles[t], c));
      add_rows(x, s, p, 0);
    }
    const AccessPattern sums = tile_pattern(BufferKind::psum, acc, DType::f32, 0, 1, 0, {{c.w, 1}});
    const AccessPattern yc = RowKit::at(y, 0, 1, c.w);
    if (node.op == OpKind::mean)
      k.ts(yc, sums, AluOp::divide, static_cast<float>(rows));
    else
      k.copy(yc, sums);
    k.store(hbm_rows(y_hbm, dt, cols, 0, 1, c.c0, c.w), yc);
  }
  return k.finish({0, -1});
}

} // namespace mstep::neuron
