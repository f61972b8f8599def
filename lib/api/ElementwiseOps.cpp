// Elementwise ops: dtype rules, broadcasting checks and node recording.
// Graph-level elementwise ops take operands of one dtype (casts are
// explicit nodes) whose shapes broadcast to the result.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Elementwise.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {

using detail::describe;
using detail::record;
using detail::throw_op_error;

namespace {

constexpr absl::string_view kUndefinedHint =
    "Pass a defined tensor (a default-constructed Tensor holds no value).";

enum class ResultKind {
  same,        // result has the operand dtype
  floating,    // integers and bools are promoted to f32 first
  boolean,     // result is bool, operands keep their dtype
};

Tensor unary(absl::string_view name, OpKind op, const Tensor& x,
             ResultKind kind, AttrList attrs = {}) {
  if (!x.defined()) throw_op_error(name, "the input is undefined", "undefined", kUndefinedHint);
  if (!detail::needs_autograd(x) &&
      (kind == ResultKind::same || (kind == ResultKind::floating && is_floating(x.dtype()))))
    return detail::record_values(op, detail::operands_of(x), std::move(attrs), x.type(),
                                 x.device());
  Tensor in = x;
  DType out = x.dtype();
  if (kind == ResultKind::floating && !is_floating(x.dtype())) {
    in = detail::cast_to(x, kDefaultFloat);
    out = kDefaultFloat;
  } else if (kind == ResultKind::boolean) {
    out = DType::boolean;
  }
  return record(name, op, {in}, std::move(attrs), {x.shape(), out});
}

Shape broadcast_or_throw(absl::string_view name, const Tensor& a,
                         const Tensor& b) {
  auto shape = detail::broadcast_shapes(a.shape(), b.shape());
  if (!shape.ok())
    throw_op_error(name, shape.status().message(),
                   absl::StrCat(describe(a), " and ", describe(b)),
                   "Trailing dims must be equal or 1; use unsqueeze() or "
                   "reshape() to line them up.");
  return *shape;
}

/// "bool scalar true", "int scalar -1", "float scalar 2.5"
std::string describe_scalar(Scalar s) {
  if (s.dtype() == DType::boolean)
    return absl::StrCat("bool scalar ", s.value() != 0 ? "true" : "false");
  return absl::StrCat(s.dtype() == DType::i64 ? "int" : "float", " scalar ", s.value());
}

// `inputs` describes the operands; it is called only to throw (these
// checks run on the tracing hot path).

/// PyTorch rejects subtraction with any bool operand, even when the
/// result type would be numeric (bool - 1).
template <typename Inputs>
void check_sub(bool a_bool, bool b_bool, const Inputs& inputs) {
  if (a_bool && b_bool)
    throw_op_error("sub", "is not defined for two bool operands", inputs(),
                   "Use ne(a, b) (logical xor) instead.");
  if (a_bool || b_bool)
    throw_op_error("sub", "is not defined for a bool operand", inputs(),
                   "To invert a mask use logical_not(); otherwise convert the "
                   "bool operand with .to(DType::i64) or .to(DType::f32) first.");
}

/// pow computes in the promoted dtype, which must not be bool.
template <typename Inputs>
void check_pow(DType compute, const Inputs& inputs) {
  if (compute == DType::boolean)
    throw_op_error("pow", "is not defined for bool operands", inputs(),
                   "Convert an operand to a numeric dtype first, e.g. "
                   ".to(DType::i64).");
}

/// Binary op on two tensors. `kind` decides the compute and result dtype.
Tensor binary(absl::string_view name, OpKind op, const Tensor& a,
              const Tensor& b, ResultKind kind) {
  if (!a.defined() || !b.defined())
    throw_op_error(name, "an operand is undefined",
                   absl::StrCat(describe(a), " and ", describe(b)), kUndefinedHint);
  const TensorType& ta = a.type();
  const TensorType& tb = b.type();
  if (ta == tb && a.device() == b.device() && !detail::needs_autograd(a, b) &&
      (kind == ResultKind::same || (kind == ResultKind::floating && is_floating(ta.dtype))) &&
      !(ta.dtype == DType::boolean && (op == OpKind::sub || op == OpKind::pow))) {
    // Fast path (the common case on the tracing hot path): same shape and
    // dtype, so no broadcasting, promotion or casts to work out.
    return detail::record_values(op, detail::operands_of(a, b), {}, ta, a.device());
  }
  Shape shape = broadcast_or_throw(name, a, b);
  DType compute = detail::result_type({a, b});
  if (kind == ResultKind::floating && !is_floating(compute)) compute = kDefaultFloat;
  if (op == OpKind::sub || op == OpKind::pow) {
    auto inputs = [&] { return absl::StrCat(describe(a), " and ", describe(b)); };
    if (op == OpKind::sub)
      check_sub(a.dtype() == DType::boolean, b.dtype() == DType::boolean, inputs);
    else
      check_pow(compute, inputs);
  }
  DType out = kind == ResultKind::boolean ? DType::boolean : compute;
  return record(name, op, {detail::cast_to(a, compute), detail::cast_to(b, compute)},
                {}, {std::move(shape), out});
}

/// Binary op with a host scalar on the right (or the left when
/// `scalar_first`). The scalar becomes a constant node of the compute dtype.
Tensor binary_scalar(absl::string_view name, OpKind op, const Tensor& a,
                     Scalar s, ResultKind kind, bool scalar_first = false) {
  if (!a.defined())
    throw_op_error(name, "the tensor operand is undefined",
                   absl::StrCat("undefined and ", describe_scalar(s)), kUndefinedHint);
  DType compute = detail::result_type({a}, {s});
  if (kind == ResultKind::floating && !is_floating(compute)) compute = kDefaultFloat;
  if (op == OpKind::sub || op == OpKind::pow) {
    auto inputs = [&] {
      return scalar_first ? absl::StrCat(describe_scalar(s), " and ", describe(a))
                          : absl::StrCat(describe(a), " and ", describe_scalar(s));
    };
    const bool a_bool = a.dtype() == DType::boolean;
    const bool s_bool = s.dtype() == DType::boolean;
    if (op == OpKind::sub) check_sub(scalar_first ? s_bool : a_bool,
                                     scalar_first ? a_bool : s_bool, inputs);
    if (op == OpKind::pow) check_pow(compute, inputs);
    if (op == OpKind::pow && !scalar_first && is_integral(compute) &&
        s.dtype() == DType::i64 && s.value() < 0)
      throw_op_error("pow", "integers to negative integer powers are not allowed",
                     inputs(),
                     "Use a floating exponent (e.g. -1.0) or convert the tensor "
                     "to a floating dtype first.");
  }
  DType out = kind == ResultKind::boolean ? DType::boolean : compute;
  Tensor in = detail::cast_to(a, compute);
  if (detail::needs_autograd(in)) {
    // Through record() so the backward sees the constant as an input.
    Tensor c = detail::constant_tensor(s.value(), compute, a.device());
    return scalar_first ? record(name, op, {c, in}, {}, {a.shape(), out})
                        : record(name, op, {in, c}, {}, {a.shape(), out});
  }
  Value c = detail::constant_value(s.value(), compute);
  Operands operands;
  if (scalar_first) operands.push_back(std::move(c));
  operands.push_back(in.impl()->as_operand());
  if (!scalar_first) operands.push_back(std::move(c));
  return detail::record_values(op, std::move(operands), {}, {a.shape(), out},
                               a.device());
}

Tensor logical(absl::string_view name, OpKind op, const Tensor& a,
               const Tensor& b) {
  if (!a.defined() || !b.defined())
    throw_op_error(name, "an operand is undefined",
                   absl::StrCat(describe(a), " and ", describe(b)), kUndefinedHint);
  Shape shape = broadcast_or_throw(name, a, b);
  return record(name, op,
                {detail::cast_to(a, DType::boolean), detail::cast_to(b, DType::boolean)},
                {}, {std::move(shape), DType::boolean});
}

}  // namespace

