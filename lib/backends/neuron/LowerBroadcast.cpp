// Elementwise ops and fusions whose values are not all of the result's
// type: row broadcasts ([cols] against [rows, cols]), per-row scalars
// ([rows..., 1]), 1-element tensors, and f32<->bf16 casts. The result shape
// is viewed as [rows, cols] (cols its last axis). Every value is either
// "wide", a [p, w] tile per row tile and column chunk (full tensors, and
// rows loaded onto every partition by a partition-stride-0 DMA), or "col",
// a [p, 1] tile per row tile (per-row scalars; 1-element tensors loaded
// with partition stride 0), read by wide ops with free stride 0. Ops run on
// Vector (tensor_tensor, tensor_scalar, tensor_copy for casts) and Scalar
// (activations); casts and x * c, x + c, x - c move to Scalar where that
// balances the two (balance_engines; the same fp32 results). Consecutive
// iterations' steps are interleaved (StepPipeline) where the cost model
// times that faster. Each op writes its result's dtype, as the engines convert.
// The result shape is the largest result's; a result of the per-row shape
// (layer_norm's backward yields its rsqrt column next to the wide values)
// is stored from its [p, 1] tile once per row tile.
#include <functional>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/CostParams.h"
#include "lib/backends/neuron/CreationLowering.h"
#include "lib/backends/neuron/IntegerValues.h"
#include "lib/backends/neuron/LoweringCommon.h"
#include "lib/backends/neuron/RowLowering.h"
#include "lib/backends/neuron/RowTiling.h"
#include "mstep/core/Error.h"

namespace mstep::neuron {

namespace {

/// block: the result's rows repeat the value's rows ([1, T, D] against
/// [B, T, D]: leading dims of 1, then the result's dims), read by row tiles
/// that never wrap around its period (block_rows).
enum class Load : uint8_t { full, row, col, scalar, block };

struct Value {
  bool wide = true;
  DType dtype = DType::f32; ///< the tile's (IntegerValues.h: bool uint8, i64 int32)
  bool is_int64 = false;    ///< an int64 value (its HBM form is int32 pairs)
};

/// One engine step: `op` (a, b: value ids) writes value `result`; a cast is
/// a tensor_copy; `alu2`/`scalar2` a tensor_scalar's second op, `reverse`
/// its scalar on the left; `pred` >= 0: a select of a and b by value pred.
struct Step {
  EwOp op;
  bool cast = false;
  bool reverse = false;
  std::optional<AluOp> alu2;
  float scalar2 = 0;
  int32_t pred = -1;
  int32_t result = -1;
};

struct Plan {
  std::vector<Value> values; ///< inputs first
  std::vector<Load> loads;   ///< per input
  std::vector<Step> steps;
  /// Constant values a select reads as tiles (value id, constant), filled
  /// once on all partitions.
  std::vector<std::pair<int32_t, float>> fills;
  std::vector<int32_t> outputs;
  std::vector<bool> per_row; ///< per output: of the per-row shape
};

/// Whether step `st` has an exact Scalar-engine form (scalar_step): a cast
/// (tensor_copy), or x * c, x + c, x - c with an immediate c (activation
/// identity: x * c + -0, x * 1 + c, x * 1 + -c are the same fp32 result as
/// the Vector op; the bias -0 keeps a -0 product -0).
bool scalar_eligible(const Step& st) {
  if (st.pred >= 0) return false;
  if (st.cast) return true;
  return st.op.opcode == Opcode::tensor_scalar && !st.reverse && !st.alu2 &&
         (st.op.alu == AluOp::multiply || st.op.alu == AluOp::add ||
          st.op.alu == AluOp::subtract);
}

/// Per step: run it on the Scalar engine. The eligible steps go, in order,
/// to whichever of Vector and Scalar (CostParams' clocks) would then be
/// busy for less per column, after the steps only one engine can run
/// (activations on Scalar, the rest on Vector): the two stream their SBUF
/// tiles concurrently (only Vector and GpSimd share the SBUF port).
std::vector<bool> balance_engines(const std::vector<Step>& steps) {
  const CostParams clocks;
  const double per_vector = 1 / clocks.vector_ghz, per_scalar = 1 / clocks.scalar_ghz;
  double vector = 0, scalar = 0;
  for (const Step& st : steps) {
    if (scalar_eligible(st)) continue;
    if (st.op.opcode == Opcode::activation)
      scalar += per_scalar;
    else
      vector += per_vector;
  }
  std::vector<bool> on_scalar(steps.size(), false);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!scalar_eligible(steps[i])) continue;
    on_scalar[i] = scalar + per_scalar < vector + per_vector;
    if (on_scalar[i])
      scalar += per_scalar;
    else
      vector += per_vector;
  }
  return on_scalar;
}

