// The mstep ops as StableHLO. Elementwise ops broadcast their operands to
// the result's shape explicitly (StableHLO does not broadcast); reductions
// are stablehlo.reduce with an add / maximum / minimum region, keepdim a
// reshape after it; matmul is dot_general; softmax, log_softmax,
// nll_loss, layer_norm and rms_norm are written out in those ops;
// index_select is a gather, index_add a scatter with an add region,
// slice_scatter a dynamic_update_slice; dropout draws mstep's Philox stream
// (StableHloPhilox.h); attention is a composite (StableHloAttention.h);
// convolutions, pools, argmax/var and gather/scatter_add/pad/triu/tril
// have files of their own (StableHloOpFamilies.h). An op with no entry is
// Unimplemented.
#include "lib/compiler/stablehlo/StableHloOps.h"

#include <array>
#include <cmath>
#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/compiler/stablehlo/StableHloAttention.h"
#include "lib/compiler/stablehlo/StableHloOpFamilies.h"
#include "lib/compiler/stablehlo/StableHloPhilox.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::stablehlo {

namespace {

using Lowering = std::function<absl::StatusOr<Values>(FunctionText&, mlir::Operation*,
                                                      const Values&, const Values&)>;

double f64_attr(mlir::Operation* op, llvm::StringRef name) {
  return op->getAttrOfType<mlir::FloatAttr>(name).getValueAsDouble();
}

/// The shape without `dims`.
std::vector<int64_t> kept_dims(const std::vector<int64_t>& shape, const std::vector<int64_t>& dims,
                               std::vector<int64_t>* kept_index = nullptr) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end()) {
      out.push_back(shape[i]);
      if (kept_index) kept_index->push_back(static_cast<int64_t>(i));
    }
  return out;
}

/// A reduction's result (over `dims` of `shape`) broadcast back to `shape`.
Value unreduce(FunctionText& f, const Value& reduced, const std::vector<int64_t>& shape,
               const std::vector<int64_t>& dims) {
  std::vector<int64_t> kept;
  kept_dims(shape, dims, &kept);
  return f.broadcast_in_dim(reduced, shape, kept);
}

Lowering unary(std::string name) {
  return [name](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
    return Values{f.same(name, {in[0]})};
  };
}

/// Elementwise binary op with the operands broadcast to the result's shape.
Lowering binary(std::string name) {
  return [name](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
    return Values{f.op(name, {f.broadcast(in[0], out[0].shape), f.broadcast(in[1], out[0].shape)},
                       out[0].shape, out[0].elem)};
  };
}

Lowering comparison(std::string direction) {
  return [direction](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
    return Values{f.compare(f.broadcast(in[0], out[0].shape), f.broadcast(in[1], out[0].shape),
                            direction)};
  };
}

Value sum(FunctionText& f, const Value& v, const std::vector<int64_t>& dims) {
  return f.reduce(v, dims, Reducer::add, f.reduce_init(Reducer::add, v.elem));
}

Lowering reduction(Reducer reducer, bool mean) {
  return [reducer, mean](FunctionText& f, mlir::Operation* op, const Values& in, const Values& out) -> absl::StatusOr<Values> {
    const std::vector<int64_t> dims = array_attr(op, "dims");
    Value x = in[0];
    if (reducer == Reducer::add && x.elem == "i1") x = f.convert(x, out[0].elem);
    // 16-bit float sums accumulate in f32 and round once, as ref's.
    if (reducer == Reducer::add) x = f.convert(x, accumulator_type(x.elem));
    Value r = f.reduce(x, dims, reducer, f.reduce_init(reducer, x.elem));
    if (mean) {
      int64_t count = 1;
      for (int64_t d : dims) count *= x.shape[d];
      r = f.same("stablehlo.divide", {r, f.splat(static_cast<double>(count), r.shape, r.elem)});
    }
    return Values{f.convert(f.reshape(r, out[0].shape), out[0].elem)};
  };
}

absl::StatusOr<Values> logsumexp(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values& out) {
  const std::vector<int64_t> dims = array_attr(op, "dims");
  const Value& x = in[0];
  const Value m = f.reduce(x, dims, Reducer::max, f.reduce_init(Reducer::max, x.elem));
  // An all -inf row keeps -inf (not NaN from -inf - -inf).
  const Value finite = f.select(f.op("stablehlo.is_finite", {m}, m.shape, "i1"), m,
                                f.splat(0, m.shape, m.elem));
  const Value e = f.same("stablehlo.exponential",
                         {f.same("stablehlo.subtract", {x, unreduce(f, finite, x.shape, dims)})});
  const Value r = f.same("stablehlo.add", {f.same("stablehlo.log", {sum(f, e, dims)}), finite});
  return Values{f.reshape(r, out[0].shape)};
}