Tensor neg(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::boolean)
    throw_op_error("neg", "is not defined for bool tensors", describe(x),
                   "Use logical_not() instead.");
  return unary("neg", OpKind::neg, x, ResultKind::same);
}
Tensor abs(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::boolean)
    throw_op_error("abs", "is not defined for bool tensors", describe(x),
                   "Convert to a numeric dtype first.");
  return unary("abs", OpKind::abs, x, ResultKind::same);
}
Tensor exp(const Tensor& x) { return unary("exp", OpKind::exp, x, ResultKind::floating); }
Tensor log(const Tensor& x) { return unary("log", OpKind::log, x, ResultKind::floating); }
Tensor log1p(const Tensor& x) { return unary("log1p", OpKind::log1p, x, ResultKind::floating); }
Tensor sqrt(const Tensor& x) { return unary("sqrt", OpKind::sqrt, x, ResultKind::floating); }
Tensor rsqrt(const Tensor& x) { return unary("rsqrt", OpKind::rsqrt, x, ResultKind::floating); }
Tensor sin(const Tensor& x) { return unary("sin", OpKind::sin, x, ResultKind::floating); }
Tensor cos(const Tensor& x) { return unary("cos", OpKind::cos, x, ResultKind::floating); }
Tensor tanh(const Tensor& x) { return unary("tanh", OpKind::tanh, x, ResultKind::floating); }
Tensor sigmoid(const Tensor& x) { return unary("sigmoid", OpKind::sigmoid, x, ResultKind::floating); }
Tensor relu(const Tensor& x) {
  if (x.defined() && x.dtype() == DType::boolean)
    throw_op_error("relu", "is not defined for bool tensors", describe(x),
                   "Convert to a numeric dtype first.");
  return unary("relu", OpKind::relu, x, ResultKind::same);
}
Tensor gelu(const Tensor& x, absl::string_view approximate) {
  int64_t mode = 0;
  if (approximate == "tanh") {
    mode = 1;
  } else if (approximate != "none") {
    throw_op_error("gelu", absl::StrCat("unknown approximate='", approximate, "'"),
                   describe(x), "Use \"none\" (erf form) or \"tanh\".");
  }
  return unary("gelu", OpKind::gelu, x, ResultKind::floating,
               {{AttrName::approximate, mode}});
}
Tensor silu(const Tensor& x) { return unary("silu", OpKind::silu, x, ResultKind::floating); }
Tensor erf(const Tensor& x) { return unary("erf", OpKind::erf, x, ResultKind::floating); }
Tensor reciprocal(const Tensor& x) {
  return unary("reciprocal", OpKind::reciprocal, x, ResultKind::floating);
}
Tensor isnan(const Tensor& x) { return unary("isnan", OpKind::isnan, x, ResultKind::boolean); }
Tensor isfinite(const Tensor& x) {
  return unary("isfinite", OpKind::isfinite, x, ResultKind::boolean);
}
Tensor logical_not(const Tensor& x) {
  if (!x.defined())
    throw_op_error("logical_not", "the input is undefined", "undefined", kUndefinedHint);
  return unary("logical_not", OpKind::logical_not, detail::cast_to(x, DType::boolean),
               ResultKind::boolean);
}