/// Step `st` (scalar_eligible) on the Scalar engine.
void scalar_step(RowKit& k, const Step& st, const AccessPattern& dst, const AccessPattern& a) {
  if (st.cast) {
    k.before_write(dst);
    k.deps.track(k.b.tensor_copy(Engine::scalar, dst, a));
    return;
  }
  const float c = st.op.scalar;
  switch (st.op.alu) {
  case AluOp::multiply:
    k.act(dst, a, ActivationFunction::identity, c, nullptr, -0.0f);
    return;
  case AluOp::add:
    k.act(dst, a, ActivationFunction::identity, 1.0f, nullptr, c);
    return;
  default: // subtract
    k.act(dst, a, ActivationFunction::identity, 1.0f, nullptr, -c);
    return;
  }
}

/// Emits each iteration's work (steps and stores, in order) interleaved
/// with the second half of the iteration before's: two dependent chains in
/// flight on the in-order Vector and Scalar queues instead of one. At most
/// two iterations are live, so the next one's loads (into the slots of the
/// one before the last, all emitted) still overlap the compute.
class StepPipeline {
public:
  /// `interleave` false: each iteration's work as pushed, in order.
  explicit StepPipeline(bool interleave) : interleave_(interleave) {}

  void push(std::vector<std::function<void()>> work) {
    const size_t half = interleave_ ? work.size() / 2 : work.size();
    for (size_t i = 0, j = 0; i < tail_.size() || j < half;) {
      if (i < tail_.size()) tail_[i++]();
      if (j < half) work[j++]();
    }
    tail_.assign(std::make_move_iterator(work.begin() + static_cast<std::ptrdiff_t>(half)),
                 std::make_move_iterator(work.end()));
  }
  void finish() {
    for (auto& f : tail_) f();
    tail_.clear();
  }

private:
  bool interleave_;
  std::vector<std::function<void()>> tail_;
};

/// How a value of shape `v` is read against the result shape `s`.
std::optional<Load> classify(const Shape& v, const Shape& s) {
  const int64_t r = s.rank();
  if (v.numel() == s.numel()) return Load::full;
  if (v.numel() == 1) return Load::scalar;
  if (r == 0 || v.rank() > r) return std::nullopt;
  const int64_t off = r - v.rank(); // v's dims, right-aligned against s
  auto dim = [&](int64_t i) { return i < off ? 1 : v[i - off]; };
  bool row = dim(r - 1) == s[r - 1], col = dim(r - 1) == 1;
  for (int64_t i = 0; i + 1 < r; ++i) {
    row = row && dim(i) == 1;
    col = col && dim(i) == s[i];
  }
  if (row) return Load::row;
  if (col) return Load::col;
  // Leading 1s, then the result's own dims down to the last.
  int64_t k = 0;
  while (k + 1 < r && dim(k) == 1) ++k;
  for (int64_t i = k; i < r; ++i)
    if (dim(i) != s[i]) return std::nullopt;
  return Load::block;
}

/// The rows of a block value of shape `v` against the result's [rows, cols].
int64_t block_rows(const Shape& v, int64_t cols) { return v.numel() / cols; }

