// Attention as composites (see StableHloAttention.h). The decompositions
// follow the ref kernels (RefAttention.cpp, RefAttentionGrad.cpp): P =
// softmax(scale q k^T) with keys j > i excluded under is_causal; dropout
// keeps element (b, i, j) iff Philox::uniform(seed, offset, its row-major
// index in [..., L, S]) >= p and scales it by 1 / (1 - p). Backward: dV =
// P'^T g, dP = (g v^T) * keep / (1 - p), dS = P * (dP - rowsum(P * dP)),
// dQ = scale dS k, dK = scale dS^T q, and a floating mask's gradient dS
// summed over the dims the mask was broadcast along. Exclusions, as ref:
// key j > i under is_causal, a false bool mask, and valid_seq_len (per
// index of dim 0, clamped to [0, n]: right padding keeps [0, len), left
// [n - len, n), for query rows and keys alike) set the score to -inf; a
// floating mask is added to the scores it does not exclude. A row with no
// key left has P = 0 (zero output and gradients; softmax would give NaN),
// and positions outside valid_seq_len are zeroed in q, k, v and the
// output gradient first, so that garbage (even NaN) there cannot leak
// through a 0 * NaN, as the ref kernels skip them. The forward also
// returns, when the op asks, the probabilities after dropout, the dropout
// keep mask and the probabilities before dropout (recompute_mode = false),
// which the backward then reads instead of recomputing them. Supported:
// q, k, v of one batch shape, softmax_mode none; anything else is
// Unimplemented naming what.
#include "lib/compiler/stablehlo/StableHloAttention.h"

#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/stablehlo/StableHloPhilox.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/core/Error.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::stablehlo {

