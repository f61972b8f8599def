// Constant fills: `full` of a 0-d value, and fusions whose every output is
// a constant broadcast (zeros, ones, full(c): the gradient accumulators'
// zeros). One SBUF tile of up to [128, 4096] per output is filled once —
// an immediate c as GpSimd iota 0 then a Vector tensor_scalar (0 + c, so
// any f32/bf16 value, not only iota's integers), a runtime 0-d value DMA'd
// onto every partition (partition stride 0) and spread along the free
// axis by a Vector copy — and DMA'd to every block of the result, viewed
// as [rows, cols] (RowTiling.h; a 1-d result of 128k elements as [128, k]).
#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"

namespace mstep::neuron {

namespace {

/// The constant each output of a fusion body fills its result with
/// (constants seen through full and expand), or nullopt when some output
/// is not a constant fill.
std::optional<std::vector<float>> body_fill_values(const TraceGraph& body) {
  std::vector<std::optional<float>> value(body.nodes.size());
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    const GraphNode& n = body.nodes[i];
    value[i] = scalar_constant(n);
    if ((n.op == OpKind::full || n.op == OpKind::expand) && n.operands.size() == 1 &&
        n.results[0].dtype == body.type_of(n.operands[0]).dtype)
      value[i] = value[n.operands[0].node];
  }
  std::vector<float> out;
  for (ValueRef v : body.outputs) {
    if (!value[v.node]) return std::nullopt;
    out.push_back(*value[v.node]);
  }
  return out;
}

} // namespace

bool is_fill(const GraphNode& node) {
  if (node.op == OpKind::full) return true;
  return node.op == OpKind::fusion && node.body && body_fill_values(*node.body).has_value();
}

absl::StatusOr<LoweredOp> lower_fill(const GraphNode& node, absl::Span<const TensorType> types) {
  // Per output: an immediate, or (full) operand 0 read at run time.
  std::vector<std::optional<float>> fills;
  if (node.op == OpKind::full) {
    if (types.size() != 1 || types[0].numel() != 1 || types[0].dtype != node.results[0].dtype)
      return refuse(node.op, "expects one 1-element operand of the result's dtype");
    fills.push_back(std::nullopt);
  } else {
    if (!node.body) return refuse(node.op, "a fusion without a body");
    const std::optional<std::vector<float>> values = body_fill_values(*node.body);
    if (!values) return refuse(node.op, "an output is not a constant fill");
    fills.assign(values->begin(), values->end());
  }
  if (node.results.empty() || node.results.size() != fills.size())
    return refuse(node.op, "one result per filled value");
  const Shape& shape = node.results[0].shape;
  for (const TensorType& t : node.results)
    if (t.shape != shape || !tileable_dtype(t.dtype))
      return refuse(node.op,
                    absl::StrCat("result ", t.to_string(), ": only f32/bf16 results of one shape"));
  const int64_t n = shape.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(shape.to_string(), " has no elements"));
  int64_t cols = shape.rank() == 0 ? 1 : shape[shape.rank() - 1];
  if (shape.rank() <= 1 && n % kPartitions == 0) cols = n / kPartitions;
  const int64_t rows = n / cols;
  int64_t bytes_per_col = 0;
  for (const TensorType& t : node.results)
    bytes_per_col += static_cast<int64_t>(element_size(t.dtype));
  const int64_t width = chunk_width(cols, bytes_per_col);
  const int32_t parts = static_cast<int32_t>(std::min<int64_t>(rows, kPartitions));

  RowKit k(absl::StrCat("neuron_", op_name(node.op), "_fill"));
  std::vector<int32_t> binding;
  int32_t scalar_hbm = -1;
  if (node.op == OpKind::full) {
    scalar_hbm = k.b.hbm_tensor("value", types[0].dtype, 1);
    binding.push_back(0);
  }
  std::vector<int32_t> out_hbm;
  for (size_t o = 0; o < node.results.size(); ++o) {
    out_hbm.push_back(k.b.hbm_tensor(absl::StrCat("out", o), node.results[o].dtype, n));
    binding.push_back(-1 - static_cast<int32_t>(o));
  }
  std::vector<RowKit::Tile> tiles;
  for (size_t o = 0; o < node.results.size(); ++o) {
    const DType dt = node.results[o].dtype;
    const RowKit::Tile t = k.tile(dt, width, absl::StrCat("fill", o), 1);
    const AccessPattern dst = RowKit::at(t, 0, parts, width);
    if (!fills[o]) { // the runtime value, onto every partition, then along the row
      const RowKit::Tile v = k.tile(dt, 1, "value", 1);
      k.load(RowKit::at(v, 0, parts, 1), hbm_rows(scalar_hbm, dt, 0, 0, parts, 0, 1));
      k.copy(dst, RowKit::spread(v, 0, parts, width));
    } else {
      const RowKit::Tile zero = k.tile(DType::f32, 1, "zero", 1);
      k.deps.track(k.b.iota(RowKit::at(zero, 0, parts, 1), AffineExpr{0, 0, {0}}));
      const float c = *fills[o];
      // 0 + c for c != 0; 0 * ±1 keeps the sign of a zero (0 + -0 is +0).
      if (c == 0)
        k.ts(dst, RowKit::spread(zero, 0, parts, width), AluOp::multiply,
             std::signbit(c) ? -1.0f : 1.0f);
      else
        k.ts(dst, RowKit::spread(zero, 0, parts, width), AluOp::add, c);
    }
    tiles.push_back(t);
  }
  for (const RowTile& t : row_tiles(rows))
    for (const ColChunk& c : col_chunks(cols, width))
      for (size_t o = 0; o < tiles.size(); ++o)
        k.store(hbm_block(out_hbm[o], node.results[o].dtype, cols, t, c),
                RowKit::at(tiles[o], 0, t.parts, c.w));
  return k.finish(binding);
}

} // namespace mstep::neuron