/// The result's row tiles when block values of `period` rows are read
/// (period 0: none): 128-row tiles when every tile holds whole periods of
/// at least 32 rows (period 32 or 64: one DMA per period, partition starts
/// the access rules allow) or no tile crosses a period (a multiple of
/// 128); otherwise the tiles of each period, restarted at every period.
std::vector<RowTile> result_row_tiles(int64_t rows, int64_t period) {
  if (period == 0 || period % kPartitions == 0 || period == 32 || period == 64)
    return row_tiles(rows);
  std::vector<RowTile> out;
  for (int64_t base = 0; base < rows; base += period)
    for (RowTile t : row_tiles(period)) out.push_back({base + t.r0, t.parts});
  return out;
}

/// The body a single op stands for: its operands as parameters, then it.
TraceGraph single_op_body(const GraphNode& node, absl::Span<const TensorType> types) {
  TraceGraph g;
  g.input_types.assign(types.begin(), types.end());
  for (size_t i = 0; i < types.size(); ++i) {
    GraphNode p{OpKind::parameter, {}, {}, {types[i]}, nullptr};
    p.attrs.push_back({AttrName::index, AttrValue(static_cast<int64_t>(i))});
    g.nodes.push_back(std::move(p));
  }
  GraphNode n = node;
  n.operands.clear();
  for (size_t i = 0; i < types.size(); ++i) n.operands.push_back(ValueRef{uint32_t(i), 0});
  g.nodes.push_back(std::move(n));
  g.outputs = {ValueRef{static_cast<uint32_t>(types.size()), 0}};
  return g;
}

/// Comparisons and logical ops: results 0 or 1 (bool), exact on the
/// engines' fp32 for any operands.
bool is_integer_op(OpKind op) {
  return op == OpKind::eq || op == OpKind::ne || op == OpKind::logical_and ||
         op == OpKind::logical_or || op == OpKind::logical_not;
}

/// The step of body node `n`, a comparison, a logical op or `where`, added
/// to `plan` with its result value last. Logical ops take bools (0/1:
/// and is a multiply, or a max, not 1 - x); `where` is a Vector select,
/// its constant branches filled tiles.
absl::Status plan_integer_step(OpKind kind, const TraceGraph& body, const GraphNode& n,
                               const std::vector<int32_t>& value,
                               const std::vector<std::optional<float>>& constant, Plan& plan) {
  const std::string what = absl::StrCat("body op ", op_name(n.op));
  const std::optional<DType> tile_dt =
      n.results.size() == 1 ? value_tile_dtype(n.results[0].dtype) : std::nullopt;
  if (!tile_dt) return refuse(kind, absl::StrCat(what, ": its result has no tile dtype"));
  auto val = [&](size_t k) { return value[n.operands[k].node]; };
  auto cst = [&](size_t k) { return constant[n.operands[k].node]; };
  auto is_bool = [&](size_t k) { return body.type_of(n.operands[k]).dtype == DType::boolean; };
  Step st;
  bool wide = false;
  if (n.op == OpKind::where) {
    if (n.operands.size() != 3 || val(0) < 0)
      return refuse(kind, absl::StrCat(what, " needs a tensor condition"));
    st.pred = val(0);
    int32_t branch[2];
    for (size_t k = 1; k < 3; ++k) {
      branch[k - 1] = val(k);
      if (branch[k - 1] >= 0) continue;
      if (!cst(k)) return refuse(kind, absl::StrCat(what, "'s operand ", k));
      branch[k - 1] = static_cast<int32_t>(plan.values.size()); // a filled tile
      plan.values.push_back({true, *tile_dt, false});
      plan.fills.push_back({branch[k - 1], *cst(k)});
    }
    st.op.a = branch[0];
    st.op.b = branch[1];
    wide = plan.values[st.pred].wide || plan.values[st.op.a].wide || plan.values[st.op.b].wide;
  } else if (n.op == OpKind::logical_not) {
    if (n.operands.size() != 1 || val(0) < 0 || !is_bool(0))
      return refuse(kind, absl::StrCat(what, " of a non-bool"));
    // 1 - x as x * -1 + 1.
    st.op = EwOp{Opcode::tensor_scalar, AluOp::multiply, ActivationFunction::identity, -1.0f,
                 val(0), -1};
    st.alu2 = AluOp::add;
    st.scalar2 = 1.0f;
    wide = plan.values[val(0)].wide;
  } else {
    const bool logical = n.op == OpKind::logical_and || n.op == OpKind::logical_or;
    if (n.operands.size() != 2 || (logical && (!is_bool(0) || !is_bool(1))))
      return refuse(kind, absl::StrCat(what, " needs two operands", logical ? ", bools" : ""));
    int32_t x = val(0), y = val(1);
    std::optional<float> scalar;
    if (x < 0) { // every one of these ops is commutative
      std::swap(x, y);
      scalar = cst(0);
    } else if (y < 0) {
      scalar = cst(1);
    }
    if (x < 0 || (y < 0 && !scalar)) return refuse(kind, absl::StrCat(what, "'s operands"));
    const AluOp alu = n.op == OpKind::eq            ? AluOp::is_equal
                      : n.op == OpKind::ne          ? AluOp::not_equal
                      : n.op == OpKind::logical_and ? AluOp::multiply
                                                    : AluOp::max;
    st.op = EwOp{y >= 0 ? Opcode::tensor_tensor : Opcode::tensor_scalar, alu,
                 ActivationFunction::identity, scalar.value_or(0.0f), x, y};
    wide = plan.values[x].wide || (y >= 0 && plan.values[y].wide);
  }
  st.result = static_cast<int32_t>(plan.values.size());
  plan.values.push_back({wide, *tile_dt, n.results[0].dtype == DType::i64});
  plan.steps.push_back(st);
  return absl::OkStatus();
}

