// StableHloText: the generic-form printer of the StableHLO exporter.
#include "lib/compiler/stablehlo/StableHloText.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallString.h"

namespace mstep::stablehlo {

namespace {

const llvm::fltSemantics& semantics(const std::string& elem) {
  if (elem == "f64") return llvm::APFloat::IEEEdouble();
  if (elem == "f16") return llvm::APFloat::IEEEhalf();
  if (elem == "bf16") return llvm::APFloat::BFloat();
  return llvm::APFloat::IEEEsingle();
}

/// A float in the element type as its bit pattern ("0x3F800000"), which the
/// parser reads exactly: no decimal round trip, and inf and NaN print too.
std::string float_literal(double value, const std::string& elem) {
  llvm::APFloat f(value);
  bool lost = false;
  f.convert(semantics(elem), llvm::APFloat::rmNearestTiesToEven, &lost);
  llvm::SmallString<24> hex;
  f.bitcastToAPInt().toStringUnsigned(hex, 16);
  const size_t digits = llvm::APFloat::getSizeInBits(semantics(elem)) / 4;
  return absl::StrCat("0x", std::string(digits - std::min(digits, hex.size()), '0'),
                      std::string(hex.str()));
}

std::string reducer_op(Reducer r) {
  switch (r) {
    case Reducer::add: return "stablehlo.add";
    case Reducer::max: return "stablehlo.maximum";
    case Reducer::min: return "stablehlo.minimum";
  }
  return "";
}

}  // namespace

std::string i64_array(absl::Span<const int64_t> values) {
  return values.empty() ? "array<i64>" : absl::StrCat("array<i64: ", absl::StrJoin(values, ", "), ">");
}

std::string padding_attr(absl::Span<const int64_t> low, absl::Span<const int64_t> high) {
  std::vector<std::string> rows;
  for (size_t i = 0; i < low.size(); ++i) rows.push_back(absl::StrCat("[", low[i], ", ", high[i], "]"));
  return absl::StrCat("dense<[", absl::StrJoin(rows, ", "), "]> : tensor<", low.size(), "x2xi64>");
}

std::string FunctionText::type(absl::Span<const int64_t> shape, const std::string& elem) {
  std::string t = "tensor<";
  for (int64_t d : shape) absl::StrAppend(&t, d, "x");
  return absl::StrCat(t, elem, ">");
}

bool FunctionText::is_float(const std::string& elem) {
  return elem == "f32" || elem == "f64" || elem == "f16" || elem == "bf16";
}

Value FunctionText::op(const std::string& name, absl::Span<const Value> operands,
                       std::vector<int64_t> shape, const std::string& elem,
                       const std::string& attrs) {
  Value out{fresh(), std::move(shape), elem};
  std::vector<std::string> names, types;
  for (const Value& v : operands) {
    names.push_back(v.name);
    types.push_back(type(v));
  }
  absl::StrAppend(&text_, "    ", out.name, " = \"", name, "\"(", absl::StrJoin(names, ", "), ")",
                  attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"), " : (",
                  absl::StrJoin(types, ", "), ") -> ", type(out), "\n");
  return out;
}

std::vector<Value> FunctionText::op_results(const std::string& name,
                                            absl::Span<const Value> operands,
                                            absl::Span<const Value> result_types,
                                            const std::string& attrs, const std::string& region) {
  const std::string base = fresh();
  std::vector<Value> out;
  std::vector<std::string> names, types, result_type_names;
  for (const Value& v : operands) {
    names.push_back(v.name);
    types.push_back(type(v));
  }
  for (size_t i = 0; i < result_types.size(); ++i) {
    out.push_back({absl::StrCat(base, "#", i), result_types[i].shape, result_types[i].elem});
    result_type_names.push_back(type(result_types[i]));
  }
  absl::StrAppend(&text_, "    ", base, ":", result_types.size(), " = \"", name, "\"(",
                  absl::StrJoin(names, ", "), ")", region.empty() ? "" : " " + region,
                  attrs.empty() ? "" : absl::StrCat(" {", attrs, "}"), " : (",
                  absl::StrJoin(types, ", "), ") -> (",
                  absl::StrJoin(result_type_names, ", "), ")\n");
  return out;
}

std::string FunctionText::add_function(
    const std::string& base, absl::Span<const Value> args,
    const std::function<std::vector<Value>(FunctionText&, const std::vector<Value>&)>& body) {
  const std::string symbol = absl::StrCat(base, "_", functions_->size());
  functions_->emplace_back();  // reserves the name; filled below
  const size_t slot = functions_->size() - 1;
  FunctionText g(functions_);
  std::vector<Value> params;
  std::vector<std::string> signature;
  for (size_t i = 0; i < args.size(); ++i) {
    params.push_back({absl::StrCat("%arg", i), args[i].shape, args[i].elem});
    signature.push_back(absl::StrCat(params.back().name, ": ", type(args[i])));
  }
  const std::vector<Value> results = body(g, params);
  std::vector<std::string> names, types;
  for (const Value& v : results) {
    names.push_back(v.name);
    types.push_back(type(v));
  }
  (*functions_)[slot] = absl::StrCat(
      "  func.func private @", symbol, "(", absl::StrJoin(signature, ", "), ") -> (",
      absl::StrJoin(types, ", "), ") {\n", g.text(), "    return ", absl::StrJoin(names, ", "),
      " : ", absl::StrJoin(types, ", "), "\n  }\n");
  return "@" + symbol;
}

std::string FunctionText::region(Reducer reducer, const std::string& elem) {
  return region(reducer_op(reducer), elem);
}

std::string FunctionText::region(const std::string& op_name, const std::string& elem) {
  const std::string scalar = type({}, elem);
  return absl::StrCat("({\n    ^bb0(%lhs: ", scalar, ", %rhs: ", scalar, "):\n      %r = \"",
                      op_name, "\"(%lhs, %rhs) : (", scalar, ", ", scalar, ") -> ",
                      scalar, "\n      \"stablehlo.return\"(%r) : (", scalar, ") -> ()\n    })");
}

std::string FunctionText::region(const std::string& tag, absl::Span<const Value> params,
                                 const std::function<std::vector<Value>(FunctionText&)>& body) {
  FunctionText g;
  g.tag_ = tag;
  const std::vector<Value> results = body(g);
  std::vector<std::string> args, names, types;
  for (const Value& p : params) args.push_back(absl::StrCat(p.name, ": ", type(p)));
  for (const Value& r : results) {
    names.push_back(r.name);
    types.push_back(type(r));
  }
  return absl::StrCat("({\n    ^bb0(", absl::StrJoin(args, ", "), "):\n", g.text(),
                      "      \"stablehlo.return\"(", absl::StrJoin(names, ", "), ") : (",
                      absl::StrJoin(types, ", "), ") -> ()\n    })");
}

Value FunctionText::same(const std::string& name, absl::Span<const Value> operands) {
  return op(name, operands, operands.front().shape, operands.front().elem);
}

Value FunctionText::constant(double value, const std::string& elem) {
  std::string literal;
  if (is_float(elem))
    literal = float_literal(value, elem);
  else if (elem == "i1")
    literal = value != 0 ? "true" : "false";
  else
    literal = absl::StrCat(static_cast<int64_t>(value));
  return op("stablehlo.constant", {}, {}, elem,
            absl::StrCat("value = dense<", literal, "> : ", type({}, elem)));
}

Value FunctionText::constant_u64(uint64_t value, const std::string& elem) {
  return op("stablehlo.constant", {}, {}, elem,
            absl::StrCat("value = dense<", value, "> : ", type({}, elem)));
}

Value FunctionText::splat(double value, std::vector<int64_t> shape, const std::string& elem) {
  return broadcast(constant(value, elem), std::move(shape));
}

Value FunctionText::broadcast(const Value& v, std::vector<int64_t> shape) {
  if (v.shape == shape) return v;
  std::vector<int64_t> dims;
  const size_t lead = shape.size() - v.shape.size();
  for (size_t i = 0; i < v.shape.size(); ++i) dims.push_back(static_cast<int64_t>(lead + i));
  return broadcast_in_dim(v, std::move(shape), dims);
}

Value FunctionText::broadcast_in_dim(const Value& v, std::vector<int64_t> shape,
                                     absl::Span<const int64_t> dims) {
  return op("stablehlo.broadcast_in_dim", {v}, std::move(shape), v.elem,
            absl::StrCat("broadcast_dimensions = ", i64_array(dims)));
}

Value FunctionText::reshape(const Value& v, std::vector<int64_t> shape) {
  if (v.shape == shape) return v;
  return op("stablehlo.reshape", {v}, std::move(shape), v.elem);
}

Value FunctionText::slice(const Value& v, absl::Span<const int64_t> start,
                          absl::Span<const int64_t> limit, std::vector<int64_t> strides) {
  if (strides.empty()) strides.assign(v.shape.size(), 1);
  std::vector<int64_t> shape;
  for (size_t d = 0; d < v.shape.size(); ++d)
    shape.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  if (shape == v.shape) return v;
  return op("stablehlo.slice", {v}, std::move(shape), v.elem,
            absl::StrCat("start_indices = ", i64_array(start), ", limit_indices = ",
                         i64_array(limit), ", strides = ", i64_array(strides)));
}

Value FunctionText::pad(const Value& v, const Value& fill, absl::Span<const int64_t> low,
                        absl::Span<const int64_t> high, absl::Span<const int64_t> interior) {
  std::vector<int64_t> shape;
  for (size_t d = 0; d < v.shape.size(); ++d)
    shape.push_back(low[d] + high[d] + v.shape[d] + std::max<int64_t>(0, v.shape[d] - 1) * interior[d]);
  if (shape == v.shape) return v;
  return op("stablehlo.pad", {v, fill}, std::move(shape), v.elem,
            absl::StrCat("edge_padding_high = ", i64_array(high), ", edge_padding_low = ",
                         i64_array(low), ", interior_padding = ", i64_array(interior)));
}

Value FunctionText::transpose(const Value& v, absl::Span<const int64_t> perm) {
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(v.shape[p]);
  return op("stablehlo.transpose", {v}, std::move(shape), v.elem,
            absl::StrCat("permutation = ", i64_array(perm)));
}

Value FunctionText::convert(const Value& v, const std::string& elem) {
  if (v.elem == elem) return v;
  return op("stablehlo.convert", {v}, v.shape, elem);
}

Value FunctionText::bitcast(const Value& v, const std::string& elem) {
  return op("stablehlo.bitcast_convert", {v}, v.shape, elem);
}

Value FunctionText::compare(const Value& a, const Value& b, const std::string& direction) {
  const std::string kind = is_float(a.elem)                         ? "FLOAT"
                           : (is_unsigned(a.elem) || a.elem == "i1") ? "UNSIGNED"
                                                                     : "SIGNED";
  return op("stablehlo.compare", {a, b}, a.shape, "i1",
            absl::StrCat("compare_type = #stablehlo<comparison_type ", kind,
                         ">, comparison_direction = #stablehlo<comparison_direction ", direction,
                         ">"));
}

Value FunctionText::select(const Value& pred, const Value& a, const Value& b) {
  return op("stablehlo.select", {pred, a, b}, a.shape, a.elem);
}

Value FunctionText::iota(std::vector<int64_t> shape, int64_t dim, const std::string& elem) {
  return op("stablehlo.iota", {}, std::move(shape), elem,
            absl::StrCat("iota_dimension = ", dim, " : i64"));
}

Value FunctionText::reduce_init(Reducer reducer, const std::string& elem) {
  const double inf = std::numeric_limits<double>::infinity();
  if (reducer == Reducer::add) return constant(0, elem);
  if (is_float(elem)) return constant(reducer == Reducer::max ? -inf : inf, elem);
  if (elem == "i1") return constant(reducer == Reducer::max ? 0 : 1, elem);
  if (elem == "i32")
    return constant(reducer == Reducer::max ? std::numeric_limits<int32_t>::min()
                                            : std::numeric_limits<int32_t>::max(),
                    elem);
  // i64: the extremes are not doubles; print them directly.
  return op("stablehlo.constant", {}, {}, elem,
            absl::StrCat("value = dense<",
                         reducer == Reducer::max ? std::numeric_limits<int64_t>::min()
                                                 : std::numeric_limits<int64_t>::max(),
                         "> : ", type({}, elem)));
}

Value FunctionText::reduce(const Value& v, absl::Span<const int64_t> dims, Reducer reducer,
                           const Value& init) {
  std::vector<int64_t> shape;
  for (size_t i = 0; i < v.shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) == dims.end())
      shape.push_back(v.shape[i]);
  Value out{fresh(), shape, v.elem};
  absl::StrAppend(&text_, "    ", out.name, " = \"stablehlo.reduce\"(", v.name, ", ", init.name,
                  ") ", region(reducer, v.elem), " {dimensions = ", i64_array(dims), "} : (",
                  type(v), ", ", type({}, v.elem), ") -> ", type(out), "\n");
  return out;
}

}  // namespace mstep::stablehlo
