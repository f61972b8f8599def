// argmax and var as StableHLO reductions.
//
// argmax is one stablehlo.reduce over (value, index) pairs whose region
// keeps the pair ref's kernel (RefReduction.cpp) would return, under an
// order the reduction may apply in any tree shape: a NaN beats any number,
// a larger value beats a smaller one, and between equal values (or two
// NaNs) the smaller index wins. So the FIRST maximum wins ties, and the
// first NaN wins where there is one, as ref and PyTorch. Over every dim
// the input is flattened first, so the index is row-major.
//
// var is two passes as the ref kernel: the mean, then the squared
// deviations summed and divided by max(0, n - correction) (0 gives inf or
// NaN, as ref). 16-bit floats compute in f32 and round once at the end.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/compiler/stablehlo/StableHloOpFamilies.h"

namespace mstep::stablehlo {

namespace {

/// The (value, index) combiner of argmax (see the file comment).
std::string argmax_region(const std::string& elem) {
  const Value a{"%a", {}, elem}, ia{"%ia", {}, "i64"}, b{"%b", {}, elem}, ib{"%ib", {}, "i64"};
  return FunctionText::region("am", {a, ia, b, ib}, [&](FunctionText& g) {
    const Value a_nan = g.compare(a, a, "NE"), b_nan = g.compare(b, b, "NE");
    const Value same = g.same("stablehlo.or", {g.compare(a, b, "EQ"), g.same("stablehlo.and", {a_nan, b_nan})});
    const Value a_first = g.compare(ia, ib, "LT");
    const Value pick_a = g.same(
        "stablehlo.or",
        {g.same("stablehlo.and", {a_nan, g.same("stablehlo.not", {b_nan})}),
         g.same("stablehlo.or", {g.compare(a, b, "GT"), g.same("stablehlo.and", {same, a_first})})});
    return Values{g.select(pick_a, a, b), g.select(pick_a, ia, ib)};
  });
}

}  // namespace

absl::StatusOr<Values> lower_argmax(FunctionText& f, mlir::Operation* op, const Values& in,
                                    const Values& out) {
  Value x = in[0];
  std::vector<int64_t> dims = array_attr(op, "dims");
  if (dims.size() > 1 || x.shape.empty()) {
    int64_t n = 1;
    for (int64_t d : x.shape) n *= d;
    x = f.reshape(x, {n});
    dims = {0};
  }
  const Value index = f.iota(x.shape, dims[0], "i64");
  // The identity: the lowest value at the largest index loses to any pair.
  const Value init_v = f.reduce_init(Reducer::max, x.elem);
  const Value init_i = f.op("stablehlo.constant", {}, {}, "i64",
                            absl::StrCat("value = dense<", std::numeric_limits<int64_t>::max(),
                                         "> : tensor<i64>"));
  std::vector<int64_t> kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (static_cast<int64_t>(d) != dims[0]) kept.push_back(x.shape[d]);
  const Values r = f.op_results("stablehlo.reduce", {x, index, init_v, init_i},
                                {Value{"", kept, x.elem}, Value{"", kept, "i64"}},
                                absl::StrCat("dimensions = ", i64_array(dims)), argmax_region(x.elem));
  return Values{f.reshape(r[1], out[0].shape)};
}

absl::StatusOr<Values> lower_var(FunctionText& f, mlir::Operation* op, const Values& in,
                                 const Values& out) {
  const std::vector<int64_t> dims = array_attr(op, "dims");
  const Value x = f.convert(in[0], in[0].elem == "f64" ? "f64" : "f32");
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape[d];
  std::vector<int64_t> kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
      kept.push_back(static_cast<int64_t>(d));
  auto sum = [&](const Value& v) {
    return f.reduce(v, dims, Reducer::add, f.reduce_init(Reducer::add, v.elem));
  };
  const Value s = sum(x);
  const Value mean = f.same("stablehlo.divide", {s, f.splat(static_cast<double>(n), s.shape, s.elem)});
  const Value d = f.same("stablehlo.subtract", {x, f.broadcast_in_dim(mean, x.shape, kept)});
  const Value ssd = sum(f.same("stablehlo.multiply", {d, d}));
  const double divisor = static_cast<double>(std::max<int64_t>(0, n - i64_attr(op, "correction")));
  const Value v = f.same("stablehlo.divide", {ssd, f.splat(divisor, ssd.shape, ssd.elem)});
  return Values{f.reshape(f.convert(v, out[0].elem), out[0].shape)};
}

}  // namespace mstep::stablehlo