namespace {

using Values = std::vector<Value>;

struct Attention {
  double scale = 1, p = 0;
  bool causal = false, left_pad = false;
  std::optional<uint64_t> rng_offset;
  // Operand positions in the composite's arguments (after q, k, v), or -1.
  int mask = -1, lens = -1, rng = -1;
};

/// dot_general over the shared leading batch dimensions, contracting
/// `a`'s dimension `ca` with `b`'s dimension `cb` (both counted from the
/// batch dimensions' end: 0 or 1 of the last two).
Value batched_dot(FunctionText& f, const Value& a, const Value& b, int ca, int cb) {
  const size_t r = a.shape.size();
  std::vector<int64_t> batch, shape;
  for (size_t i = 0; i + 2 < r; ++i) {
    batch.push_back(static_cast<int64_t>(i));
    shape.push_back(a.shape[i]);
  }
  shape.push_back(a.shape[r - 2 + (1 - ca)]);
  shape.push_back(b.shape[r - 2 + (1 - cb)]);
  const std::string bd = absl::StrJoin(batch, ", ");
  return f.op("stablehlo.dot_general", {a, b}, shape, a.elem,
              absl::StrCat("dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [", bd,
                           "], rhs_batching_dimensions = [", bd, "], lhs_contracting_dimensions = [",
                           r - 2 + ca, "], rhs_contracting_dimensions = [", r - 2 + cb,
                           "]>, precision_config = [#stablehlo<precision HIGHEST>, "
                           "#stablehlo<precision HIGHEST>]"));
}

Value scaled(FunctionText& f, const Value& v, double c) {
  return f.same("stablehlo.multiply", {v, f.splat(c, v.shape, v.elem)});
}

/// [..., n] (n = shape[axis]) true where the position along `axis` is
/// inside valid_seq_len; `lens` [B] indexes dim 0.
Value valid_positions(FunctionText& f, const Value& lens, const std::vector<int64_t>& shape,
                      int64_t axis, bool left) {
  const int64_t n = shape[axis];
  Value len = f.convert(lens, "i64");
  len = f.op("stablehlo.clamp", {f.constant(0, "i64"), len, f.constant(static_cast<double>(n), "i64")},
             len.shape, "i64");
  const Value pos = f.iota(shape, axis, "i64");
  const Value l = f.broadcast_in_dim(len, shape, {0});
  if (!left) return f.compare(pos, l, "LT");
  // [n - len, n)
  return f.compare(pos, f.same("stablehlo.subtract", {f.splat(static_cast<double>(n), shape, "i64"), l}),
                   "GE");
}

/// `v` [..., n, E] with the rows outside valid_seq_len zeroed.
Value zero_padded_rows(FunctionText& f, const Value& v, const Value& lens, bool left) {
  const Value keep = valid_positions(f, lens, v.shape, static_cast<int64_t>(v.shape.size() - 2), left);
  return f.select(keep, v, f.splat(0, v.shape, v.elem));
}

/// The softmax probabilities P [..., L, S] before dropout; `args` are the
/// composite's arguments (q, k at q_at, q_at + 1; mask and lens where `a`
/// says).
Value probabilities(FunctionText& f, const Values& args, size_t q_at, const Attention& a) {
  const Value &q = args[q_at], &k = args[q_at + 1];
  Value s = scaled(f, batched_dot(f, q, k, 1, 1), a.scale);
  const size_t r = s.shape.size();
  const auto rows = static_cast<int64_t>(r - 2), cols = static_cast<int64_t>(r - 1);
  std::optional<Value> excluded;
  auto exclude = [&](const Value& e) {
    excluded = excluded ? f.same("stablehlo.or", {*excluded, e}) : e;
  };
  if (a.causal) exclude(f.compare(f.iota(s.shape, cols, "i64"), f.iota(s.shape, rows, "i64"), "GT"));
  if (a.mask >= 0) {
    const Value m = f.broadcast(args[a.mask], s.shape);
    if (m.elem == "i1")
      exclude(f.same("stablehlo.not", {m}));
    else
      s = f.same("stablehlo.add", {s, f.convert(m, s.elem)});
  }
  if (a.lens >= 0) {
    const Value& lens = args[a.lens];
    exclude(f.same("stablehlo.not", {f.same("stablehlo.and", {valid_positions(f, lens, s.shape, rows, a.left_pad),
                                                              valid_positions(f, lens, s.shape, cols, a.left_pad)})}));
  }
  const bool may_empty = a.mask >= 0 || a.lens >= 0;
  if (excluded)
    s = f.select(*excluded, f.splat(-std::numeric_limits<double>::infinity(), s.shape, s.elem), s);
  const std::vector<int64_t> last{cols};
  std::vector<int64_t> kept;
  for (size_t i = 0; i + 1 < r; ++i) kept.push_back(static_cast<int64_t>(i));
  Value m = f.reduce(s, last, Reducer::max, f.reduce_init(Reducer::max, s.elem));
  if (may_empty)  // a row with no key left: shift by 0, so exp gives 0, not NaN
    m = f.select(f.compare(m, f.splat(-std::numeric_limits<double>::infinity(), m.shape, m.elem), "EQ"),
                 f.splat(0, m.shape, m.elem), m);
  const Value e = f.same("stablehlo.exponential",
                         {f.same("stablehlo.subtract", {s, f.broadcast_in_dim(m, s.shape, kept)})});
  Value z = f.reduce(e, last, Reducer::add, f.reduce_init(Reducer::add, e.elem));
  if (may_empty)  // ... and 0 / 1 = 0 probabilities
    z = f.select(f.compare(z, f.splat(0, z.shape, z.elem), "EQ"), f.splat(1, z.shape, z.elem), z);
  return f.same("stablehlo.divide", {e, f.broadcast_in_dim(z, s.shape, kept)});
}

/// The composite's arguments with the rows outside valid_seq_len zeroed in
/// the [..., n, E] operands at `rows` (q, k, v, the output gradient).
Values sanitized(FunctionText& f, Values args, const std::vector<size_t>& rows, const Attention& a) {
  if (a.lens < 0) return args;
  for (size_t i : rows) args[i] = zero_padded_rows(f, args[i], args[a.lens], a.left_pad);
  return args;
}

/// keep / (1 - p) per element of P's shape, or null without dropout.
std::optional<Value> dropout_factor(FunctionText& f, const Values& args, const Attention& a,
                                    const std::vector<int64_t>& shape, const std::string& elem) {
  if (a.rng < 0 || !a.rng_offset) return std::nullopt;
  const Value keep = philox_keep_mask(f, args[a.rng], static_cast<int64_t>(*a.rng_offset), a.p, shape);
  return f.select(keep, f.splat(1.0 / (1.0 - a.p), shape, elem), f.splat(0, shape, elem));
}

std::string composite_attrs(const Attention& a, const std::string& name,
                            const std::string& decomposition) {
  std::string attrs = absl::StrCat("is_causal = ", a.causal ? "true" : "false",
                                   ", scale = ", absl::StrFormat("%.17g", a.scale), " : f64");
  if (a.rng_offset)
    absl::StrAppend(&attrs, ", dropout_p = ", absl::StrFormat("%.17g", a.p),
                    " : f64, rng_offset = ", *a.rng_offset, " : i64");
  if (a.mask >= 0) absl::StrAppend(&attrs, ", has_mask = true");
  if (a.lens >= 0)
    absl::StrAppend(&attrs, ", valid_seq_len = true, padding_side = \"",
                    a.left_pad ? "left" : "right", "\"");
  return absl::StrCat("composite_attributes = {", attrs, "}, decomposition = ", decomposition,
                      ", name = \"", name, "\", version = 1 : i32");
}

/// The common attributes and the checks of what the decomposition covers.
/// `first` is the position of q among the operands; the optional mask,
/// valid_seq_len and RNG state follow v in that order.
template <typename AttentionOp>
absl::StatusOr<Attention> read_attention(AttentionOp op, size_t first, const Values& in) {
  const std::string name = op->getName().getStringRef().str();
  if (op.getSoftmaxMode() != dialect::SoftmaxMode::none)
    return absl::UnimplementedError(
        absl::StrCat("op '", name, "' with a softmax_mode has no StableHLO export yet"));
  const Value &q = in[first], &k = in[first + 1], &v = in[first + 2];
  if (q.shape.size() < 3 || k.shape.size() != q.shape.size() ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) ||
      !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin()))
    return absl::UnimplementedError(absl::StrCat(
        "op '", name, "' whose query, key and value differ in batch shape (broadcast heads) "
        "has no StableHLO export yet"));
  Attention a{op.getScale().convertToDouble(), op.getDropoutP().convertToDouble(),
              op.getIsCausal(), op.getPaddingSide() == dialect::PaddingSide::left,
              op.getRngOffset()};
  int next = static_cast<int>(first) + 3;
  if (op.getMask()) a.mask = next++;
  if (op.getValidSeqLen()) a.lens = next++;
  if (op.getRngState()) a.rng = next++;
  return a;
}

