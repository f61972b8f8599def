// The op table of the C API: one entry per public tensor op of the C++ API
// (include/mstep/api/*.h), grouped by op family as the headers are, each a
// call into that API with its operands and attributes unpacked. The C++ API
// does every check (shapes, dtypes, promotion); an entry only maps names.
//
// Conventions the signatures follow:
//  - tensor operands come before the ';', attributes after it, named as the
//    C++ parameters, with the C++ default after '=' ("none": left out, the
//    C++ API's std::nullopt or its own default rule);
//  - `x?` marks an optional operand (NULL, or left out at the end);
//    `tensors...` any number of operands (cat, stack);
//  - `scalar` is an int, float or bool attribute; its kind is kept, so an
//    int scalar promotes as a Python int does (full(value: 2) is i64);
//  - a binary op with a scalar overload in C++ takes that scalar as the
//    attribute `other` in place of its right operand (add(x; other: 2)), and
//    where C++ also has a scalar on the left (sub, div, pow, where) as
//    `self` in place of its left one, with NULL for that operand
//    (sub(NULL, b; self: 1) is 1 - b), the PyTorch overload names;
//  - `reduction` is "none", "mean" or "sum"; `padding_side` "left"/"right".
// Skipped: from_vector/from_buffer (the C API has its own host-data calls),
// and Tensor::scalar/fill_/copy_/backward (the C API has its own functions).
#include <algorithm>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/capi/OpTable.h"
#include "mstep/api/Attention.h"
#include "mstep/api/Creation.h"
#include "mstep/api/DynamicOps.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/Losses.h"
#include "mstep/api/NN.h"
#include "mstep/api/Reduction.h"
#include "mstep/api/ShapeOps.h"
#include "mstep/core/Error.h"

