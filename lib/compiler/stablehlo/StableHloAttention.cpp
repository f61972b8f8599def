// Attention as composites (see StableHloAttention.h). The decompositions
// follow the ref kernels (RefAttention.cpp, RefAttentionGrad.cpp): P =
// softmax(scale q k^T) with keys j > i excluded under is_causal; dropout
// keeps element (b, i, j) iff Philox::uniform(seed, offset, its row-major
// index in [..., L, S]) >= p and scales it by 1 / (1 - p). Backward: dV =
// P'^T g, dP = (g v^T) * keep / (1 - p), dS = P * (dP - rowsum(P * dP)),
// dQ = scale dS k, dK = scale dS^T q. Supported: q, k, v of one batch
// shape, no mask, no valid_seq_len, softmax_mode none, no extra results;
// anything else is Unimplemented naming what.
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
  bool causal = false;
  std::optional<uint64_t> rng_offset;
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

/// The softmax probabilities P [..., L, S] before dropout.
Value probabilities(FunctionText& f, const Value& q, const Value& k, const Attention& a) {
  Value s = scaled(f, batched_dot(f, q, k, 1, 1), a.scale);
  const size_t r = s.shape.size();
  if (a.causal) {
    const Value row = f.iota(s.shape, static_cast<int64_t>(r - 2), "i64");
    const Value col = f.iota(s.shape, static_cast<int64_t>(r - 1), "i64");
    s = f.select(f.compare(col, row, "GT"),
                 f.splat(-std::numeric_limits<double>::infinity(), s.shape, s.elem), s);
  }
  const std::vector<int64_t> last{static_cast<int64_t>(r - 1)};
  std::vector<int64_t> kept;
  for (size_t i = 0; i + 1 < r; ++i) kept.push_back(static_cast<int64_t>(i));
  const Value m = f.reduce(s, last, Reducer::max, f.reduce_init(Reducer::max, s.elem));
  const Value e = f.same("stablehlo.exponential",
                         {f.same("stablehlo.subtract", {s, f.broadcast_in_dim(m, s.shape, kept)})});
  const Value z = f.reduce(e, last, Reducer::add, f.reduce_init(Reducer::add, e.elem));
  return f.same("stablehlo.divide", {e, f.broadcast_in_dim(z, s.shape, kept)});
}

/// keep / (1 - p) per element of P's shape, or null without dropout.
std::optional<Value> dropout_factor(FunctionText& f, const Value* rng, const Attention& a,
                                    const std::vector<int64_t>& shape, const std::string& elem) {
  if (!rng || !a.rng_offset) return std::nullopt;
  const Value keep = philox_keep_mask(f, *rng, static_cast<int64_t>(*a.rng_offset), a.p, shape);
  return f.select(keep, f.splat(1.0 / (1.0 - a.p), shape, elem), f.splat(0, shape, elem));
}

std::string composite_attrs(const Attention& a, const std::string& name,
                            const std::string& decomposition) {
  std::string attrs = absl::StrCat("is_causal = ", a.causal ? "true" : "false",
                                   ", scale = ", absl::StrFormat("%.17g", a.scale), " : f64");
  if (a.rng_offset)
    absl::StrAppend(&attrs, ", dropout_p = ", absl::StrFormat("%.17g", a.p),
                    " : f64, rng_offset = ", *a.rng_offset, " : i64");
  return absl::StrCat("composite_attributes = {", attrs, "}, decomposition = ", decomposition,
                      ", name = \"", name, "\", version = 1 : i32");
}