absl::StatusOr<Values> softmax(FunctionText& f, mlir::Operation* op, const Values& in, bool log) {
  const std::vector<int64_t> dims{i64_attr(op, "dim")};
  const Value& x = in[0];
  const Value m = f.reduce(x, dims, Reducer::max, f.reduce_init(Reducer::max, x.elem));
  const Value shifted = f.same("stablehlo.subtract", {x, unreduce(f, m, x.shape, dims)});
  const Value e = f.same("stablehlo.exponential", {shifted});
  const Value s = unreduce(f, sum(f, e, dims), x.shape, dims);
  if (log) return Values{f.same("stablehlo.subtract", {shifted, f.same("stablehlo.log", {s})})};
  return Values{f.same("stablehlo.divide", {e, s})};
}

absl::StatusOr<Values> matmul(FunctionText& f, mlir::Operation*, const Values& in,
                              const Values& out) {
  Value a = in[0], b = in[1];
  const std::vector<int64_t>& shape = out[0].shape;
  const size_t rank = shape.size();
  std::vector<int64_t> batch;
  std::string dims;
  if (b.shape.size() == 2) {
    // [..., m, k] x [k, n]: no batch dimensions in the dot.
    dims = absl::StrCat("lhs_contracting_dimensions = [", a.shape.size() - 1,
                        "], rhs_contracting_dimensions = [0]");
  } else {
    std::vector<int64_t> a_shape(shape.begin(), shape.end() - 2), b_shape = a_shape;
    a_shape.insert(a_shape.end(), a.shape.end() - 2, a.shape.end());
    b_shape.insert(b_shape.end(), b.shape.end() - 2, b.shape.end());
    a = f.broadcast(a, a_shape);
    b = f.broadcast(b, b_shape);
    for (size_t i = 0; i + 2 < rank; ++i) batch.push_back(static_cast<int64_t>(i));
    const std::string bd = absl::StrJoin(batch, ", ");
    dims = absl::StrCat("lhs_batching_dimensions = [", bd, "], rhs_batching_dimensions = [", bd,
                        "], lhs_contracting_dimensions = [", rank - 1,
                        "], rhs_contracting_dimensions = [", rank - 2, "]");
  }
  return Values{f.op("stablehlo.dot_general", {a, b}, shape, out[0].elem,
                     absl::StrCat("dot_dimension_numbers = #stablehlo.dot<", dims,
                                  ">, precision_config = [#stablehlo<precision HIGHEST>, "
                                  "#stablehlo<precision HIGHEST>]"))};
}

absl::StatusOr<Values> nll_loss(FunctionText& f, mlir::Operation* op, const Values& in,
                                const Values& out) {
  Value lp = in[0], target = in[1];
  if (lp.shape.size() == 1) {
    lp = f.reshape(lp, {1, lp.shape[0]});
    target = f.reshape(target, {1});
  }
  const int64_t n = lp.shape[0];
  const Value picked_mask =
      f.compare(f.iota(lp.shape, 1, target.elem), f.broadcast_in_dim(target, lp.shape, {0}), "EQ");
  const Value picked = sum(f, f.select(picked_mask, lp, f.splat(0, lp.shape, lp.elem)), {1});
  const Value valid = f.compare(
      target, f.splat(static_cast<double>(i64_attr(op, "ignore_index")), {n}, target.elem), "NE");
  const Value loss = f.select(valid, f.same("stablehlo.negate", {picked}), f.splat(0, {n}, lp.elem));
  const auto reduction = op->getAttrOfType<dialect::LossReductionAttr>("reduction").getValue();
  if (reduction == dialect::LossReduction::none) return Values{f.reshape(loss, out[0].shape)};
  const Value total = sum(f, loss, {0});
  if (reduction == dialect::LossReduction::sum) return Values{total};
  const Value count = sum(f, f.convert(valid, lp.elem), {0});
  return Values{f.same("stablehlo.divide", {total, count})};
}

absl::StatusOr<Values> dropout(FunctionText& f, mlir::Operation* op, const Values& in,
                               const Values&) {
  const double p = f64_attr(op, "p");
  const Value& x = in[0];
  const Value keep = philox_keep_mask(f, in[1], i64_attr(op, "offset"), p, x.shape);
  const Value scale = f.select(keep, f.splat(1.0 / (1.0 - p), x.shape, x.elem),
                               f.splat(0, x.shape, x.elem));
  return Values{f.same("stablehlo.multiply", {x, scale})};
}