namespace mstep::capi {
namespace {

using Inputs = absl::Span<const Tensor>;
using Results = std::vector<Tensor>;

/// absl::StrCat takes absl::string_view, which is not std::string_view in
/// every abseil build.
absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

[[noreturn]] void operand_error(const OpAttrs& attrs, absl::string_view problem) {
  std::string message = absl::StrCat("mstep_op(\"", av(attrs.op()), "\"): ", problem);
  if (const OpEntry* entry = find_op(attrs.op())) {
    absl::StrAppend(&message, " Signature: ", entry->signature, ".");
  }
  throw Error(absl::InvalidArgumentError(message));
}

/// Operand `i`, which the op needs: NULL there is an error, not a crash in
/// the C++ API (which takes undefined tensors only where they are optional).
const Tensor& arg(Inputs in, size_t i, const OpAttrs& attrs) {
  if (i >= in.size() || !in[i].defined()) {
    operand_error(attrs, absl::StrCat("operand ", i,
                                      " is NULL or missing; only operands marked '?' may be."));
  }
  return in[i];
}

/// Optional operand `i`: undefined when NULL or left out.
Tensor opt_arg(Inputs in, size_t i) { return i < in.size() ? in[i] : Tensor(); }

/// Every operand of a variadic op (cat, stack), none NULL.
std::vector<Tensor> all_args(Inputs in, const OpAttrs& attrs) {
  for (size_t i = 0; i < in.size(); ++i) arg(in, i, attrs);
  return std::vector<Tensor>(in.begin(), in.end());
}

std::optional<int64_t> opt_int(OpAttrs& attrs, std::string_view name) {
  if (!attrs.has(name)) return std::nullopt;
  return attrs.get_int(name);
}

std::optional<double> opt_float(OpAttrs& attrs, std::string_view name) {
  if (!attrs.has(name)) return std::nullopt;
  return attrs.get_float(name);
}

Shape shape_attr(OpAttrs& attrs) {
  const std::vector<int64_t> dims = attrs.get_ints("shape");
  return Shape(absl::MakeConstSpan(dims));
}

Reduction reduction_attr(OpAttrs& attrs) {
  const std::string name = attrs.get_string("reduction", "mean");
  if (name == "none") return Reduction::none;
  if (name == "mean") return Reduction::mean;
  if (name == "sum") return Reduction::sum;
  operand_error(attrs, absl::StrCat("attribute 'reduction' is \"", name,
                                    "\"; use \"none\", \"mean\" or \"sum\"."));
}

/// Calls `fn` (an overload set of the C++ API) on the operands at `first`
/// and `first + 1`, either of which may be replaced by a scalar attribute:
/// `other` for the right one, and `self` for the left one when kScalarLeft
/// (the C++ API has that overload).
template <bool kScalarLeft, typename Fn>
Tensor binary(Inputs in, size_t first, OpAttrs& attrs, Fn fn) {
  const Tensor lhs = opt_arg(in, first);
  const Tensor rhs = opt_arg(in, first + 1);
  const bool self = kScalarLeft && attrs.has("self");
  const bool other = attrs.has("other");
  if (self && other) {
    operand_error(attrs, "give at most one of the scalar attributes 'self' and 'other'.");
  }
  if constexpr (kScalarLeft) {
    if (self) {
      if (lhs.defined() || !rhs.defined()) {
        operand_error(attrs, absl::StrCat("with attribute 'self', operand ", first,
                                          " must be NULL and operand ", first + 1, " a tensor."));
      }
      return fn(attrs.get_scalar("self"), rhs);
    }
  }
  if (other) {
    if (!lhs.defined() || rhs.defined()) {
      operand_error(attrs, absl::StrCat("with attribute 'other', operand ", first,
                                        " must be a tensor and operand ", first + 1,
                                        " NULL or left out."));
    }
    return fn(lhs, attrs.get_scalar("other"));
  }
  if (!lhs.defined() || !rhs.defined()) {
    operand_error(attrs, absl::StrCat("needs operands ", first, " and ", first + 1,
                                      " as tensors, or one of them as a scalar attribute."));
  }
  return fn(lhs, rhs);
}

SdpaOptions sdpa_options(Inputs in, OpAttrs& attrs) {
  SdpaOptions options;
  options.attn_mask = opt_arg(in, 3);
  options.valid_seq_len = opt_arg(in, 4);
  options.dropout_p = attrs.get_float("dropout_p", 0.0);
  options.is_causal = attrs.get_bool("is_causal", false);
  options.scale = opt_float(attrs, "scale");
  const std::string side = attrs.get_string("padding_side", "right");
  if (side == "left") {
    options.padding_side = PaddingSide::left;
  } else if (side != "right") {
    operand_error(attrs, absl::StrCat("attribute 'padding_side' is \"", side,
                                      "\"; use \"left\" or \"right\"."));
  }
  options.recompute = attrs.get_bool("recompute", true);
  return options;
}

// Entries that differ only in the C++ function they call share one body,
// the function a template argument (overloads resolve by the pointer type).
using UnaryFn = Tensor (*)(const Tensor&);
using PairFn = Tensor (*)(const Tensor&, const Tensor&);
using TensorScalarFn = Tensor (*)(const Tensor&, Scalar);
using ScalarTensorFn = Tensor (*)(Scalar, const Tensor&);
using ReductionFn = Tensor (*)(const Tensor&, absl::Span<const int64_t>, bool);

/// An op of one tensor and no attributes.
template <UnaryFn kFn> Results unary(Inputs in, OpAttrs& a) { return {kFn(arg(in, 0, a))}; }

/// An op of two tensors and no attributes.
template <PairFn kFn> Results tensor_pair(Inputs in, OpAttrs& a) {
  return {kFn(arg(in, 0, a), arg(in, 1, a))};
}

/// A binary op with the C++ overloads tensor-tensor, tensor-scalar
/// (`other`) and, when kScalarLeft, scalar-tensor (`self`; kST unused
/// otherwise).
template <bool kScalarLeft, PairFn kTT, TensorScalarFn kTS, ScalarTensorFn kST>
Results binary_overloads(Inputs in, OpAttrs& a) {
  return {binary<kScalarLeft>(in, 0, a, [](const auto& x, const auto& y) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Scalar>) {
      return kST(x, y);
    } else if constexpr (std::is_same_v<std::decay_t<decltype(y)>, Scalar>) {
      return kTS(x, y);
    } else {
      return kTT(x, y);
    }
  })};
}
/// add, mul, eq, ...: a tensor and a tensor or `other`.
template <PairFn kTT, TensorScalarFn kTS> Results binary_op(Inputs in, OpAttrs& a) {
  return binary_overloads<false, kTT, kTS, nullptr>(in, a);
}
/// sub, div, pow: also `self` and a tensor.
template <PairFn kTT, TensorScalarFn kTS, ScalarTensorFn kST>
Results binary_op_self(Inputs in, OpAttrs& a) {
  return binary_overloads<true, kTT, kTS, kST>(in, a);
}