absl::StatusOr<Plan> plan_body(OpKind kind, const TraceGraph& body, const Shape& shape) {
  Plan plan;
  for (const TensorType& t : body.input_types) {
    const std::optional<DType> tile_dt = value_tile_dtype(t.dtype);
    if (!tile_dt)
      return refuse(kind, absl::StrCat("input ", t.to_string(), ": only f32/bf16, bool or ints"));
    std::optional<Load> load = classify(t.shape, shape);
    if (!load)
      return refuse(kind, absl::StrCat("broadcast of ", t.to_string(), " against ",
                                       shape.to_string(), " is not a row or per-row broadcast"));
    plan.loads.push_back(*load);
    plan.values.push_back({*load == Load::full || *load == Load::row || *load == Load::block,
                           *tile_dt, t.dtype == DType::i64});
  }
  std::vector<int32_t> value(body.nodes.size(), -1);
  std::vector<std::optional<float>> constant(body.nodes.size());
  for (size_t i = 0; i < body.nodes.size(); ++i) {
    const GraphNode& n = body.nodes[i];
    if (n.op == OpKind::parameter) {
      value[i] = static_cast<int32_t>(attr_int(n.attrs, AttrName::index));
      continue;
    }
    constant[i] = scalar_constant(n);
    if (!constant[i]) constant[i] = exact_int_constant(n);
    if (!constant[i]) constant[i] = fold_constant(n, constant);
    if (constant[i]) continue;
    if (n.op == OpKind::where || is_integer_op(n.op)) {
      MSTEP_RETURN_IF_ERROR(plan_integer_step(kind, body, n, value, constant, plan));
      value[i] = static_cast<int32_t>(plan.values.size()) - 1;
      continue;
    }
    if (n.op == OpKind::full && n.operands.size() == 1 &&
        n.results[0].dtype == body.type_of(n.operands[0]).dtype) {
      // A filled tensor: its 0-d value (a constant, or a 1-element input
      // read as a per-row scalar) wherever it is read.
      constant[i] = constant[n.operands[0].node];
      value[i] = value[n.operands[0].node];
      continue;
    }
    const std::string what = absl::StrCat("body op ", op_name(n.op));
    const bool casts = n.op == OpKind::cast || n.op == OpKind::expand;
    if (n.results.size() != 1 || (!tileable_dtype(n.results[0].dtype) && !casts) ||
        n.operands.empty() || n.operands.size() > 2)
      return refuse(kind, absl::StrCat(what, " is not an elementwise f32/bf16 op"));
    const DType dt = n.results[0].dtype;
    const int32_t a = value[n.operands[0].node];
    if (n.op == OpKind::expand) { // broadcasting happens where the value is read
      if (a < 0 || !classify(body.type_of(n.operands[0]).shape, shape))
        return refuse(kind, absl::StrCat(what, " of a non-tensor or non-row/column value"));
      value[i] = a;
      continue;
    }
    Step st;
    std::optional<float> scalar;
    int32_t x = a, y = -1;
    if (n.operands.size() == 2) {
      const uint32_t second = n.operands[1].node;
      y = value[second];
      if (y < 0) scalar = constant[second];
      if (x < 0 && y >= 0 && constant[n.operands[0].node]) {
        // c <op> v: swap the commutative ones; c - v = v * -1 + c.
        const float c = *constant[n.operands[0].node];
        if (n.op == OpKind::sub) {
          st.alu2 = AluOp::add;
          st.scalar2 = c;
          scalar = -1.0f;
          x = y;
          y = -1;
          st.op = *ew_op(OpKind::mul, x, -1, scalar);
          st.op.a = x;
        } else if (n.op == OpKind::add || n.op == OpKind::mul || n.op == OpKind::maximum ||
                   n.op == OpKind::minimum) {
          x = y;
          y = -1;
          scalar = c;
        } else if (n.op == OpKind::div) { // c / v: the scalar on the left (reverse0)
          x = y;
          y = -1;
          scalar = c;
          st.reverse = true;
        } else {
          return refuse(kind, absl::StrCat(what, " with a constant first operand"));
        }
      }
      if (x < 0 || (y < 0 && !scalar)) return refuse(kind, absl::StrCat(what, "'s operands"));
    } else if (x < 0) {
      return refuse(kind, absl::StrCat(what, "'s operand is not a tensor"));
    }
    if (n.op == OpKind::cast) {
      const DType from = body.type_of(n.operands[0]).dtype;
      if (dt == DType::boolean) { // v != 0
        st.op = EwOp{Opcode::tensor_scalar, AluOp::not_equal, ActivationFunction::identity, 0.0f,
                     x, -1};
      } else if (!tileable_dtype(dt) && tileable_dtype(from)) {
        return refuse(kind, absl::StrCat(what, " from ", dtype_name(from), " to ", dtype_name(dt),
                                         " (the engines' float-to-int conversion is not ref's)"));
      } else {
        st.cast = true;
        st.op.a = x;
      }
    } else if (!st.alu2) {
      std::optional<EwOp> e = ew_op_of(n, x, y, scalar);
      if (!e ||
          (n.operands.size() == 2) != (e->opcode != Opcode::activation && n.op != OpKind::neg))
        return refuse(kind, absl::StrCat(what, " has no engine lowering"));
      st.op = *e;
    }
    st.result = static_cast<int32_t>(plan.values.size());
    const bool wide = plan.values[x].wide || (y >= 0 && plan.values[y].wide);
    plan.values.push_back({wide, *value_tile_dtype(dt), dt == DType::i64});
    plan.steps.push_back(st);
    value[i] = st.result;
  }
  for (ValueRef v : body.outputs) {
    if (value[v.node] < 0) return refuse(kind, "a body output is not a tensor value");
    const Shape& out = body.type_of(v).shape;
    const bool per_row = out.numel() != shape.numel() && classify(out, shape) == Load::col &&
                         !plan.values[value[v.node]].wide;
    if (out.numel() != shape.numel() && !per_row)
      return refuse(kind, absl::StrCat("output ", body.type_of(v).to_string(), " is neither ",
                                       shape.to_string(), " nor one value per row"));
    plan.outputs.push_back(value[v.node]);
    plan.per_row.push_back(per_row);
  }
  return plan;
}

} // namespace