Tensor to(const Tensor& x, DType dtype) {
  if (!x.defined()) throw_op_error("to", "the input is undefined", "undefined", kUndefinedHint);
  if (x.dtype() == dtype) return x;
  return record("to", OpKind::cast, {x}, {{AttrName::dtype, dtype}},
                {x.shape(), dtype});
}

Tensor add(const Tensor& a, const Tensor& b) { return binary("add", OpKind::add, a, b, ResultKind::same); }
Tensor add(const Tensor& a, Scalar b) { return binary_scalar("add", OpKind::add, a, b, ResultKind::same); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary("sub", OpKind::sub, a, b, ResultKind::same); }
Tensor sub(const Tensor& a, Scalar b) { return binary_scalar("sub", OpKind::sub, a, b, ResultKind::same); }
Tensor sub(Scalar a, const Tensor& b) {
  return binary_scalar("sub", OpKind::sub, b, a, ResultKind::same, /*scalar_first=*/true);
}
Tensor mul(const Tensor& a, const Tensor& b) { return binary("mul", OpKind::mul, a, b, ResultKind::same); }
Tensor mul(const Tensor& a, Scalar b) { return binary_scalar("mul", OpKind::mul, a, b, ResultKind::same); }
Tensor div(const Tensor& a, const Tensor& b) { return binary("div", OpKind::div, a, b, ResultKind::floating); }
Tensor div(const Tensor& a, Scalar b) { return binary_scalar("div", OpKind::div, a, b, ResultKind::floating); }
Tensor div(Scalar a, const Tensor& b) {
  return binary_scalar("div", OpKind::div, b, a, ResultKind::floating, /*scalar_first=*/true);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary("pow", OpKind::pow, a, b, ResultKind::same); }