/// A reduction over `dims` (empty: all) with `keepdim`.
template <ReductionFn kFn> Results reduction(Inputs in, OpAttrs& a) {
  return {
      kFn(arg(in, 0, a), a.get_ints("dims", std::vector<int64_t>{}), a.get_bool("keepdim", false))};
}

// ---- Elementwise (mstep/api/Elementwise.h, Tensor.h) ---------------------
const OpEntry kElementwiseOps[] = {
    {"neg", "neg(x)", 1, 1, unary<mstep::neg>},
    {"abs", "abs(x)", 1, 1, unary<mstep::abs>},
    {"exp", "exp(x)", 1, 1, unary<mstep::exp>},
    {"log", "log(x)", 1, 1, unary<mstep::log>},
    {"log1p", "log1p(x)", 1, 1, unary<mstep::log1p>},
    {"sqrt", "sqrt(x)", 1, 1, unary<mstep::sqrt>},
    {"rsqrt", "rsqrt(x)", 1, 1, unary<mstep::rsqrt>},
    {"sin", "sin(x)", 1, 1, unary<mstep::sin>},
    {"cos", "cos(x)", 1, 1, unary<mstep::cos>},
    {"tanh", "tanh(x)", 1, 1, unary<mstep::tanh>},
    {"sigmoid", "sigmoid(x)", 1, 1, unary<mstep::sigmoid>},
    {"relu", "relu(x)", 1, 1, unary<mstep::relu>},
    {"silu", "silu(x)", 1, 1, unary<mstep::silu>},
    {"erf", "erf(x)", 1, 1, unary<mstep::erf>},
    {"reciprocal", "reciprocal(x)", 1, 1, unary<mstep::reciprocal>},
    {"isnan", "isnan(x)", 1, 1, unary<mstep::isnan>},
    {"isfinite", "isfinite(x)", 1, 1, unary<mstep::isfinite>},
    {"logical_not", "logical_not(x)", 1, 1, unary<mstep::logical_not>},
    {"gelu", "gelu(x; approximate: string = \"none\")", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {gelu(arg(in, 0, a), a.get_string("approximate", "none"))};
     }},
    {"to", "to(x; dtype: dtype)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {to(arg(in, 0, a), a.get_dtype("dtype"))}; }},
    {"detach", "detach(x)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {arg(in, 0, a).detach()}; }},
    {"add", "add(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::add, mstep::add>},
    {"sub", "sub(a?, b?; self: scalar = none, other: scalar = none)", 1, 2,
     binary_op_self<mstep::sub, mstep::sub, mstep::sub>},
    {"mul", "mul(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::mul, mstep::mul>},
    {"div", "div(a?, b?; self: scalar = none, other: scalar = none)", 1, 2,
     binary_op_self<mstep::div, mstep::div, mstep::div>},
    {"pow", "pow(a?, b?; self: scalar = none, other: scalar = none)", 1, 2,
     binary_op_self<mstep::pow, mstep::pow, mstep::pow>},
    {"maximum", "maximum(a, b)", 2, 2, tensor_pair<mstep::maximum>},
    {"minimum", "minimum(a, b)", 2, 2, tensor_pair<mstep::minimum>},
    {"eq", "eq(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::eq, mstep::eq>},
    {"ne", "ne(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::ne, mstep::ne>},
    {"lt", "lt(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::lt, mstep::lt>},
    {"le", "le(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::le, mstep::le>},
    {"gt", "gt(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::gt, mstep::gt>},
    {"ge", "ge(a, b?; other: scalar = none)", 1, 2, binary_op<mstep::ge, mstep::ge>},
    {"logical_and", "logical_and(a, b)", 2, 2, tensor_pair<mstep::logical_and>},
    {"logical_or", "logical_or(a, b)", 2, 2, tensor_pair<mstep::logical_or>},
    {"where", "where(cond, a?, b?; self: scalar = none, other: scalar = none)", 2, 3,
     [](Inputs in, OpAttrs& a) -> Results {
       const Tensor& cond = arg(in, 0, a);
       return {binary<true>(
           in, 1, a, [&](const auto& x, const auto& y) { return mstep::where(cond, x, y); })};
     }},
};

// ---- Creation (mstep/api/Creation.h) -------------------------------------
// No operands: the result goes to the default device.
const OpEntry kCreationOps[] = {
    {"zeros", "zeros(; shape: ints, dtype: dtype = f32)", 0, 0,
     [](Inputs, OpAttrs& a) -> Results {
       return {zeros(shape_attr(a), a.get_dtype("dtype", DType::f32))};
     }},
    {"ones", "ones(; shape: ints, dtype: dtype = f32)", 0, 0,
     [](Inputs, OpAttrs& a) -> Results {
       return {ones(shape_attr(a), a.get_dtype("dtype", DType::f32))};
     }},
    {"full", "full(; shape: ints, value: scalar, dtype: dtype = none)", 0, 0,
     [](Inputs, OpAttrs& a) -> Results {
       return {full(shape_attr(a), a.get_scalar("value"), a.get_optional_dtype("dtype"))};
     }},
    {"zeros_like", "zeros_like(x)", 1, 1, unary<mstep::zeros_like>},
    {"ones_like", "ones_like(x)", 1, 1, unary<mstep::ones_like>},
    {"full_like", "full_like(x; value: scalar)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {full_like(arg(in, 0, a), a.get_scalar("value"))};
     }},
    {"arange", "arange(; start: scalar = 0, end: scalar, step: scalar = 1, dtype: dtype = none)", 0,
     0,
     [](Inputs, OpAttrs& a) -> Results {
       const std::optional<DType> dtype = a.get_optional_dtype("dtype");
       if (!a.has("start") && !a.has("step")) return {arange(a.get_scalar("end"), dtype)};
       return {arange(a.get_scalar("start", Scalar(int64_t{0})), a.get_scalar("end"),
                      a.get_scalar("step", Scalar(int64_t{1})), dtype)};
     }},
    {"rand", "rand(; shape: ints, dtype: dtype = f32)", 0, 0,
     [](Inputs, OpAttrs& a) -> Results {
       return {rand(shape_attr(a), a.get_dtype("dtype", DType::f32))};
     }},
    {"randn", "randn(; shape: ints, dtype: dtype = f32)", 0, 0,
     [](Inputs, OpAttrs& a) -> Results {
       return {randn(shape_attr(a), a.get_dtype("dtype", DType::f32))};
     }},
};

// ---- Shape and data movement (mstep/api/ShapeOps.h) ----------------------
const OpEntry kShapeOps[] = {
    {"reshape", "reshape(x; shape: ints)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {reshape(arg(in, 0, a), a.get_ints("shape"))};
     }},
    {"view", "view(x; shape: ints)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {view(arg(in, 0, a), a.get_ints("shape"))}; }},
    {"flatten", "flatten(x; start_dim: int = 0, end_dim: int = -1)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {flatten(arg(in, 0, a), a.get_int("start_dim", 0), a.get_int("end_dim", -1))};
     }},
    {"permute", "permute(x; perm: ints)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {permute(arg(in, 0, a), a.get_ints("perm"))}; }},
    {"transpose", "transpose(x; dim0: int, dim1: int)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {transpose(arg(in, 0, a), a.get_int("dim0"), a.get_int("dim1"))};
     }},
    {"expand", "expand(x; shape: ints)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {expand(arg(in, 0, a), a.get_ints("shape"))}; }},
    {"squeeze", "squeeze(x; dim: int = none)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       const Tensor& x = arg(in, 0, a);
       if (const std::optional<int64_t> dim = opt_int(a, "dim")) return {squeeze(x, *dim)};
       return {squeeze(x)};
     }},
    {"unsqueeze", "unsqueeze(x; dim: int)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {unsqueeze(arg(in, 0, a), a.get_int("dim"))}; }},
    {"slice", "slice(x; dim: int, start: int = 0, end: int = none, step: int = 1)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {slice(arg(in, 0, a), a.get_int("dim"), a.get_int("start", 0),
                     a.get_int("end", kSliceEnd), a.get_int("step", 1))};
     }},
    {"cat", "cat(tensors...; dim: int = 0)", 1, -1,
     [](Inputs in, OpAttrs& a) -> Results { return {cat(all_args(in, a), a.get_int("dim", 0))}; }},
    {"stack", "stack(tensors...; dim: int = 0)", 1, -1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {stack(all_args(in, a), a.get_int("dim", 0))};
     }},
    {"chunk", "chunk(x; chunks: int, dim: int = 0)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return chunk(arg(in, 0, a), a.get_int("chunks"), a.get_int("dim", 0));
     }},
    {"gather", "gather(x, index; dim: int)", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {gather(arg(in, 0, a), a.get_int("dim"), arg(in, 1, a))};
     }},
    {"index_select", "index_select(x, index; dim: int)", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {index_select(arg(in, 0, a), a.get_int("dim"), arg(in, 1, a))};
     }},
    {"embedding", "embedding(indices, weight)", 2, 2, tensor_pair<mstep::embedding>},
    {"pad", "pad(x; pads: ints, value: float = 0)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {pad(arg(in, 0, a), a.get_ints("pads"), a.get_float("value", 0.0))};
     }},
    {"triu", "triu(x; diagonal: int = 0)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {triu(arg(in, 0, a), a.get_int("diagonal", 0))};
     }},
    {"tril", "tril(x; diagonal: int = 0)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {tril(arg(in, 0, a), a.get_int("diagonal", 0))};
     }},
    {"scatter_add", "scatter_add(x, index, src; dim: int)", 3, 3,
     [](Inputs in, OpAttrs& a) -> Results {
       return {scatter_add(arg(in, 0, a), a.get_int("dim"), arg(in, 1, a), arg(in, 2, a))};
     }},
    {"index_add", "index_add(x, index, source; dim: int)", 3, 3,
     [](Inputs in, OpAttrs& a) -> Results {
       return {index_add(arg(in, 0, a), a.get_int("dim"), arg(in, 1, a), arg(in, 2, a))};
     }},
    {"slice_scatter",
     "slice_scatter(x, src; dim: int = 0, start: int = 0, end: int = none, step: int = 1)", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {slice_scatter(arg(in, 0, a), arg(in, 1, a), a.get_int("dim", 0),
                             a.get_int("start", 0), a.get_int("end", kSliceEnd),
                             a.get_int("step", 1))};
     }},
};