namespace {

/// lower_broadcast's program, the iterations' steps interleaved by
/// StepPipeline or (`interleave` false) emitted one iteration after another.
absl::StatusOr<LoweredOp> lower_broadcast_program(const GraphNode& node,
                                                  absl::Span<const TensorType> types,
                                                  bool interleave) {
  if (node.results.empty()) return refuse(node.op, "no results");
  const Shape* widest = &node.results[0].shape;
  for (const TensorType& t : node.results)
    if (t.shape.numel() > widest->numel()) widest = &t.shape;
  const Shape& shape = *widest;
  for (const TensorType& t : node.results) {
    if (!value_tile_dtype(t.dtype))
      return refuse(node.op, absl::StrCat("result ", t.to_string(), ": only f32/bf16, bool, ints"));
    if (t.shape != shape && classify(t.shape, shape) != Load::col)
      return refuse(node.op, absl::StrCat("result ", t.to_string(), " is neither ",
                                          shape.to_string(), " nor one value per row"));
  }
  const int64_t n = shape.numel();
  if (n == 0) return refuse(node.op, absl::StrCat(shape.to_string(), " has no elements"));
  const int64_t cols = shape.rank() == 0 ? 1 : shape[shape.rank() - 1], rows = n / cols;
  TraceGraph single;
  if (!node.body) single = single_op_body(node, types);
  const TraceGraph& body = node.body ? *node.body : single;
  if (body.input_types.size() != types.size())
    return refuse(node.op, "operand count differs from the body's inputs");
  MSTEP_ASSIGN_OR_RETURN(Plan plan, plan_body(node.op, body, shape));

  // Chunked tiles: every wide value, and a copy-out tile per column output.
  int64_t bytes_per_col = 0;
  for (const Value& v : plan.values)
    if (v.wide) bytes_per_col += 2 * static_cast<int64_t>(element_size(v.dtype));
  for (size_t o = 0; o < plan.outputs.size(); ++o)
    if (!plan.values[plan.outputs[o]].wide && !plan.per_row[o])
      bytes_per_col += 2 * static_cast<int64_t>(element_size(plan.values[o].dtype));
  const int64_t width = chunk_width(cols, bytes_per_col);
  if (width < 1) return refuse(node.op, "its values do not fit SBUF");
  const std::vector<ColChunk> chunks = col_chunks(cols, width);
  const bool resident = chunks.size() == 1;

  RowKit k(absl::StrCat("neuron_", op_name(node.op)));
  std::vector<int32_t> hbm, binding;
  std::vector<int32_t> int64_inputs; // range-checked before the program runs
  for (size_t i = 0; i < types.size(); ++i) {
    const bool pairs = types[i].dtype == DType::i64; // int32 pairs
    if (pairs || types[i].dtype == DType::i32) int64_inputs.push_back(static_cast<int32_t>(i));
    hbm.push_back(k.b.hbm_tensor(absl::StrCat("in", i), pairs ? DType::i32 : types[i].dtype,
                                 types[i].numel() * (pairs ? 2 : 1)));
    binding.push_back(static_cast<int32_t>(i));
  }
  // An int64 input's HBM pattern reads the low words.
  auto in_hbm = [&](int32_t i, const AccessPattern& ap) {
    return plan.values[i].is_int64 ? i64_word(ap, 0) : ap;
  };
  std::vector<RowKit::Tile> tile(plan.values.size()), copy_out(plan.outputs.size()),
      high(plan.outputs.size());
  for (size_t v = 0; v < plan.values.size(); ++v)
    tile[v] = k.tile(plan.values[v].dtype, plan.values[v].wide ? width : 1, absl::StrCat("v", v));
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const Value& v = plan.values[plan.outputs[o]];
    const int64_t elements = (plan.per_row[o] ? rows : n) * (v.is_int64 ? 2 : 1);
    hbm.push_back(k.b.hbm_tensor(absl::StrCat("out", o), v.dtype, elements));
    binding.push_back(-1 - static_cast<int32_t>(o));
    if (!v.wide && !plan.per_row[o]) copy_out[o] = k.tile(v.dtype, width, absl::StrCat("out", o));
    if (v.is_int64) // the high words
      high[o] = k.tile(DType::i32, plan.per_row[o] ? 1 : width, absl::StrCat("hi", o));
  }
  // Output o's store; an int64 one as int32 pairs (its high words into
  // slot s of high[o]).
  auto store_out = [&](size_t o, const AccessPattern& to, const AccessPattern& from, int s) {
    if (!plan.values[plan.outputs[o]].is_int64) return k.store(to, from);
    AccessPattern hi = from;
    hi.buffer = RowKit::at(high[o], s, 1, 1).buffer;
    hi.offset = 0;
    hi.dims = {{from.free_elements(), 1}};
    store_i64(k, to, from, hi);
  };
  // Constants a select reads: filled once on every partition (iota's 0,
  // plus the constant: exact).
  for (const auto& [v, c] : plan.fills)
    for (int s = 0; s < 2; ++s) {
      const AccessPattern all = RowKit::at(tile[v], s, kPartitions, width);
      k.before_write(all);
      k.deps.track(k.b.iota(all, AffineExpr{0, 0, {0}}));
      k.ts(all, all, AluOp::add, c);
    }
  const int32_t inputs = static_cast<int32_t>(plan.loads.size());
  int64_t period = 0; // of the block inputs, which must agree
  for (int32_t i = 0; i < inputs; ++i) {
    if (plan.loads[i] != Load::block) continue;
    const int64_t p = block_rows(types[i].shape, cols);
    if (period != 0 && p != period)
      return refuse(node.op, "block broadcasts of different row counts");
    period = p;
  }
  // A resident row input is loaded once onto all partitions (slot 0).
  auto load_row = [&](int32_t i, int s, int32_t parts, const ColChunk& c) {
    k.load(RowKit::at(tile[i], s, parts, c.w),
           in_hbm(i, hbm_row_broadcast(hbm[i], tile[i].dtype, parts, c)));
  };
  if (resident)
    for (int32_t i = 0; i < inputs; ++i)
      if (plan.loads[i] == Load::row) load_row(i, 0, kPartitions, chunks[0]);