/// mstep.rand / mstep.randn: the ref kernels' transforms of Philox's words
/// (RefCreation.cpp): uniform keeps as many bits as the dtype's
/// significand; normal is Box-Muller on two words, in f32.
absl::StatusOr<Values> random(FunctionText& f, mlir::Operation* op, const Values& in,
                              const Values& out, bool normal) {
  const std::string& elem = out[0].elem;
  int64_t n = 1;
  for (int64_t d : out[0].shape) n *= d;
  const std::array<Value, 2> w = philox_words(f, in[0], i64_attr(op, "offset"), n);
  auto shifted = [&](const Value& v, int bits) {
    return f.same("stablehlo.shift_right_logical", {v, f.splat(bits, v.shape, v.elem)});
  };
  auto mul = [&](const Value& a, double c) {
    return f.same("stablehlo.multiply", {a, f.splat(c, a.shape, a.elem)});
  };
  Value r;
  if (normal) {
    const Value u1 = mul(f.same("stablehlo.add", {f.convert(shifted(w[0], 8), "f32"),
                                                  f.splat(1, {n}, "f32")}),
                         static_cast<double>(1.0f / 16777217.0f));
    const Value u2 = mul(f.convert(shifted(w[1], 8), "f32"), 1.0 / 16777216.0);
    const Value radius = f.same("stablehlo.sqrt", {mul(f.same("stablehlo.log", {u1}), -2.0)});
    r = f.same("stablehlo.multiply",
               {radius, f.same("stablehlo.cosine", {mul(u2, static_cast<double>(6.2831853071795864f))})});
  } else {
    const int digits = elem == "bf16" ? 8 : elem == "f16" ? 11 : 24;
    r = mul(f.convert(shifted(w[0], 8 + 24 - digits), "f32"), std::ldexp(1.0, -digits));
  }
  return Values{f.reshape(f.convert(r, elem), out[0].shape)};
}

absl::StatusOr<Values> arange(FunctionText& f, mlir::Operation* op, const Values&,
                              const Values& out) {
  // As the ref kernel: start + i * step in f64, then through f32 (the
  // compute type of every float dtype) to the dtype; integers in i64.
  const double start = f64_attr(op, "start"), step = f64_attr(op, "step");
  const bool is_float = FunctionText::is_float(out[0].elem);
  const std::string wide = is_float ? "f64" : "i64";
  Value r = f.iota(out[0].shape, 0, wide);
  if (step != 1) r = f.same("stablehlo.multiply", {r, f.splat(step, r.shape, wide)});
  if (start != 0) r = f.same("stablehlo.add", {r, f.splat(start, r.shape, wide)});
  if (is_float) r = f.convert(r, "f32");
  return Values{f.convert(r, out[0].elem)};
}

absl::StatusOr<Values> cast(FunctionText& f, mlir::Operation*, const Values& in,
                            const Values& out) {
  // To bool: nonzero is true (a convert's rounding would not say so).
  if (out[0].elem == "i1" && in[0].elem != "i1")
    return Values{f.compare(in[0], f.splat(0, in[0].shape, in[0].elem), "NE")};
  return Values{f.convert(in[0], out[0].elem)};
}

absl::StatusOr<Values> gelu(FunctionText& f, mlir::Operation* op, const Values& in,
                            const Values&) {
  const Value& x = in[0];
  auto c = [&](double v) { return f.splat(v, x.shape, x.elem); };
  auto mul = [&](const Value& a, const Value& b) { return f.same("stablehlo.multiply", {a, b}); };
  auto add = [&](const Value& a, const Value& b) { return f.same("stablehlo.add", {a, b}); };
  auto approx = op->getAttrOfType<dialect::GeluApproximationAttr>("approximate");
  Value inner;
  if (approx && approx.getValue() == dialect::GeluApproximation::tanh) {
    // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    const Value x3 = mul(mul(x, x), x);
    inner = f.same("stablehlo.tanh",
                   {mul(c(std::sqrt(2.0 / M_PI)), add(x, mul(c(0.044715), x3)))});
  } else {
    // 0.5 x (1 + erf(x / sqrt(2))); erf is CHLO's, which both consumers lower.
    inner = f.op("chlo.erf", {mul(x, c(M_SQRT1_2))}, x.shape, x.elem);
  }
  return Values{mul(mul(c(0.5), x), add(c(1), inner))};
}