/// The common attributes and the checks of what the decomposition covers.
absl::StatusOr<Attention> read_attention(mlir::Operation* op, bool has_mask, bool has_len,
                                         dialect::SoftmaxMode mode, double scale, double p,
                                         bool causal, std::optional<uint64_t> rng_offset,
                                         const Values& in) {
  const std::string name = op->getName().getStringRef().str();
  if (has_mask || has_len)
    return absl::UnimplementedError(absl::StrCat(
        "op '", name, "' with a ", has_mask ? "mask" : "valid_seq_len",
        " has no StableHLO export yet (supported: causal or no mask, dropout)"));
  if (mode != dialect::SoftmaxMode::none)
    return absl::UnimplementedError(
        absl::StrCat("op '", name, "' with a softmax_mode has no StableHLO export yet"));
  if (in[0].shape.size() < 3 || in[1].shape.size() != in[0].shape.size() ||
      !std::equal(in[0].shape.begin(), in[0].shape.end() - 2, in[1].shape.begin()) ||
      !std::equal(in[0].shape.begin(), in[0].shape.end() - 2, in[2].shape.begin()))
    return absl::UnimplementedError(absl::StrCat(
        "op '", name, "' whose query, key and value differ in batch shape (broadcast heads) "
        "has no StableHLO export yet"));
  return Attention{scale, p, causal, rng_offset};
}

}  // namespace

absl::StatusOr<Values> lower_sdpa(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values& out) {
  auto sdpa = mlir::cast<dialect::SdpaOp>(op);
  if (op->getNumResults() != 1)
    return absl::UnimplementedError(
        "op 'mstep.sdpa' returning probabilities, a dropout mask or saved probabilities has no "
        "StableHLO export yet");
  MSTEP_ASSIGN_OR_RETURN(
      Attention a, read_attention(op, sdpa.getMask() != nullptr, sdpa.getValidSeqLen() != nullptr,
                                  sdpa.getSoftmaxMode(), sdpa.getScale().convertToDouble(),
                                  sdpa.getDropoutP().convertToDouble(), sdpa.getIsCausal(),
                                  sdpa.getRngOffset(), in));
  const std::string decomposition =
      f.add_function("mstep_sdpa", in, [&](FunctionText& g, const Values& args) {
        const Value p = probabilities(g, args[0], args[1], a);
        const auto d = dropout_factor(g, args.size() > 3 ? &args[3] : nullptr, a, p.shape, p.elem);
        const Value pd = d ? g.same("stablehlo.multiply", {p, *d}) : p;
        return Values{batched_dot(g, pd, args[2], 1, 0)};
      });
  return f.op_results("stablehlo.composite", in, out, composite_attrs(a, "mstep.sdpa", decomposition));
}

absl::StatusOr<Values> lower_sdpa_backward(FunctionText& f, mlir::Operation* op, const Values& in,
                                           const Values& out) {
  auto bw = mlir::cast<dialect::SdpaBackwardOp>(op);
  if (bw.getSavedProbs() || bw.getGradMask())
    return absl::UnimplementedError(
        "op 'mstep.sdpa_backward' with saved probabilities or a mask gradient has no StableHLO "
        "export yet");
  const Values qkv(in.begin() + 1, in.begin() + 4);
  MSTEP_ASSIGN_OR_RETURN(
      Attention a, read_attention(op, bw.getMask() != nullptr, bw.getValidSeqLen() != nullptr,
                                  bw.getSoftmaxMode(), bw.getScale().convertToDouble(),
                                  bw.getDropoutP().convertToDouble(), bw.getIsCausal(),
                                  bw.getRngOffset(), qkv));
  const std::string decomposition =
      f.add_function("mstep_sdpa_backward", in, [&](FunctionText& g, const Values& args) {
        const Value &grad = args[0], &q = args[1], &k = args[2], &v = args[3];
        const Value p = probabilities(g, q, k, a);
        const auto d = dropout_factor(g, args.size() > 4 ? &args[4] : nullptr, a, p.shape, p.elem);
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
        return Values{dq, dk, dv};
      });
  return f.op_results("stablehlo.composite", in, out,
                      composite_attrs(a, "mstep.sdpa_backward", decomposition));
}

}  // namespace mstep::stablehlo