/// The gradient of a floating mask from dS [..., L, S]: summed over the
/// dims the mask was broadcast along, in the mask's shape.
Value mask_gradient(FunctionText& f, const Value& ds, const Value& mask) {
  const size_t lead = ds.shape.size() - mask.shape.size();
  std::vector<int64_t> dims;
  for (size_t d = 0; d < ds.shape.size(); ++d)
    if (d < lead || (mask.shape[d - lead] == 1 && ds.shape[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  Value g = dims.empty() ? ds : f.reduce(ds, dims, Reducer::add, f.reduce_init(Reducer::add, ds.elem));
  return f.convert(f.reshape(g, mask.shape), mask.elem);
}

}  // namespace

absl::StatusOr<Values> lower_sdpa(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values& out) {
  auto sdpa = mlir::cast<dialect::SdpaOp>(op);
  MSTEP_ASSIGN_OR_RETURN(Attention a, read_attention(sdpa, 0, in));
  const bool want_probs = sdpa.getAttnProbs() != nullptr, want_mask = sdpa.getDropoutMask() != nullptr,
             want_saved = sdpa.getSavedProbs() != nullptr;
  const std::string decomposition =
      f.add_function("mstep_sdpa", in, [&](FunctionText& g, const Values& raw) {
        const Values args = sanitized(g, raw, {0, 1, 2}, a);
        const Value p = probabilities(g, args, 0, a);
        const auto d = dropout_factor(g, args, a, p.shape, p.elem);
        const Value pd = d ? g.same("stablehlo.multiply", {p, *d}) : p;
        Values results{batched_dot(g, pd, args[2], 1, 0)};
        // The extras in the op's order: probabilities after dropout, the
        // keep mask (all true without dropout), the probabilities before.
        if (want_probs) results.push_back(pd);
        if (want_mask)
          results.push_back(d ? g.compare(*d, g.splat(0, p.shape, p.elem), "NE")
                              : g.splat(1, p.shape, "i1"));
        if (want_saved) results.push_back(p);
        return results;
      });
  return f.op_results("stablehlo.composite", in, out, composite_attrs(a, "mstep.sdpa", decomposition));
}

absl::StatusOr<Values> lower_sdpa_backward(FunctionText& f, mlir::Operation* op, const Values& in,
                                           const Values& out) {
  auto bw = mlir::cast<dialect::SdpaBackwardOp>(op);
  MSTEP_ASSIGN_OR_RETURN(Attention a, read_attention(bw, 1, in));
  // The forward's probabilities before dropout, when it saved them: the
  // operand after the RNG state.
  const int saved = bw.getSavedProbs() ? static_cast<int>(in.size()) - 1 : -1;
  const bool mask_grad = bw.getGradMask() != nullptr;
  const std::string decomposition =
      f.add_function("mstep_sdpa_backward", in, [&](FunctionText& g, const Values& raw) {
        const Values args = sanitized(g, raw, {0, 1, 2, 3}, a);
        const Value &grad = args[0], &q = args[1], &k = args[2], &v = args[3];
        const Value p = saved >= 0 ? args[saved] : probabilities(g, args, 1, a);
        const auto d = dropout_factor(g, args, a, p.shape, p.elem);
        const Value pd = d ? g.same("stablehlo.multiply", {p, *d}) : p;
        const Value dv = batched_dot(g, pd, grad, 0, 0);
        Value dp = batched_dot(g, grad, v, 1, 1);
        if (d) dp = g.same("stablehlo.multiply", {dp, *d});
        const size_t r = p.shape.size();
        std::vector<int64_t> kept;
        for (size_t i = 0; i + 1 < r; ++i) kept.push_back(static_cast<int64_t>(i));
        const Value rowsum = g.reduce(g.same("stablehlo.multiply", {p, dp}),
                                      {static_cast<int64_t>(r - 1)}, Reducer::add,
                                      g.reduce_init(Reducer::add, p.elem));
        const Value ds = g.same(
            "stablehlo.multiply",
            {p, g.same("stablehlo.subtract", {dp, g.broadcast_in_dim(rowsum, p.shape, kept)})});
        const Value dq = scaled(g, batched_dot(g, ds, k, 1, 0), a.scale);
        const Value dk = scaled(g, batched_dot(g, ds, q, 0, 0), a.scale);
        Values grads{dq, dk, dv};
        if (mask_grad) grads.push_back(mask_gradient(g, ds, args[a.mask]));
        return grads;
      });
  return f.op_results("stablehlo.composite", in, out,
                      composite_attrs(a, "mstep.sdpa_backward", decomposition));
}

}  // namespace mstep::stablehlo