/// The last normalized_ndim dims of `x` (layer_norm, rms_norm).
std::vector<int64_t> normalized_dims(mlir::Operation* op, const Value& x) {
  const auto r = static_cast<int64_t>(x.shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = r - i64_attr(op, "normalized_ndim"); d < r; ++d) dims.push_back(d);
  return dims;
}

/// The mean of `v` over `dims` (reduced away).
Value mean_over(FunctionText& f, const Value& v, const std::vector<int64_t>& dims) {
  int64_t count = 1;
  for (int64_t d : dims) count *= v.shape[d];
  const Value s = sum(f, v, dims);
  return f.same("stablehlo.divide", {s, f.splat(static_cast<double>(count), s.shape, s.elem)});
}

absl::StatusOr<Values> layer_norm(FunctionText& f, mlir::Operation* op, const Values& in,
                                  const Values&) {
  auto ln = mlir::cast<dialect::LayerNormOp>(op);
  const Value& x = in[0];
  const std::vector<int64_t> dims = normalized_dims(op, x);
  auto mean = [&](const Value& v) { return unreduce(f, mean_over(f, v, dims), x.shape, dims); };
  const Value centered = f.same("stablehlo.subtract", {x, mean(x)});
  const Value var = mean(f.same("stablehlo.multiply", {centered, centered}));
  Value y = f.same("stablehlo.multiply",
                   {centered, f.same("stablehlo.rsqrt",
                                     {f.same("stablehlo.add", {var, f.splat(f64_attr(op, "eps"), x.shape, x.elem)})})});
  size_t next = 1;
  if (ln.getWeight()) y = f.same("stablehlo.multiply", {y, f.broadcast(in[next++], x.shape)});
  if (ln.getBias()) y = f.same("stablehlo.add", {y, f.broadcast(in[next++], x.shape)});
  return Values{y};
}

absl::StatusOr<Values> rms_norm(FunctionText& f, mlir::Operation* op, const Values& in,
                                const Values&) {
  // x * rsqrt(mean(x^2) + eps) * weight over the last normalized_ndim dims.
  const Value& x = in[0];
  const std::vector<int64_t> dims = normalized_dims(op, x);
  const Value mean = mean_over(f, f.same("stablehlo.multiply", {x, x}), dims);
  const Value inv = f.same("stablehlo.rsqrt",
                           {f.same("stablehlo.add", {mean, f.splat(f64_attr(op, "eps"), mean.shape, mean.elem)})});
  Value y = f.same("stablehlo.multiply", {x, unreduce(f, inv, x.shape, dims)});
  if (in.size() > 1) y = f.same("stablehlo.multiply", {y, f.broadcast(in[1], x.shape)});
  return Values{y};
}

/// The dimension positions of `shape` other than `dim`.
std::vector<int64_t> all_but(size_t rank, int64_t dim) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < rank; ++i)
    if (static_cast<int64_t>(i) != dim) out.push_back(static_cast<int64_t>(i));
  return out;
}

std::string join(const std::vector<int64_t>& v) { return absl::StrJoin(v, ", "); }

absl::StatusOr<Values> index_select(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out) {
  const Value &x = in[0], &index = in[1];
  const int64_t dim = i64_attr(op, "dim");
  if (index.shape.size() != 1)
    return absl::UnimplementedError("op 'mstep.index_select' with an index that is not 1-d has no StableHLO export yet");
  std::vector<int64_t> slice = x.shape;
  slice[dim] = 1;
  return Values{f.op("stablehlo.gather", {x, index}, out[0].shape, x.elem,
                     absl::StrCat("dimension_numbers = #stablehlo.gather<offset_dims = [",
                                  join(all_but(x.shape.size(), dim)), "], collapsed_slice_dims = [",
                                  dim, "], start_index_map = [", dim,
                                  "], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = ",
                                  i64_array(slice)))};
}

absl::StatusOr<Values> index_add(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values& out) {
  const Value &x = in[0], &index = in[1], &source = in[2];
  const int64_t dim = i64_attr(op, "dim");
  if (index.shape.size() != 1)
    return absl::UnimplementedError("op 'mstep.index_add' with an index that is not 1-d has no StableHLO export yet");
  Value r{"", out[0].shape, out[0].elem};
  const std::vector<Value> results = f.op_results(
      "stablehlo.scatter", {x, index, source}, {r},
      absl::StrCat("indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<"
                   "update_window_dims = [", join(all_but(source.shape.size(), dim)),
                   "], inserted_window_dims = [", dim, "], scatter_dims_to_operand_dims = [", dim,
                   "], index_vector_dim = 1>, unique_indices = false"),
      FunctionText::region(Reducer::add, x.elem));
  return results;
}

