// dropout as a GpSimd Philox + Vector program (DropoutLowering.h).
#include "lib/backends/neuron/DropoutLowering.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

float dropout_keep_threshold(double p) {
  float threshold = static_cast<float>(p);
  if (static_cast<double>(threshold) < p) threshold = std::nextafter(threshold, 2.0f);
  return threshold;
}

absl::StatusOr<LoweredOp> lower_dropout(const GraphNode& node, absl::Span<const TensorType> types) {
  if (types.size() != 2 || node.results.size() != 1)
    return refuse(node.op, "expects an input, an RNG state and one result");
  const TensorType& x = types[0];
  const DType dt = x.dtype;
  if (!tileable_dtype(dt) || node.results[0] != x)
    return refuse(node.op, absl::StrCat(x.to_string(), ": only f32/bf16"));
  if (types[1].dtype != DType::i64 || types[1].numel() != 2)
    return refuse(node.op, absl::StrCat("RNG state ", types[1].to_string(), " is not i64 [2]"));
  const double p = attr_double(node.attrs, AttrName::p);
  const int64_t offset = attr_int(node.attrs, AttrName::offset);
  const int64_t n = x.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(x.to_string(), " has no elements"));
  if (!(p >= 0 && p < 1)) return refuse(node.op, absl::StrCat("p = ", p, " is not in [0, 1)"));
  const float threshold = dropout_keep_threshold(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));

  // Per column: x and y in dt, u and keep in fp32, two slots each.
  const int64_t esize = static_cast<int64_t>(element_size(dt));
  const int64_t width =
      chunk_width(std::max<int64_t>(n / kPartitions, n % kPartitions), 2 * (2 * esize + 8));
  RowKit k("neuron_dropout");
  const int32_t x_hbm = k.b.hbm_tensor("in", dt, n);
  // The int64 [2] state's bytes as int32 [4]: seed lo, hi; offset lo, hi.
  const int32_t state_hbm = k.b.hbm_tensor("rng_state", DType::i32, 4);
  const int32_t y_hbm = k.b.hbm_tensor("out", dt, n);
  const RowKit::Tile state = k.tile(DType::i32, 4, "rng_state", 1);
  const RowKit::Tile xt = k.tile(dt, width, "x"), u = k.tile(DType::f32, width, "u"),
                     keep = k.tile(DType::f32, width, "keep"), y = k.tile(dt, width, "y");
  k.load(RowKit::at(state, 0, kPartitions, 4),
         hbm_rows(state_hbm, DType::i32, /*row_length=*/0, 0, kPartitions, 0, 4));
  int s = 0;
  for (const FlatPiece& pc : flat_pieces(n, width)) {
    k.load(RowKit::at(xt, s, pc.parts, pc.w), flat_hbm(x_hbm, dt, pc));
    AffineExpr counter; // the element's index in the tensor, plus the node's offset
    counter.offset = offset + pc.base + pc.c0;
    counter.channel_multiplier = pc.row;
    counter.steps = {1};
    const AccessPattern ut = RowKit::at(u, s, pc.parts, pc.w);
    k.deps.track(k.b.philox_uniform(ut, RowKit::at(state, 0, pc.parts, 4), counter));
    const AccessPattern kt = RowKit::at(keep, s, pc.parts, pc.w);
    const int64_t ks = k.ts(kt, ut, AluOp::is_ge, threshold);
    k.b.at(ks).alu2 = AluOp::multiply;
    k.b.at(ks).scalar2 = scale;
    const AccessPattern yt = RowKit::at(y, s, pc.parts, pc.w);
    k.tt(yt, RowKit::at(xt, s, pc.parts, pc.w), kt, AluOp::multiply);
    k.store(flat_hbm(y_hbm, dt, pc), yt);
    s ^= 1;
  }
  return k.finish({0, 1, -1});
}

} // namespace mstep::neuron