// ---- Matrix products, convolution, pooling (mstep/api/Linalg.h) ----------
const OpEntry kLinalgOps[] = {
    {"matmul", "matmul(a, b)", 2, 2, tensor_pair<mstep::matmul>},
    {"bmm", "bmm(a, b)", 2, 2, tensor_pair<mstep::bmm>},
    {"linear", "linear(x, weight, bias?)", 2, 3,
     [](Inputs in, OpAttrs& a) -> Results {
       return {linear(arg(in, 0, a), arg(in, 1, a), opt_arg(in, 2))};
     }},
    {"conv2d",
     "conv2d(input, weight, bias?; stride: ints = [1], padding: ints = [0], dilation: ints = [1], "
     "groups: int = 1)",
     2, 3,
     [](Inputs in, OpAttrs& a) -> Results {
       return {conv2d(arg(in, 0, a), arg(in, 1, a), opt_arg(in, 2),
                      a.get_ints("stride", std::vector<int64_t>{1}),
                      a.get_ints("padding", std::vector<int64_t>{0}),
                      a.get_ints("dilation", std::vector<int64_t>{1}), a.get_int("groups", 1))};
     }},
    {"max_pool2d",
     "max_pool2d(input; kernel: ints, stride: ints = [], padding: ints = [0], dilation: ints = "
     "[1], "
     "ceil_mode: bool = false)",
     1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {max_pool2d(
           arg(in, 0, a), a.get_ints("kernel"), a.get_ints("stride", std::vector<int64_t>{}),
           a.get_ints("padding", std::vector<int64_t>{0}),
           a.get_ints("dilation", std::vector<int64_t>{1}), a.get_bool("ceil_mode", false))};
     }},
    {"avg_pool2d",
     "avg_pool2d(input; kernel: ints, stride: ints = [], padding: ints = [0], ceil_mode: bool = "
     "false, count_include_pad: bool = true)",
     1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {avg_pool2d(arg(in, 0, a), a.get_ints("kernel"),
                          a.get_ints("stride", std::vector<int64_t>{}),
                          a.get_ints("padding", std::vector<int64_t>{0}),
                          a.get_bool("ceil_mode", false), a.get_bool("count_include_pad", true))};
     }},
};