absl::StatusOr<Values> slice_scatter(FunctionText& f, mlir::Operation* op, const Values& in,
                                     const Values& out) {
  if (i64_attr(op, "step") != 1)
    return absl::UnimplementedError("op 'mstep.slice_scatter' with a step other than 1 has no StableHLO export yet");
  const int64_t dim = i64_attr(op, "dim");
  Values operands{in[0], in[1]};
  for (size_t d = 0; d < in[0].shape.size(); ++d)
    operands.push_back(f.constant(static_cast<int64_t>(d) == dim ? static_cast<double>(i64_attr(op, "start")) : 0, "i64"));
  return Values{f.op("stablehlo.dynamic_update_slice", operands, out[0].shape, out[0].elem)};
}

const absl::flat_hash_map<std::string, Lowering>& table() {
  static const auto* t = new absl::flat_hash_map<std::string, Lowering>{
      {"mstep.constant",
       [](FunctionText& f, mlir::Operation* op, const Values&, const Values& out) -> absl::StatusOr<Values> {
         return Values{f.constant(f64_attr(op, "value"), out[0].elem)};
       }},
      {"mstep.full",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
         return Values{f.broadcast(in[0], out[0].shape)};
       }},
      {"mstep.arange", arange},
      {"mstep.rand",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values& out) {
         return random(f, op, in, out, false);
       }},
      {"mstep.randn",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values& out) {
         return random(f, op, in, out, true);
       }},
      {"mstep.neg", unary("stablehlo.negate")},
      {"mstep.abs", unary("stablehlo.abs")},
      {"mstep.exp", unary("stablehlo.exponential")},
      {"mstep.log", unary("stablehlo.log")},
      {"mstep.log1p", unary("stablehlo.log_plus_one")},
      {"mstep.sqrt", unary("stablehlo.sqrt")},
      {"mstep.rsqrt", unary("stablehlo.rsqrt")},
      {"mstep.sin", unary("stablehlo.sine")},
      {"mstep.cos", unary("stablehlo.cosine")},
      {"mstep.tanh", unary("stablehlo.tanh")},
      {"mstep.sigmoid", unary("stablehlo.logistic")},
      {"mstep.logical_not", unary("stablehlo.not")},
      {"mstep.erf",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.op("chlo.erf", {in[0]}, in[0].shape, in[0].elem)};
       }},
      {"mstep.relu",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.same("stablehlo.maximum", {in[0], f.splat(0, in[0].shape, in[0].elem)})};
       }},
      {"mstep.silu",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.same("stablehlo.multiply", {in[0], f.same("stablehlo.logistic", {in[0]})})};
       }},
      {"mstep.gelu", gelu},
      {"mstep.reciprocal",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.same("stablehlo.divide", {f.splat(1, in[0].shape, in[0].elem), in[0]})};
       }},
      {"mstep.isnan",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.compare(in[0], in[0], "NE")};
       }},
      {"mstep.isfinite",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.op("stablehlo.is_finite", {in[0]}, in[0].shape, "i1")};
       }},
      {"mstep.cast", cast},
      {"mstep.add", binary("stablehlo.add")},
      {"mstep.sub", binary("stablehlo.subtract")},
      {"mstep.mul", binary("stablehlo.multiply")},
      {"mstep.div", binary("stablehlo.divide")},
      {"mstep.pow", binary("stablehlo.power")},
      {"mstep.maximum", binary("stablehlo.maximum")},
      {"mstep.minimum", binary("stablehlo.minimum")},
      {"mstep.logical_and", binary("stablehlo.and")},
      {"mstep.logical_or", binary("stablehlo.or")},
      {"mstep.eq", comparison("EQ")},
      {"mstep.ne", comparison("NE")},
      {"mstep.lt", comparison("LT")},
      {"mstep.le", comparison("LE")},
      {"mstep.gt", comparison("GT")},
      {"mstep.ge", comparison("GE")},
      {"mstep.where",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
         const std::vector<int64_t>& s = out[0].shape;
         return Values{f.select(f.broadcast(in[0], s), f.broadcast(in[1], s), f.broadcast(in[2], s))};
       }},
      {"mstep.sum", reduction(Reducer::add, false)},
      {"mstep.mean", reduction(Reducer::add, true)},
      {"mstep.max", reduction(Reducer::max, false)},
      {"mstep.min", reduction(Reducer::min, false)},
      {"mstep.logsumexp", logsumexp},
      {"mstep.reshape",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
         return Values{f.reshape(in[0], out[0].shape)};
       }},
      {"mstep.permute",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values&) -> absl::StatusOr<Values> {
         return Values{f.transpose(in[0], array_attr(op, "perm"))};
       }},
      {"mstep.expand",
       [](FunctionText& f, mlir::Operation*, const Values& in, const Values& out) -> absl::StatusOr<Values> {
         return Values{f.broadcast(in[0], out[0].shape)};
       }},
      {"mstep.slice",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values&) -> absl::StatusOr<Values> {
         const Value& x = in[0];
         const auto d = static_cast<size_t>(i64_attr(op, "dim"));
         std::vector<int64_t> start(x.shape.size(), 0), limit = x.shape, strides(x.shape.size(), 1);
         start[d] = i64_attr(op, "start");
         limit[d] = i64_attr(op, "end");
         strides[d] = i64_attr(op, "step");
         return Values{f.slice(x, start, limit, strides)};
       }},
      {"mstep.cat",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values& out) -> absl::StatusOr<Values> {
         return Values{f.op("stablehlo.concatenate", in, out[0].shape, out[0].elem,
                            absl::StrCat("dimension = ", i64_attr(op, "dim"), " : i64"))};
       }},
      {"mstep.matmul", matmul},
      {"mstep.softmax",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values&) {
         return softmax(f, op, in, false);
       }},
      {"mstep.log_softmax",
       [](FunctionText& f, mlir::Operation* op, const Values& in, const Values&) {
         return softmax(f, op, in, true);
       }},
      {"mstep.nll_loss", nll_loss},
      {"mstep.dropout", dropout},
      {"mstep.layer_norm", layer_norm},
      {"mstep.rms_norm", rms_norm},
      {"mstep.index_select", index_select},
      {"mstep.index_add", index_add},
      {"mstep.slice_scatter", slice_scatter},
      {"mstep.conv2d", lower_conv2d},
      {"mstep.conv2d_input_grad", lower_conv2d_input_grad},
      {"mstep.conv2d_weight_grad", lower_conv2d_weight_grad},
      {"mstep.max_pool2d", lower_max_pool2d},
      {"mstep.avg_pool2d", lower_avg_pool2d},
      {"mstep.max_pool2d_grad", lower_max_pool2d_grad},
      {"mstep.avg_pool2d_grad", lower_avg_pool2d_grad},
      {"mstep.argmax", lower_argmax},
      {"mstep.var", lower_var},
      {"mstep.gather", lower_gather},
      {"mstep.scatter_add", lower_scatter_add},
      {"mstep.pad", lower_pad},
      {"mstep.triu", lower_triu},
      {"mstep.tril", lower_tril},
      {"mstep.sdpa", lower_sdpa},
      {"mstep.sdpa_backward", lower_sdpa_backward},
  };
  return *t;
}

}  // namespace

