// arange and rand as GpSimd programs (CreationLowering.h).
#include <cmath>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/CreationLowering.h"
#include "lib/backends/neuron/IntegerValues.h"
#include "lib/backends/neuron/LoweringCommon.h"

namespace mstep::neuron {

namespace {

bool is_whole(double v) { return std::isfinite(v) && std::floor(v) == v; }

} // namespace

AccessPattern i64_word(AccessPattern ap, int word) {
  ap.dtype = DType::i32;
  ap.offset = ap.offset * 2 + word;
  ap.partition_stride *= 2;
  for (FreeDim& d : ap.dims) d.stride *= 2;
  return ap;
}

void store_i64(RowKit& k, const AccessPattern& elements, const AccessPattern& lo,
               const AccessPattern& hi) {
  k.store(i64_word(elements, 0), lo);
  // v >= 0 -> 0, v < 0 -> -1: (v >= 0) - 1.
  const int64_t sign = k.ts(hi, lo, AluOp::is_ge, 0.0f);
  k.b.at(sign).alu2 = AluOp::add;
  k.b.at(sign).scalar2 = -1.0f;
  k.store(i64_word(elements, 1), hi);
}

absl::StatusOr<LoweredOp> lower_arange(const GraphNode& node, absl::Span<const TensorType> types) {
  if (!types.empty() || node.results.size() != 1) return refuse(node.op, "expects no operands");
  const TensorType& out = node.results[0];
  const DType dt = out.dtype;
  const bool wide = dt == DType::i64;
  if (!tileable_dtype(dt) && dt != DType::i32 && !wide)
    return refuse(node.op, absl::StrCat(out.to_string(), ": only f32, bf16, i32 or i64"));
  const int64_t n = out.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(out.to_string(), " has no elements"));
  const double start = attr_double(node.attrs, AttrName::start);
  const double step = attr_double(node.attrs, AttrName::step);
  const double last = start + static_cast<double>(n - 1) * step;
  if (!is_whole(start) || !is_whole(step) || std::fabs(start) > kExactInFp32 ||
      std::fabs(last) > kExactInFp32)
    return refuse(node.op, absl::StrCat("start ", start, ", step ", step, " over ", n,
                                        " elements: iota is exact for whole values within 2^24"));
  const DType tile_dt = wide ? DType::i32 : dt;
  const int64_t esize = static_cast<int64_t>(element_size(tile_dt));
  const int64_t width = chunk_width(std::max<int64_t>(n / kPartitions, n % kPartitions),
                                    2 * esize * (wide ? 2 : 1));
  RowKit k("neuron_arange");
  // An int64 result is its int32 words.
  const int32_t hbm = k.b.hbm_tensor("out", tile_dt, wide ? 2 * n : n);
  const RowKit::Tile v = k.tile(tile_dt, width, "v");
  RowKit::Tile hi;
  if (wide) hi = k.tile(DType::i32, width, "hi");
  int s = 0;
  for (const FlatPiece& pc : flat_pieces(n, width)) {
    AffineExpr e; // start + (element index) * step
    e.offset = static_cast<int64_t>(start + static_cast<double>(pc.base + pc.c0) * step);
    e.channel_multiplier = pc.row * static_cast<int64_t>(step);
    e.steps = {static_cast<int64_t>(step)};
    const AccessPattern vt = RowKit::at(v, s, pc.parts, pc.w);
    k.before_write(vt);
    k.deps.track(k.b.iota(vt, e)); // GpSimd
    if (wide)
      store_i64(k, flat_hbm(hbm, DType::i32, pc), vt, RowKit::at(hi, s, pc.parts, pc.w));
    else
      k.store(flat_hbm(hbm, dt, pc), vt);
    s ^= 1;
  }
  return k.finish({-1});
}

absl::StatusOr<LoweredOp> lower_rand(const GraphNode& node, absl::Span<const TensorType> types) {
  const bool normal = node.op == OpKind::randn;
  if (types.size() != 1 || node.results.size() != 1)
    return refuse(node.op, "expects an RNG state and one result");
  const TensorType& out = node.results[0];
  if (out.dtype != DType::f32)
    return refuse(node.op, absl::StrCat(out.to_string(), ": only f32 (bf16 keeps 8 bits)"));
  if (types[0].dtype != DType::i64 || types[0].numel() != 2)
    return refuse(node.op, absl::StrCat("RNG state ", types[0].to_string(), " is not i64 [2]"));
  const int64_t n = out.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(out.to_string(), " has no elements"));
  const int64_t offset = attr_int(node.attrs, AttrName::offset);
  const int64_t width =
      chunk_width(std::max<int64_t>(n / kPartitions, n % kPartitions), 2 * 4 * (normal ? 2 : 1));
  RowKit k(normal ? "neuron_randn" : "neuron_rand");
  // The int64 [2] state's bytes as int32 [4]: seed lo, hi; offset lo, hi.
  const int32_t state_hbm = k.b.hbm_tensor("rng_state", DType::i32, 4);
  const int32_t out_hbm = k.b.hbm_tensor("out", DType::f32, n);
  const RowKit::Tile state = k.tile(DType::i32, 4, "rng_state", 1);
  const RowKit::Tile u = k.tile(DType::f32, width, "u");
  RowKit::Tile u2;
  if (normal) u2 = k.tile(DType::f32, width, "u2");
  k.load(RowKit::at(state, 0, kPartitions, 4),
         hbm_rows(state_hbm, DType::i32, /*row_length=*/0, 0, kPartitions, 0, 4));
  int s = 0;
  for (const FlatPiece& pc : flat_pieces(n, width)) {
    AffineExpr counter; // the element's index, plus the node's offset
    counter.offset = offset + pc.base + pc.c0;
    counter.channel_multiplier = pc.row;
    counter.steps = {1};
    const AccessPattern ut = RowKit::at(u, s, pc.parts, pc.w);
    k.before_write(ut);
    k.deps.track(k.b.philox_uniform(ut, RowKit::at(state, 0, pc.parts, 4), counter));
    if (normal) { // Philox::normal's float steps, one instruction each
      // u1 = ((w0 >> 8) + 1) / (2^24 + 1): u * 2^24 is w0 >> 8 exactly.
      const int64_t grid = k.ts(ut, ut, AluOp::multiply, 16777216.0f);
      k.b.at(grid).alu2 = AluOp::add;
      k.b.at(grid).scalar2 = 1.0f;
      k.ts(ut, ut, AluOp::multiply, 1.0f / 16777217.0f);
      k.act(ut, ut, ActivationFunction::log);
      k.ts(ut, ut, AluOp::multiply, -2.0f);
      k.act(ut, ut, ActivationFunction::sqrt);
      const AccessPattern vt = RowKit::at(u2, s, pc.parts, pc.w); // u2 = (w1 >> 8) * 2^-24
      k.before_write(vt);
      const int64_t w1 = k.b.philox_uniform(vt, RowKit::at(state, 0, pc.parts, 4), counter);
      k.b.at(w1).philox_word = 1;
      k.deps.track(w1);
      k.act(vt, vt, ActivationFunction::cos, 6.2831853071795864f);
      k.tt(ut, ut, vt, AluOp::multiply);
    }
    k.store(flat_hbm(out_hbm, DType::f32, pc), ut);
    s ^= 1;
  }
  return k.finish({0, -1});
}

} // namespace mstep::neuron