// ---- Reductions (mstep/api/Reduction.h) ----------------------------------
const OpEntry kReductionOps[] = {
    {"sum", "sum(x; dims: ints = [], keepdim: bool = false)", 1, 1, reduction<mstep::sum>},
    {"mean", "mean(x; dims: ints = [], keepdim: bool = false)", 1, 1, reduction<mstep::mean>},
    {"max", "max(x; dims: ints = [], keepdim: bool = false)", 1, 1, reduction<mstep::max>},
    {"min", "min(x; dims: ints = [], keepdim: bool = false)", 1, 1, reduction<mstep::min>},
    {"argmax", "argmax(x; dim: int = none, keepdim: bool = false)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {argmax(arg(in, 0, a), opt_int(a, "dim"), a.get_bool("keepdim", false))};
     }},
    {"logsumexp", "logsumexp(x; dims: ints, keepdim: bool = false)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {logsumexp(arg(in, 0, a), a.get_ints("dims"), a.get_bool("keepdim", false))};
     }},
    {"var", "var(x; dims: ints = [], correction: int = 1, keepdim: bool = false)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {var(arg(in, 0, a), a.get_ints("dims", std::vector<int64_t>{}),
                   a.get_int("correction", 1), a.get_bool("keepdim", false))};
     }},
};

