// index_select and index_add along dim 0 as dma_indirect programs
// (IndexedLowering.h).
#include "lib/backends/neuron/IndexedLowering.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowTiling.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

namespace {

/// The [rows, inner] view of a table indexed along dim 0, or a refusal.
struct RowsView {
  int64_t rows = 0, inner = 0, tokens = 0;
};

absl::StatusOr<RowsView> rows_view(const GraphNode& node, const TensorType& table,
                                   const TensorType& index) {
  if (attr_int(node.attrs, AttrName::dim) != 0 || table.shape.rank() < 1)
    return refuse(node.op, absl::StrCat(table.to_string(), ": only dim 0 (embedding rows)"));
  if (!tileable_dtype(table.dtype))
    return refuse(node.op, absl::StrCat(table.to_string(), ": only f32/bf16 rows"));
  if (index.dtype != DType::i64 && index.dtype != DType::i32)
    return refuse(node.op, absl::StrCat("index ", index.to_string(), " is not i64 or i32"));
  RowsView v{table.shape[0], 0, index.numel()};
  if (v.rows == 0 || v.tokens == 0 || table.numel() == 0)
    return refuse(node.op, absl::StrCat(table.to_string(), " with index ", index.to_string(),
                                        " has no elements"));
  v.inner = table.numel() / v.rows;
  return v;
}

/// The stage of a program whose HBM tensor `ids` is operand `index`'s
/// values as int32: ref's range check against dim 0 of operand `table`
/// (the same error as on ref), then the narrowing.
auto narrow_ids(OpKind op, int32_t ids, int64_t table, int64_t index) {
  return [op, ids, table, index](absl::Span<const host::HostBuffer* const> in,
                                 absl::Span<host::HostBuffer* const>, HbmContents& hbm) {
    const host::HostBuffer& idx = *in[index];
    const host::HostBuffer& t = *in[table];
    MSTEP_RETURN_IF_ERROR(ref::check_indices(op_name(op), idx, t, 0, t.type().shape[0]));
    for (int64_t j = 0; j < idx.numel(); ++j) { // in [0, rows): fits int32
      const auto v = static_cast<int32_t>(ref::load_index(idx, j));
      std::memcpy(hbm[ids].data() + j * 4, &v, 4);
    }
    return absl::OkStatus();
  };
}

} // namespace

absl::StatusOr<LoweredOp> lower_index_select(const GraphNode& node,
                                             absl::Span<const TensorType> types) {
  if (types.size() != 2 || node.results.size() != 1)
    return refuse(node.op, "expects a table, an index and one result");
  MSTEP_ASSIGN_OR_RETURN(RowsView v, rows_view(node, types[0], types[1]));
  const DType dt = types[0].dtype;
  const int64_t width = chunk_width(v.inner, 2 * static_cast<int64_t>(element_size(dt)));
  const std::vector<ColChunk> chunks = col_chunks(v.inner, width);
  RowKit k("neuron_index_select");
  const int32_t table = k.b.hbm_tensor("table", dt, types[0].numel());
  const int32_t ids = k.b.hbm_tensor("ids", DType::i32, v.tokens);
  const int32_t out = k.b.hbm_tensor("out", dt, v.tokens * v.inner);
  const RowKit::Tile id = k.tile(DType::i32, 1, "ids"), rows = k.tile(dt, width, "rows");
  int ts = 0, s = 0; // the ids' slot (per token tile), the rows' slot (per chunk)
  for (const RowTile& t : row_tiles(v.tokens)) {
    k.load(RowKit::at(id, ts, t.parts, 1), hbm_column(ids, DType::i32, t));
    for (const ColChunk& c : chunks) {
      // Partition p reads table row ids[p], columns [c0, c0 + w).
      const AccessPattern dst = RowKit::at(rows, s, t.parts, c.w);
      k.indirect(dst, hbm_rows(table, dt, v.inner, 0, t.parts, c.c0, c.w),
                 RowKit::at(id, ts, t.parts, 1));
      k.store(hbm_block(out, dt, v.inner, t, c), dst);
      s ^= 1;
    }
    ts ^= 1;
  }
  LoweredOp low = k.finish({0, kStagedOnHost, -1});
  low.stage = narrow_ids(node.op, ids, 0, 1);
  return low;
}

absl::StatusOr<LoweredOp> lower_index_add(const GraphNode& node,
                                          absl::Span<const TensorType> types) {
  if (types.size() != 3 || node.results.size() != 1)
    return refuse(node.op, "expects an input, an index, a source and one result");
  MSTEP_ASSIGN_OR_RETURN(RowsView v, rows_view(node, types[0], types[1]));
  const DType dt = types[0].dtype;
  if (types[2].dtype != dt || types[2].numel() != v.tokens * v.inner)
    return refuse(node.op, absl::StrCat("source ", types[2].to_string(), " is not ", v.tokens,
                                        " rows of ", types[0].to_string()));
  const int64_t width = chunk_width(v.inner, 2 * static_cast<int64_t>(element_size(dt)));
  const std::vector<ColChunk> chunks = col_chunks(v.inner, width);
  RowKit k("neuron_index_add");
  const int32_t x = k.b.hbm_tensor("in", dt, types[0].numel());
  const int32_t ids = k.b.hbm_tensor("ids", DType::i32, v.tokens);
  const int32_t src = k.b.hbm_tensor("source", dt, types[2].numel());
  const int32_t out = k.b.hbm_tensor("out", dt, types[0].numel());
  // out = in, HBM to HBM; every add waits for all of it.
  const int32_t copied = k.b.semaphore();
  int32_t copies = 0;
  for (const RowTile& t : row_tiles(v.rows)) {
    const ColChunk all{0, v.inner};
    k.b.signal(k.b.dma_copy(hbm_block(out, dt, v.inner, t, all), hbm_block(x, dt, v.inner, t, all)),
               copied);
    ++copies;
  }
  const RowKit::Tile id = k.tile(DType::i32, 1, "ids"), rows = k.tile(dt, width, "rows");
  int ts = 0, s = 0;
  for (const RowTile& t : row_tiles(v.tokens)) {
    k.load(RowKit::at(id, ts, t.parts, 1), hbm_column(ids, DType::i32, t));
    for (const ColChunk& c : chunks) {
      const AccessPattern from = RowKit::at(rows, s, t.parts, c.w);
      k.load(from, hbm_block(src, dt, v.inner, t, c));
      // Partition p adds into out row ids[p]; all adds on DMA engine 0, in
      // program order (ref's token order).
      const int64_t add = k.indirect(hbm_rows(out, dt, v.inner, 0, t.parts, c.c0, c.w), from,
                                     RowKit::at(id, ts, t.parts, 1), /*accumulate=*/true, 0);
      k.b.wait(add, copied, copies);
      s ^= 1;
    }
    ts ^= 1;
  }
  LoweredOp low = k.finish({0, kStagedOnHost, 2, -1});
  low.stage = narrow_ids(node.op, ids, 0, 1);
  return low;
}

} // namespace mstep::neuron
