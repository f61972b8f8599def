// nll_loss (cross_entropy's second half, after log_softmax) forward, with
// ignore_index and reduction none / mean / sum. log_probs [N, C] (or [C]
// with a 0-d target) is viewed as [N rows, C cols], rows on partitions;
// the i64 target's HBM bytes are read as int32 pairs and the DMA loads the
// low words (the host checks the range first, as ref does, so every kept
// target is in [0, C) and fits). Per row tile, on chip:
//   t = float(target); u = (t - ignore_index)^2        (Vector copy, Scalar)
//   keep = min(u, 1); cap = u * FLT_MAX * 2 (0 or inf)   (Vector)
//   per column chunk: j = iota(c0 + col)                 (GpSimd)
//     sq = (j - t)^2; U = (sq - 0.5) * -inf              (Scalar, Vector:
//        +inf at the target's column, -inf elsewhere)
//     picked partial = max over the chunk of min(x, U)   (Vector; so no
//        0 * inf and ±inf log-probs elsewhere in the row stay out)
//   loss = min(-picked, cap)   (0 for ignored rows, whose picked is -inf)
// none: the losses are stored. mean/sum: the (loss, keep) columns of every
// row tile are summed across partitions by a matmul against ones into one
// PSUM [1, 2] (fp32), copied to SBUF; mean = sum / count (0 / 0 = NaN when
// every target is ignored, as ref).
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"
#include "lib/backends/ref/RefKernels.h"

