// layer_norm and rms_norm over the trailing `normalized_ndim` axes (as one
// row of cols elements), rows on partitions, fp32 statistics:
//   layer_norm: pass 1 bn_stats per 512 columns (Vector) into a record
//               tile, bn_aggr -> mean and variance, -mean (Vector),
//               rstd = rsqrt(var + eps) (Scalar);
//               pass 2 x * rstd + (-mean * rstd) (Scalar, per-row scale
//               and bias) [* weight] [+ bias] (Vector; rows broadcast to
//               every partition by a partition-stride-0 DMA), stored in
//               the dtype.
//   rms_norm:   pass 1 x^2 summed on Scalar -> rrms = rsqrt(sum / cols + eps);
//               pass 2 x * rrms (Scalar) [* weight] (Vector).
// bn_stats records are (count, mean, M2), so the variance needs no second
// pass over x (and no E[x^2] - mean^2 cancellation). When a row
// fits one chunk, x stays in SBUF across the passes and weight/bias are
// loaded once for all row tiles.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_norm(const GraphNode& node, absl::Span<const TensorType> types) {
  const bool layer = node.op == OpKind::layer_norm;
  const bool has_weight = attr_int(node.attrs, AttrName::has_weight) != 0;
  const bool has_bias = layer && attr_int(node.attrs, AttrName::has_bias) != 0;
  const size_t want = 1 + has_weight + has_bias;
  if (types.size() != want || node.results.size() != 1)
    return refuse(node.op, absl::StrCat("expects ", want, " operands and one result"));
  const TensorType& in = types[0];
  const DType dt = in.dtype;
  if (!tileable_dtype(dt) || node.results[0] != in)
    return refuse(node.op, absl::StrCat(in.to_string(), ": only f32/bf16 in and out"));
  const int64_t k_dims = attr_int(node.attrs, AttrName::normalized_ndim);
  int64_t cols = 1;
  for (int64_t d = in.shape.rank() - k_dims; d < in.shape.rank(); ++d) cols *= in.shape[d];
  const int64_t n = in.numel();
  if (n == 0 || cols == 0) return refuse(node.op, absl::StrCat(in.to_string(), " has no elements"));
  for (size_t i = 1; i < types.size(); ++i)
    if (types[i].dtype != dt || types[i].numel() != cols)
      return refuse(node.op, absl::StrCat("weight/bias ", types[i].to_string(), " is not ", cols,
                                          " elements of ", dtype_name(dt)));
  const int64_t rows = n / cols;
  const float eps = static_cast<float>(attr_double(node.attrs, AttrName::eps));

  // Chunked, two slots each: x (dt), t (f32 scratch), y (dt), weight, bias (dt).
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  const int64_t width =
      chunk_width(cols, 2 * (esize + 4 + esize + (has_weight + has_bias) * esize));
  const std::vector<ColChunk> chunks = col_chunks(cols, width);
  const int64_t nck = static_cast<int64_t>(chunks.size());
  const bool resident = nck == 1;
  RowKit k(absl::StrCat("neuron_", op_name(node.op)));
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n);
  const int32_t w_hbm = has_weight ? k.b.hbm_tensor("weight", dt, cols) : -1;
  const int32_t b_hbm = has_bias ? k.b.hbm_tensor("bias", dt, cols) : -1;
  const int32_t y_hbm = k.b.hbm_tensor("out", dt, n);
  const RowKit::Tile x = k.tile(dt, width, "x"), tmp = k.tile(DType::f32, width, "t"),
                     y = k.tile(dt, width, "y"), psq = k.tile(DType::f32, nck, "row_sumsq");
  // layer_norm: one bn_stats record per 512 columns of each chunk.
  int64_t records = 0;
  for (const ColChunk& c : chunks) records += (c.w + kBnStatsMaxFree - 1) / kBnStatsMaxFree;
  RowKit::Tile rec;
  if (layer) rec = k.tile(DType::f32, records * kBnStatsRecord, "bn_records");
  RowKit::Tile wt, bt;
  if (has_weight) wt = k.tile(dt, width, "weight");
  if (has_bias) bt = k.tile(dt, width, "bias");
  enum { kMean, kVar, kNegMean, kSumSq, kRstd, kShift, kStats };
  const RowKit::Tile stats = k.tile(DType::f32, kStats, "stats");
  // Weight and bias of chunk c on all 128 partitions (a row tile uses its
  // first rows): once when resident, else per chunk into its slot.
  int64_t row_loads = 0;
  auto load_rows = [&](int64_t c) {
    const int s = resident ? 0 : static_cast<int>(row_loads++ % 2);
    if (!resident || row_loads++ == 0) {
      if (has_weight)
        k.load(RowKit::at(wt, s, kPartitions, chunks[c].w),
               hbm_row_broadcast(w_hbm, dt, kPartitions, chunks[c]));
      if (has_bias)
        k.load(RowKit::at(bt, s, kPartitions, chunks[c].w),
               hbm_row_broadcast(b_hbm, dt, kPartitions, chunks[c]));
    }
    return s;
  };
  RowInput xin(k, x, x_hbm, cols, chunks);
  int64_t temps = 0, outs = 0;
  int ts = 0;
  for (const RowTile& t : row_tiles(rows)) {
    const int32_t p = t.parts;
    auto stat = [&](int col) { return RowKit::at(stats, ts, p, 1, col); };
    auto scratch = [&](int64_t c) {
      return RowKit::at(tmp, static_cast<int>(temps++ % 2), p, chunks[c].w);
    };
    const AccessPattern neg_mean = stat(kNegMean);
    if (layer) {
      int64_t r = 0;
      for (int64_t c = 0; c < nck; ++c) {
        const AccessPattern xc = xin.chunk(t, c, true);
        for (int64_t s0 = 0; s0 < chunks[c].w; s0 += kBnStatsMaxFree, ++r) {
          AccessPattern part = xc;
          part.offset += s0;
          part.dims = {{std::min(kBnStatsMaxFree, chunks[c].w - s0), 1}};
          k.bn_stats(RowKit::at(rec, ts, p, kBnStatsRecord, r * kBnStatsRecord), part);
        }
      }
      k.bn_aggr(RowKit::at(stats, ts, p, 2, kMean),
                RowKit::at(rec, ts, p, records * kBnStatsRecord));
      k.ts(neg_mean, stat(kMean), AluOp::multiply, -1.0f);
      k.act(stat(kRstd), stat(kVar), ActivationFunction::rsqrt, 1.0f, nullptr, eps);
    } else {
      for (int64_t c = 0; c < nck; ++c) {
        const AccessPattern acc = RowKit::at(psq, ts, p, 1, c);
        k.act(scratch(c), xin.chunk(t, c, true), ActivationFunction::square, 1.0f, nullptr, 0.0f,
              &acc);
      }
      k.reduce(stat(kSumSq), RowKit::at(psq, ts, p, nck), AluOp::add);
      k.act(stat(kRstd), stat(kSumSq), ActivationFunction::rsqrt, 1.0f / static_cast<float>(cols),
            nullptr, eps);
    }
    // (x - mean) * rstd = x * rstd + (-mean * rstd): one Scalar pass with a
    // per-row scale and bias.
    const AccessPattern rstd = stat(kRstd), shift = stat(kShift);
    if (layer) k.tt(shift, neg_mean, rstd, AluOp::multiply);
    for (int64_t c = 0; c < nck; ++c) {
      const int64_t w = chunks[c].w;
      const AccessPattern v = xin.chunk(t, c, false);
      const int rs = has_weight || has_bias ? load_rows(c) : 0;
      const AccessPattern yc = RowKit::at(y, static_cast<int>(outs++ % 2), p, w);
      // Each step writes fp32 scratch, the last one y in the dtype.
      int steps = 1 + has_weight + has_bias;
      auto next = [&]() { return --steps == 0 ? yc : scratch(c); };
      AccessPattern r = next();
      k.act(r, v, ActivationFunction::identity, 1.0f, layer ? &shift : nullptr, 0.0f, nullptr,
            &rstd);
      if (has_weight) {
        const AccessPattern r2 = next();
        k.tt(r2, r, RowKit::at(wt, rs, p, w), AluOp::multiply);
        r = r2;
      }
      if (has_bias) k.tt(next(), r, RowKit::at(bt, rs, p, w), AluOp::add);
      k.store(hbm_block(y_hbm, dt, cols, t, chunks[c]), yc);
    }
    ts ^= 1;
  }
  std::vector<int32_t> binding = {0};
  if (has_weight) binding.push_back(1);
  if (has_bias) binding.push_back(has_weight ? 2 : 1);
  binding.push_back(-1);
  return k.finish(binding);
}

} // namespace mstep::neuron