absl::StatusOr<std::vector<Value>> lower_op(FunctionText& f, mlir::Operation* op,
                                            const std::vector<Value>& operands,
                                            const std::vector<Value>& results) {
  const std::string name = op->getName().getStringRef().str();
  auto it = table().find(name);
  if (name == "mstep.custom")
    return absl::UnimplementedError(absl::StrCat(
        "custom op '", op->getAttrOfType<mlir::StringAttr>("op_name").getValue().str(),
        "' (mstep.custom) has no StableHLO export: its kernels are mstep's, which a StableHLO "
        "consumer cannot call; write it with built-in ops for the export, or export the step "
        "without it"));
  if (it == table().end())
    return absl::UnimplementedError(absl::StrCat(
        "op '", name, "' has no StableHLO export yet (supported: constant/full/arange/rand/randn, "
        "elementwise ops, sum/mean/max/min/argmax/var/logsumexp, reshape/permute/expand/slice/"
        "cat/pad/triu/tril/slice_scatter, index_select/index_add/gather/scatter_add, matmul, "
        "conv2d, max/avg_pool2d and their gradients, softmax, log_softmax, layer_norm, "
        "rms_norm, nll_loss, dropout, sdpa); run the step without it, or add its lowering to "
        "lib/compiler/stablehlo/StableHloOps.cpp"));
  return it->second(f, op, operands, results);
}

}  // namespace mstep::stablehlo