// ---- Normalization, softmax, dropout (mstep/api/NN.h) --------------------
const OpEntry kNNOps[] = {
    {"softmax", "softmax(x; dim: int)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results { return {softmax(arg(in, 0, a), a.get_int("dim"))}; }},
    {"log_softmax", "log_softmax(x; dim: int)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {log_softmax(arg(in, 0, a), a.get_int("dim"))};
     }},
    {"layer_norm", "layer_norm(x, weight?, bias?; normalized_shape: ints, eps: float = 1e-05)", 1,
     3,
     [](Inputs in, OpAttrs& a) -> Results {
       return {layer_norm(arg(in, 0, a), a.get_ints("normalized_shape"), opt_arg(in, 1),
                          opt_arg(in, 2), a.get_float("eps", 1e-5))};
     }},
    {"rms_norm", "rms_norm(x, weight?; normalized_shape: ints, eps: float = none)", 1, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {rms_norm(arg(in, 0, a), a.get_ints("normalized_shape"), opt_arg(in, 1),
                        opt_float(a, "eps"))};
     }},
    {"dropout", "dropout(x; p: float = 0.5, train: bool = true)", 1, 1,
     [](Inputs in, OpAttrs& a) -> Results {
       return {dropout(arg(in, 0, a), a.get_float("p", 0.5), a.get_bool("train", true))};
     }},
};

// ---- Losses (mstep/api/Losses.h) -----------------------------------------
const OpEntry kLossOps[] = {
    {"cross_entropy",
     "cross_entropy(logits, target; reduction: string = \"mean\", ignore_index: int = -100, "
     "label_smoothing: float = 0)",
     2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {cross_entropy(arg(in, 0, a), arg(in, 1, a), reduction_attr(a),
                             a.get_int("ignore_index", -100), a.get_float("label_smoothing", 0.0))};
     }},
    {"nll_loss",
     "nll_loss(log_probs, target; reduction: string = \"mean\", ignore_index: int = -100)", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {nll_loss(arg(in, 0, a), arg(in, 1, a), reduction_attr(a),
                        a.get_int("ignore_index", -100))};
     }},
    {"mse_loss", "mse_loss(input, target; reduction: string = \"mean\")", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {mse_loss(arg(in, 0, a), arg(in, 1, a), reduction_attr(a))};
     }},
    {"binary_cross_entropy_with_logits",
     "binary_cross_entropy_with_logits(logits, target; reduction: string = \"mean\")", 2, 2,
     [](Inputs in, OpAttrs& a) -> Results {
       return {binary_cross_entropy_with_logits(arg(in, 0, a), arg(in, 1, a), reduction_attr(a))};
     }},
};