  int64_t iteration = 0;
  int ts = 0;
  const std::vector<bool> on_scalar = balance_engines(plan.steps);
  StepPipeline pipeline(interleave);
  for (const RowTile& t : result_row_tiles(rows, period)) {
    const int32_t p = t.parts;
    // Per-row values: loaded and computed once per row tile.
    for (int32_t i = 0; i < inputs; ++i) {
      if (plan.loads[i] == Load::col)
        k.load(RowKit::at(tile[i], ts, p, 1), in_hbm(i, hbm_column(hbm[i], tile[i].dtype, t)));
      if (plan.loads[i] == Load::scalar)
        k.load(RowKit::at(tile[i], ts, p, 1),
               in_hbm(i, hbm_rows(hbm[i], tile[i].dtype, 0, 0, p, 0, 1)));
    }
    for (const ColChunk& c : chunks) {
      const int s = static_cast<int>(iteration++ % 2);
      const bool first = c.c0 == 0;
      // Value v as an operand of a step writing [p, w] (wide) or [p, 1].
      auto read = [&](int32_t v, bool wide_result) {
        if (plan.values[v].wide)
          return RowKit::at(tile[v], v < inputs && plan.loads[v] == Load::row && resident ? 0 : s,
                            p, c.w);
        return wide_result ? RowKit::spread(tile[v], ts, p, c.w) : RowKit::at(tile[v], ts, p, 1);
      };
      for (int32_t i = 0; i < inputs; ++i) {
        if (plan.loads[i] == Load::full)
          k.load_split(RowKit::at(tile[i], s, p, c.w),
                       in_hbm(i, hbm_block(hbm[i], tile[i].dtype, cols, t, c)));
        if (plan.loads[i] == Load::row && !resident) load_row(i, s, p, c);
        if (plan.loads[i] == Load::block) // whole periods, or a part of one
          for (int32_t q = 0; q < p; q += static_cast<int32_t>(std::min<int64_t>(period, p))) {
            const int32_t n = static_cast<int32_t>(std::min<int64_t>(period, p - q));
            const AccessPattern dst = RowKit::at(tile[i], s, p, c.w);
            AccessPattern part = dst;
            part.start_partition = q;
            part.partitions = n;
            k.load(part, in_hbm(i, hbm_block(hbm[i], tile[i].dtype, cols,
                                             {(t.r0 + q) % period, n}, c)));
          }
      }
      // The iteration's steps and stores, emitted interleaved with the last
      // iteration's (StepPipeline): each is a dependent chain across
      // Vector and Scalar, and the engines' queues are in program order.
      std::vector<std::function<void()>> work;
      for (const Step& st : plan.steps) {
        const bool wide = plan.values[st.result].wide;
        if (!wide && !first) continue; // per-row: once per row tile
        const AccessPattern dst =
            wide ? RowKit::at(tile[st.result], s, p, c.w) : RowKit::at(tile[st.result], ts, p, 1);
        const AccessPattern a = read(st.op.a, wide);
        const AccessPattern pred = st.pred >= 0 ? read(st.pred, wide) : a;
        const AccessPattern b = st.op.b >= 0 ? read(st.op.b, wide) : a;
        const bool scalar = wide && on_scalar[&st - plan.steps.data()];
        work.push_back([&k, &st, dst, a, pred, b, scalar] {
          if (st.pred >= 0) { // where: Vector select
            k.before_write(dst);
            Instruction sel;
            sel.engine = Engine::vector;
            sel.opcode = Opcode::select;
            sel.dst = dst;
            sel.srcs = {pred, a, b};
            k.deps.track(k.b.emit(std::move(sel)));
          } else if (scalar) {
            scalar_step(k, st, dst, a);
          } else if (st.cast) {
            k.copy(dst, a);
          } else if (st.op.opcode == Opcode::activation) {
            k.act(dst, a, st.op.function);
          } else if (st.op.opcode == Opcode::tensor_scalar) {
            const int64_t idx = k.ts(dst, a, st.op.alu, st.op.scalar);
            k.b.at(idx).reverse = st.reverse;
            if (st.alu2) {
              k.b.at(idx).alu2 = st.alu2;
              k.b.at(idx).scalar2 = st.scalar2;
            }
          } else {
            k.tt(dst, a, b, st.op.alu);
          }
        });
      }
      for (size_t o = 0; o < plan.outputs.size(); ++o) {
        const int32_t v = plan.outputs[o];
        if (plan.per_row[o]) { // its [p, 1] column, once per row tile
          if (first)
            work.push_back([&store_out, o, to = hbm_column(hbm[inputs + o], plan.values[v].dtype, t),
                            from = read(v, false), ts] { store_out(o, to, from, ts); });
          continue;
        }
        const AccessPattern to = hbm_block(hbm[inputs + o], plan.values[v].dtype, cols, t, c);
        const AccessPattern value = read(v, true);
        if (plan.values[v].wide) {
          work.push_back([&store_out, o, to, value, s] { store_out(o, to, value, s); });
          continue;
        }
        const AccessPattern src = RowKit::at(copy_out[o], s, p, c.w);
        work.push_back([&k, &store_out, o, to, value, src, s] {
          k.copy(src, value);
          store_out(o, to, src, s);
        });
      }
      pipeline.push(std::move(work));
    }
    ts ^= 1;
  }
  pipeline.finish();
  LoweredOp out = k.finish(binding);
  if (!int64_inputs.empty())
    out.stage = [op = node.op, int64_inputs](absl::Span<const host::HostBuffer* const> in,
                                             absl::Span<host::HostBuffer* const>, HbmContents&) {
      return check_integer_range(op, in, int64_inputs);
    };
  return out;
}

} // namespace

absl::StatusOr<LoweredOp> lower_broadcast(const GraphNode& node,
                                          absl::Span<const TensorType> types) {
  MSTEP_ASSIGN_OR_RETURN(LoweredOp interleaved, lower_broadcast_program(node, types, true));
  MSTEP_ASSIGN_OR_RETURN(LoweredOp in_order, lower_broadcast_program(node, types, false));
  // Interleaving wins on long chains over few, large iterations, and can
  // lose where the stores it delays were the bound: keep the faster.
  MSTEP_ASSIGN_OR_RETURN(CostReport a, estimate_cost(interleaved.program));
  MSTEP_ASSIGN_OR_RETURN(CostReport b, estimate_cost(in_order.program));
  return a.total_ns < b.total_ns ? std::move(interleaved) : std::move(in_order);
}

} // namespace mstep::neuron
