// softmax and log_softmax along the last axis, rows on partitions:
//   pass 1: each chunk's row max (Vector) into a partials tile; m = their max;
//   pass 2: exp(x - m) on Scalar (bias -m) summing each row into partials
//           (activation accumulate); s = their sum;
//   pass 3: softmax:     exp(x - m) / s    (Vector, s broadcast along the row)
//           log_softmax: x + (-m - log s)  (Scalar, one per-row bias).
// When a row fits one chunk the chunk stays in SBUF across the passes (and
// softmax reuses pass 2's exp); otherwise each pass reloads it.
#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_softmax(const GraphNode& node, absl::Span<const TensorType> types) {
  const bool log = node.op == OpKind::log_softmax;
  if (types.size() != 1 || node.results.size() != 1)
    return refuse(node.op, "expects one operand and one result");
  const TensorType& in = types[0];
  const DType dt = in.dtype;
  if (!tileable_dtype(dt) || node.results[0] != in)
    return refuse(node.op, absl::StrCat(in.to_string(), ": only f32/bf16 in and out"));
  const int64_t rank = in.shape.rank();
  if (rank == 0 || attr_int(node.attrs, AttrName::dim) != rank - 1)
    return refuse(node.op, absl::StrCat(in.to_string(), ": only along the last axis"));
  const int64_t cols = in.shape[rank - 1], n = in.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(in.to_string(), " has no elements"));
  const int64_t rows = n / cols;

  // Chunked, two slots each: x (dt), e = exp(x - m) (f32), y (dt).
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  const int64_t width = chunk_width(cols, 2 * (esize + 4 + esize));
  const std::vector<ColChunk> chunks = col_chunks(cols, width);
  const int64_t nck = static_cast<int64_t>(chunks.size());
  const bool resident = nck == 1;
  RowKit k(absl::StrCat("neuron_", op_name(node.op)));
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n), y_hbm = k.b.hbm_tensor("out", dt, n);
  const RowKit::Tile x = k.tile(dt, width, "x"), e = k.tile(DType::f32, width, "e"),
                     y = k.tile(dt, width, "y"), pmax = k.tile(DType::f32, nck, "row_max"),
                     psum = k.tile(DType::f32, nck, "row_sum");
  // Per-row statistics, one column each: m, -m, s, log s, -m - log s.
  enum { kMax, kNegMax, kSum, kLogSum, kBias, kStats };
  const RowKit::Tile stats = k.tile(DType::f32, kStats, "stats");
  RowInput xin(k, x, x_hbm, cols, chunks);
  int64_t exps = 0, outs = 0; // chunks exp'd, stored: the slots
  int ts = 0;
  for (const RowTile& t : row_tiles(rows)) {
    const int32_t p = t.parts;
    auto stat = [&](int col) { return RowKit::at(stats, ts, p, 1, col); };
    for (int64_t c = 0; c < nck; ++c)
      k.reduce(RowKit::at(pmax, ts, p, 1, c), xin.chunk(t, c, true), AluOp::max);
    k.reduce(stat(kMax), RowKit::at(pmax, ts, p, nck), AluOp::max);
    k.ts(stat(kNegMax), stat(kMax), AluOp::multiply, -1.0f);
    const AccessPattern neg_max = stat(kNegMax);
    auto exp_x = [&](int64_t c, const AccessPattern& xc, const AccessPattern* accum) {
      const int es = static_cast<int>(exps++ % 2);
      const AccessPattern ec = RowKit::at(e, es, p, chunks[c].w);
      k.act(ec, xc, ActivationFunction::exp, 1.0f, &neg_max, 0.0f, accum);
      return ec;
    };
    AccessPattern e_resident;
    for (int64_t c = 0; c < nck; ++c) {
      const AccessPattern acc = RowKit::at(psum, ts, p, 1, c);
      e_resident = exp_x(c, xin.chunk(t, c, false), &acc);
    }
    k.reduce(stat(kSum), RowKit::at(psum, ts, p, nck), AluOp::add);
    if (log) {
      k.act(stat(kLogSum), stat(kSum), ActivationFunction::log);
      k.tt(stat(kBias), stat(kNegMax), stat(kLogSum), AluOp::subtract);
    }
    const AccessPattern bias = stat(kBias);
    for (int64_t c = 0; c < nck; ++c) {
      const int64_t w = chunks[c].w;
      const AccessPattern xc = xin.chunk(t, c, false);
      const AccessPattern yc = RowKit::at(y, static_cast<int>(outs++ % 2), p, w);
      if (log) {
        k.act(yc, xc, ActivationFunction::identity, 1.0f, &bias);
      } else {
        const AccessPattern ec = resident ? e_resident : exp_x(c, xc, nullptr);
        k.tt(yc, ec, RowKit::spread(stats, ts, p, w, kSum), AluOp::divide);
      }
      k.store(hbm_block(y_hbm, dt, cols, t, chunks[c]), yc);
    }
    ts ^= 1;
  }
  return k.finish({0, -1});
}

} // namespace mstep::neuron