// ---- Attention (mstep/api/Attention.h) -----------------------------------
// The SdpaOptions tensors are optional operands 3 and 4, the rest attributes.
#define MSTEP_SDPA_OPERANDS "q, k, v, attn_mask?, valid_seq_len?"
#define MSTEP_SDPA_ATTRS                                                                           \
  "dropout_p: float = 0, is_causal: bool = false, scale: float = none, padding_side: "             \
  "string = \"right\", recompute: bool = true"
const OpEntry kAttentionOps[] = {
    {"scaled_dot_product_attention",
     "scaled_dot_product_attention(" MSTEP_SDPA_OPERANDS "; " MSTEP_SDPA_ATTRS ")", 3, 5,
     [](Inputs in, OpAttrs& a) -> Results {
       return {scaled_dot_product_attention(arg(in, 0, a), arg(in, 1, a), arg(in, 2, a),
                                            sdpa_options(in, a))};
     }},
    // Results: out, then attn_probs and dropout_mask where asked for, in that
    // order (only the requested ones, so the count says what came back).
    {"fused_sdpa",
     "fused_sdpa(" MSTEP_SDPA_OPERANDS "; " MSTEP_SDPA_ATTRS
     ", return_attn_probs: bool = false, return_dropout_mask: bool = false)",
     3, 5,
     [](Inputs in, OpAttrs& a) -> Results {
       SdpaOptions options = sdpa_options(in, a);
       options.return_attn_probs = a.get_bool("return_attn_probs", false);
       options.return_dropout_mask = a.get_bool("return_dropout_mask", false);
       SdpaResult r = fused_sdpa(arg(in, 0, a), arg(in, 1, a), arg(in, 2, a), options);
       Results results = {std::move(r.out)};
       if (options.return_attn_probs) results.push_back(std::move(r.attn_probs));
       if (options.return_dropout_mask) results.push_back(std::move(r.dropout_mask));
       return results;
     }},
};

// ---- Value-dependent shapes (mstep/api/DynamicOps.h) ---------------------
const OpEntry kDynamicOps[] = {
    {"nonzero", "nonzero(x)", 1, 1, unary<mstep::nonzero>},
    {"masked_select", "masked_select(x, mask)", 2, 2, tensor_pair<mstep::masked_select>},
};

#undef MSTEP_SDPA_OPERANDS
#undef MSTEP_SDPA_ATTRS

/// Every family's entries in one vector sorted by name, built once.
const std::vector<OpEntry>& sorted_ops() {
  static const std::vector<OpEntry>* ops = [] {
    auto* all = new std::vector<OpEntry>();
    for (absl::Span<const OpEntry> family :
         {absl::Span<const OpEntry>(kElementwiseOps), absl::Span<const OpEntry>(kCreationOps),
          absl::Span<const OpEntry>(kShapeOps), absl::Span<const OpEntry>(kLinalgOps),
          absl::Span<const OpEntry>(kReductionOps), absl::Span<const OpEntry>(kNNOps),
          absl::Span<const OpEntry>(kLossOps), absl::Span<const OpEntry>(kAttentionOps),
          absl::Span<const OpEntry>(kDynamicOps)}) {
      all->insert(all->end(), family.begin(), family.end());
    }
    std::sort(all->begin(), all->end(), [](const OpEntry& x, const OpEntry& y) {
      return std::string_view(x.name) < std::string_view(y.name);
    });
    return all;
  }();
  return *ops;
}

} // namespace

const OpEntry* find_op(std::string_view name) {
  const std::vector<OpEntry>& ops = sorted_ops();
  auto it =
      std::lower_bound(ops.begin(), ops.end(), name, [](const OpEntry& e, std::string_view n) {
        return std::string_view(e.name) < n;
      });
  if (it == ops.end() || it->name != name) return nullptr;
  return &*it;
}

const std::string& op_signatures() {
  static const std::string* text = [] {
    auto* s = new std::string();
    for (const OpEntry& op : sorted_ops()) absl::StrAppend(s, op.signature, "\n");
    return s;
  }();
  return *text;
}

} // namespace mstep::capi