namespace mstep::neuron {

namespace {

/// Classes (and ignore_index) as f32 column indices: exact below 2^24.
constexpr int64_t kMaxExactIndex = int64_t{1} << 24;

} // namespace

absl::StatusOr<LoweredOp> lower_nll_loss(const GraphNode& node,
                                         absl::Span<const TensorType> types) {
  if (types.size() != 2 || node.results.size() != 1)
    return refuse(node.op, "expects log_probs, target and one result");
  const TensorType& lp = types[0];
  const DType dt = lp.dtype;
  if (!tileable_dtype(dt) || node.results[0].dtype != dt)
    return refuse(node.op, absl::StrCat(lp.to_string(), ": only f32/bf16 log_probs and loss"));
  if (types[1].dtype != DType::i64)
    return refuse(node.op, absl::StrCat("target ", types[1].to_string(), ": only i64"));
  const int64_t rank = lp.shape.rank();
  if (rank < 1 || rank > 2 || lp.numel() == 0)
    return refuse(node.op, absl::StrCat(lp.to_string(), ": only non-empty [N, C] or [C]"));
  const int64_t cols = lp.shape[rank - 1], rows = lp.numel() / cols;
  const int64_t ignore = attr_int(node.attrs, AttrName::ignore_index);
  const int64_t reduction = attr_int(node.attrs, AttrName::reduction); // 0 none, 1 mean, 2 sum
  if (cols > kMaxExactIndex || ignore <= -kMaxExactIndex || ignore >= kMaxExactIndex)
    return refuse(node.op, absl::StrCat(lp.to_string(), " with ignore_index ", ignore,
                                        ": class indices must stay below 2^24 (exact in f32)"));
  if (reduction < 0 || reduction > 2) return refuse(node.op, absl::StrCat("reduction ", reduction));

  // Chunked, two slots each: x (dt) and the f32 j, sq, U, min(x, U).
  const int64_t width = chunk_width(cols, 2 * (static_cast<int64_t>(element_size(dt)) + 16));
  const std::vector<ColChunk> chunks = col_chunks(cols, width);
  const int64_t nck = static_cast<int64_t>(chunks.size());
  RowKit k(absl::StrCat("neuron_nll_loss_", reduction == 0   ? "none"
                                            : reduction == 1 ? "mean"
                                                             : "sum"));
  const int32_t x_hbm = k.b.hbm_tensor("log_probs", dt, lp.numel());
  // The i64 target as int32 (low, high) pairs: the same bytes.
  const int32_t t_hbm = k.b.hbm_tensor("target_words", DType::i32, 2 * rows);
  const int32_t y_hbm = k.b.hbm_tensor("loss", dt, reduction == 0 ? rows : 1);
  const RowKit::Tile x = k.tile(dt, width, "x"), j = k.tile(DType::f32, width, "j"),
                     sq = k.tile(DType::f32, width, "sq"), u = k.tile(DType::f32, width, "hit"),
                     z = k.tile(DType::f32, width, "picked"),
                     part = k.tile(DType::f32, nck, "partials"), ti = k.tile(DType::i32, 1, "t");
  // Per-row columns; kLoss and kKeep adjacent (the matmul's moving [P, 2]).
  enum { kLoss, kKeep, kT, kNegT, kU, kCap, kPicked, kNeg, kStats };
  const RowKit::Tile stats = k.tile(DType::f32, kStats, "stats");
  const RowKit::Tile ones = k.tile(DType::f32, 1, "ones", 1);
  const RowKit::Tile total = k.tile(DType::f32, 2, "total", 1), y = k.tile(dt, 1, "y");
  int32_t acc = -1;
  if (reduction != 0) {
    acc = k.b.allocate(BufferKind::psum, 2 * 4, "loss_and_count");
    k.deps.track(k.b.iota(RowKit::at(ones, 0, kPartitions, 1), AffineExpr{1, 0, {0}}));
  }
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<RowTile> tiles = row_tiles(rows);
  int64_t slot = 0;
  int ts = 0;
  for (size_t ti_index = 0; ti_index < tiles.size(); ++ti_index) {
    const RowTile& t = tiles[ti_index];
    const int32_t p = t.parts;
    auto stat = [&](int col, int64_t w = 1) { return RowKit::at(stats, ts, p, w, col); };
    AccessPattern words = hbm_rows(t_hbm, DType::i32, 2, t.r0, p, 0, 1); // low words
    k.load(RowKit::at(ti, ts, p, 1), words);
    k.copy(stat(kT), RowKit::at(ti, ts, p, 1));
    k.ts(stat(kNegT), stat(kT), AluOp::multiply, -1.0f);
    const AccessPattern neg_t = stat(kNegT);
    k.act(stat(kU), stat(kT), ActivationFunction::square, 1.0f, nullptr,
          -static_cast<float>(ignore));
    k.ts(stat(kKeep), stat(kU), AluOp::min, 1.0f);
    const int64_t cap =
        k.ts(stat(kCap), stat(kU), AluOp::multiply, std::numeric_limits<float>::max());
    k.b.at(cap).alu2 = AluOp::multiply; // FLT_MAX * 2 = inf; 0 stays 0
    k.b.at(cap).scalar2 = 2.0f;
    for (int64_t c = 0; c < nck; ++c, ++slot) {
      const int s = static_cast<int>(slot % 2);
      const int64_t w = chunks[c].w;
      k.load(RowKit::at(x, s, p, w), hbm_block(x_hbm, dt, cols, t, chunks[c]));
      k.deps.track(k.b.iota(RowKit::at(j, s, p, w), AffineExpr{chunks[c].c0, 0, {1}}));
      k.act(RowKit::at(sq, s, p, w), RowKit::at(j, s, p, w), ActivationFunction::square, 1.0f,
            &neg_t);
      const int64_t hit =
          k.ts(RowKit::at(u, s, p, w), RowKit::at(sq, s, p, w), AluOp::subtract, 0.5f);
      k.b.at(hit).alu2 = AluOp::multiply;
      k.b.at(hit).scalar2 = -inf;
      k.tt(RowKit::at(z, s, p, w), RowKit::at(x, s, p, w), RowKit::at(u, s, p, w), AluOp::min);
      k.reduce(RowKit::at(part, ts, p, 1, c), RowKit::at(z, s, p, w), AluOp::max);
    }
    k.reduce(stat(kPicked), RowKit::at(part, ts, p, nck), AluOp::max);
    k.ts(stat(kNeg), stat(kPicked), AluOp::multiply, -1.0f);
    k.tt(stat(kLoss), stat(kNeg), stat(kCap), AluOp::min);
    if (reduction == 0) {
      k.copy(RowKit::at(y, ts, p, 1), stat(kLoss));
      k.store(hbm_column(y_hbm, dt, t), RowKit::at(y, ts, p, 1));
    } else {
      k.deps.track(k.b.matmul(tile_pattern(BufferKind::psum, acc, DType::f32, 0, 1, 0, {{2, 1}}),
                              RowKit::at(ones, 0, p, 1), stat(kLoss, 2),
                              /*accumulate=*/ti_index > 0));
    }
    ts ^= 1;
  }
  if (reduction != 0) {
    const AccessPattern sums = RowKit::at(total, 0, 1, 2);
    k.copy(sums, tile_pattern(BufferKind::psum, acc, DType::f32, 0, 1, 0, {{2, 1}}));
    const AccessPattern out = RowKit::at(y, 0, 1, 1);
    if (reduction == 1)
      k.tt(out, RowKit::at(total, 0, 1, 1, 0), RowKit::at(total, 0, 1, 1, 1), AluOp::divide);
    else
      k.copy(out, RowKit::at(total, 0, 1, 1, 0));
    k.store(hbm_rows(y_hbm, dt, 1, 0, 1, 0, 1), out);
  }
  LoweredOp low = k.finish({0, 1, -1});
  // The host's part: ref's target range check (ref's kernel reports it).
  low.stage = [node, cols, ignore](absl::Span<const host::HostBuffer* const> inputs,
                                   absl::Span<host::HostBuffer* const> outputs,
                                   HbmContents&) -> absl::Status {
    const host::HostBuffer& target = *inputs[1];
    const int64_t* tv = target.data<int64_t>();
    for (int64_t i = 0; i < target.type().numel(); ++i)
      if (tv[i] != ignore && (tv[i] < 0 || tv[i] >= cols))
        return ref::ref_kernel(OpKind::nll_loss)(ref::KernelArgs{node, inputs, outputs});
    return absl::OkStatus();
  };
  return low;
}

} // namespace mstep::neuron