Tensor pow(const Tensor& a, Scalar b) { return binary_scalar("pow", OpKind::pow, a, b, ResultKind::same); }
Tensor pow(Scalar a, const Tensor& b) {
  return binary_scalar("pow", OpKind::pow, b, a, ResultKind::same, /*scalar_first=*/true);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary("maximum", OpKind::maximum, a, b, ResultKind::same);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary("minimum", OpKind::minimum, a, b, ResultKind::same);
}

#define MSTEP_COMPARISON(name)                                           \
  Tensor name(const Tensor& a, const Tensor& b) {                        \
    return binary(#name, OpKind::name, a, b, ResultKind::boolean);       \
  }                                                                      \
  Tensor name(const Tensor& a, Scalar b) {                               \
    return binary_scalar(#name, OpKind::name, a, b, ResultKind::boolean); \
  }
MSTEP_COMPARISON(eq)
MSTEP_COMPARISON(ne)
MSTEP_COMPARISON(lt)
MSTEP_COMPARISON(le)
MSTEP_COMPARISON(gt)
MSTEP_COMPARISON(ge)
#undef MSTEP_COMPARISON

Tensor logical_and(const Tensor& a, const Tensor& b) {
  return logical("logical_and", OpKind::logical_and, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  return logical("logical_or", OpKind::logical_or, a, b);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  if (!cond.defined() || !a.defined() || !b.defined())
    throw_op_error("where", "an operand is undefined",
                   absl::StrCat("condition ", describe(cond), ", values ", describe(a),
                                " and ", describe(b)),
                   kUndefinedHint);
  if (cond.dtype() != DType::boolean)
    throw_op_error("where", "the condition must be bool",
                   absl::StrCat("condition ", describe(cond)),
                   "Build it with a comparison, or convert with .to(DType::boolean).");
  Shape shape = broadcast_or_throw("where", a, b);
  auto full_shape = detail::broadcast_shapes(cond.shape(), shape);
  if (!full_shape.ok())
    throw_op_error("where", full_shape.status().message(),
                   absl::StrCat("condition ", describe(cond), ", values ",
                                describe(a), " and ", describe(b)),
                   "The condition must broadcast with both values.");
  DType dtype = detail::result_type({a, b});
  return record("where", OpKind::where,
                {cond, detail::cast_to(a, dtype), detail::cast_to(b, dtype)}, {},
                {*full_shape, dtype});
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  if (!a.defined())
    throw_op_error("where", "an operand is undefined",
                   absl::StrCat("condition ", describe(cond), ", values undefined and ",
                                describe_scalar(b)),
                   kUndefinedHint);
  DType dtype = detail::result_type({a}, {b});
  return where(cond, a, detail::record_values(OpKind::full,
                                              {detail::constant_value(b.value(), dtype)},
                                              {{AttrName::shape, IntList{}}},
                                              {Shape{}, dtype}, a.device()));
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  if (!b.defined())
    throw_op_error("where", "an operand is undefined",
                   absl::StrCat("condition ", describe(cond), ", values ",
                                describe_scalar(a), " and undefined"),
                   kUndefinedHint);
  DType dtype = detail::result_type({b}, {a});
  return where(cond, detail::record_values(OpKind::full,
                                           {detail::constant_value(a.value(), dtype)},
                                           {{AttrName::shape, IntList{}}},
                                           {Shape{}, dtype}, b.device()),
               b);
}

}  // namespace mstep
