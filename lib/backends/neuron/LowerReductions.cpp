// sum, mean, max and min along the last axis (or the trailing axes, as
// one row of their product; leading axes: LowerLeadingReduction.cpp): rows
// on partitions; each
// free-axis chunk is reduced on Vector into one column of a per-tile
// partials tile (fp32), the partials are reduced into the row's result
// (mean: divided by the row length), and [rows] is stored back. Rows of
// one chunk go g to a partition (row groups: fewer, larger instructions).
#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/CreationLowering.h"
#include "lib/backends/neuron/IntegerValues.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

namespace {
/// Row groups a grouped reduction keeps at least (loads to overlap).
constexpr int64_t kMinRowGroups = 4;
} // namespace

absl::StatusOr<LoweredOp> lower_reduction(const GraphNode& node,
                                          absl::Span<const TensorType> types) {
  AluOp alu = AluOp::add;
  if (node.op == OpKind::max) alu = AluOp::max;
  if (node.op == OpKind::min) alu = AluOp::min;
  if (types.size() != 1 || node.results.size() != 1)
    return refuse(node.op, "expects one operand and one result");
  const TensorType& in = types[0];
  // A sum of bools or integers (an int64 result): on int32 tiles, exact
  // in fp32 while every row's sum stays within 2^24 (IntegerValues.h).
  const bool integer = node.op == OpKind::sum && !tileable_dtype(in.dtype) &&
                       value_tile_dtype(in.dtype) && node.results[0].dtype == DType::i64;
  const DType dt = integer ? *value_tile_dtype(in.dtype) : in.dtype;
  if (!integer && (!tileable_dtype(dt) || node.results[0].dtype != dt))
    return refuse(node.op, absl::StrCat(in.to_string(), ": only f32/bf16 in and out"));
  // The reduced dims must be the trailing ones (sorted): a row is their
  // product, e.g. all dims -> one row.
  const int64_t rank = in.shape.rank();
  const IntList& dims = attr_ints(node.attrs, AttrName::dims);
  bool trailing = rank > 0 && !dims.empty();
  int64_t cols = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    trailing = trailing && dims[i] == rank - static_cast<int64_t>(dims.size() - i);
    if (trailing) cols *= in.shape[dims[i]];
  }
  // Or the leading ones: rows their product (LowerLeadingReduction.cpp).
  bool leading = rank > 0 && !dims.empty();
  int64_t lead_rows = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    leading = leading && dims[i] == static_cast<int64_t>(i);
    if (leading) lead_rows *= in.shape[dims[i]];
  }
  if (!trailing && !leading)
    return refuse(node.op,
                  absl::StrCat(in.to_string(), ": only a reduction over trailing or leading axes"));
  const int64_t n = in.numel();
  if (n == 0 || cols == 0) return refuse(node.op, absl::StrCat(in.to_string(), " has no elements"));
  if (!trailing && integer)
    return refuse(node.op, absl::StrCat(in.to_string(), ": integer sums over trailing axes only"));
  if (!trailing) return lower_leading_reduction(node, in, lead_rows);
  const int64_t rows = n / cols;
  if (integer && static_cast<double>(cols) > kExactInFp32)
    return refuse(node.op, absl::StrCat(in.to_string(), ": rows beyond 2^24 elements"));
  const bool pairs = in.dtype == DType::i64; // int64 in: int32 pairs, the low words read

  // Chunked: the input, two slots.
  const int64_t width = chunk_width(cols, 2 * static_cast<int64_t>(element_size(dt)));
  const std::vector<ColChunk> chunks = col_chunks(cols, width);
  const int64_t nck = static_cast<int64_t>(chunks.size());
  RowKit k(absl::StrCat("neuron_", op_name(node.op)));
  const DType out_dt = integer ? DType::i32 : dt; // an int64 result: int32 pairs
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, pairs ? 2 * n : n),
                y_hbm = k.b.hbm_tensor("out", out_dt, integer ? 2 * rows : rows);
  const RowKit::Tile x = k.tile(dt, width, "x"), part = k.tile(DType::f32, nck, "partials"),
                     total = k.tile(DType::f32, 1, "total"), y = k.tile(out_dt, 1, "y");
  RowKit::Tile hi;
  if (integer) hi = k.tile(DType::i32, 1, "hi");
  int64_t load = 0; // chunks loaded so far: the input's slot
  int ts = 0;       // the per-tile tiles' slot
  // Short rows (one chunk) in groups: g consecutive rows per partition, so
  // one load (split over DMA engines), one reduce per step and one store cover 128 g rows (a row
  // tile per 128 rows is latency-bound: a DMA's ~1.3 us fixed cost with two
  // in flight). The same operations per row as below: the same results.
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  int64_t g = 1;
  if (!integer && !pairs && nck == 1)
    while (rows / (kPartitions * 2 * g) >= kMinRowGroups &&
           2 * g * cols * 2 * esize <= kRowChunkBudget && 2 * g * cols <= kMaxSbufFreeElements)
      g *= 2;
  const int64_t grouped = g > 1 ? rows / (kPartitions * g) * kPartitions * g : 0;
  if (grouped > 0) {
    const RowKit::Tile xg = k.tile(dt, g * cols, "x_rows"), pg = k.tile(DType::f32, g, "partials_rows"),
                       tg = k.tile(DType::f32, g, "total_rows"), yg = k.tile(out_dt, g, "y_rows");
    auto rows_of = [&](const RowKit::Tile& t, int slot, int64_t inner) {
      AccessPattern ap = RowKit::at(t, slot, kPartitions, g * inner);
      ap.dims = {{g, inner}, {inner, 1}};
      return ap;
    };
    for (int64_t r0 = 0; r0 < grouped; r0 += kPartitions * g, ++load) {
      const int s = static_cast<int>(load % 2);
      k.load_split(RowKit::at(xg, s, kPartitions, g * cols),
                   hbm_rows(x_hbm, dt, g * cols, r0 / g, kPartitions, 0, g * cols));
      k.reduce(RowKit::at(pg, ts, kPartitions, g), rows_of(xg, s, cols), alu);
      const AccessPattern y = RowKit::at(yg, ts, kPartitions, g);
      if (node.op == OpKind::mean) {
        k.reduce(RowKit::at(tg, ts, kPartitions, g), rows_of(pg, ts, 1), alu);
        k.ts(y, RowKit::at(tg, ts, kPartitions, g), AluOp::divide, static_cast<float>(cols));
      } else {
        k.reduce(y, rows_of(pg, ts, 1), alu);
      }
      k.store(hbm_rows(y_hbm, dt, g, r0 / g, kPartitions, 0, g), y);
      ts ^= 1;
    }
  }
  for (RowTile t : row_tiles(rows - grouped)) {
    t.r0 += grouped;
    for (int64_t c = 0; c < nck; ++c, ++load) {
      const int s = static_cast<int>(load % 2);
      const AccessPattern from = hbm_block(x_hbm, dt, cols, t, chunks[c]);
      k.load(RowKit::at(x, s, t.parts, chunks[c].w), pairs ? i64_word(from, 0) : from);
      k.reduce(RowKit::at(part, ts, t.parts, 1, c), RowKit::at(x, s, t.parts, chunks[c].w), alu);
    }
    const AccessPattern partials = RowKit::at(part, ts, t.parts, nck);
    if (node.op == OpKind::mean) {
      k.reduce(RowKit::at(total, ts, t.parts, 1), partials, alu);
      k.ts(RowKit::at(y, ts, t.parts, 1), RowKit::at(total, ts, t.parts, 1), AluOp::divide,
           static_cast<float>(cols));
    } else {
      k.reduce(RowKit::at(y, ts, t.parts, 1), partials, alu);
    }
    if (integer)
      store_i64(k, hbm_column(y_hbm, out_dt, t), RowKit::at(y, ts, t.parts, 1),
                RowKit::at(hi, ts, t.parts, 1));
    else
      k.store(hbm_column(y_hbm, dt, t), RowKit::at(y, ts, t.parts, 1));
    ts ^= 1;
  }
  LoweredOp out = k.finish({0, -1});
  if (integer && in.dtype != DType::boolean) // every row sum within 2^24
    out.stage = [op = node.op, cols](absl::Span<const host::HostBuffer* const> inputs,
                                     absl::Span<host::HostBuffer* const>, HbmContents&) {
      return check_integer_range(op, inputs, {0}, kExactInFp32 / static_cast<double>(cols));
    };
  return out;
}

} // namespace mstep::neuron
