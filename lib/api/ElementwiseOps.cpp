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

enum class ResultKind {
  same,        // result has the operand dtype
  floating,    // integers and bools are promoted to f32 first
  boolean,     // result is bool, operands keep their dtype
};

Tensor unary(absl::string_view name, OpKind op, const Tensor& x,
             ResultKind kind, AttrList attrs = {}) {
  if (!x.defined()) throw_op_error(name, "the input is undefined", "", "");
  if (kind == ResultKind::same || (kind == ResultKind::floating && is_floating(x.dtype())))
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

void require_not_bool(absl::string_view name, DType compute, const Tensor& a,
                      const Tensor& b, absl::string_view hint) {
  if (compute == DType::boolean)
    throw_op_error(name, "is not defined for bool tensors",
                   b.defined() ? absl::StrCat(describe(a), " and ", describe(b))
                               : describe(a),
                   hint);
}

/// Binary op on two tensors. `kind` decides the compute and result dtype.
Tensor binary(absl::string_view name, OpKind op, const Tensor& a,
              const Tensor& b, ResultKind kind) {
  if (!a.defined() || !b.defined())
    throw_op_error(name, "an operand is undefined",
                   absl::StrCat(describe(a), " and ", describe(b)), "");
  const TensorType& ta = a.type();
  const TensorType& tb = b.type();
  if (ta == tb && a.device() == b.device() &&
      (kind == ResultKind::same || (kind == ResultKind::floating && is_floating(ta.dtype))) &&
      !(op == OpKind::sub && ta.dtype == DType::boolean)) {
    // Fast path (the common case on the tracing hot path): same shape and
    // dtype, so no broadcasting, promotion or casts to work out.
    return detail::record_values(op, detail::operands_of(a, b), {}, ta, a.device());
  }
  Shape shape = broadcast_or_throw(name, a, b);
  DType compute = detail::result_type({a, b});
  if (kind == ResultKind::floating && !is_floating(compute)) compute = kDefaultFloat;
  if (op == OpKind::sub)
    require_not_bool(name, compute, a, b, "Use logical_xor-style logic: ne(a, b).");
  DType out = kind == ResultKind::boolean ? DType::boolean : compute;
  return record(name, op, {detail::cast_to(a, compute), detail::cast_to(b, compute)},
                {}, {std::move(shape), out});
}

/// Binary op with a host scalar on the right (or the left when
/// `scalar_first`). The scalar becomes a constant node of the compute dtype.
Tensor binary_scalar(absl::string_view name, OpKind op, const Tensor& a,
                     Scalar s, ResultKind kind, bool scalar_first = false) {
  if (!a.defined()) throw_op_error(name, "the tensor operand is undefined", "", "");
  DType compute = detail::result_type({a}, {s});
  if (kind == ResultKind::floating && !is_floating(compute)) compute = kDefaultFloat;
  if (op == OpKind::sub) require_not_bool(name, compute, a, Tensor(), "");
  DType out = kind == ResultKind::boolean ? DType::boolean : compute;
  Tensor in = detail::cast_to(a, compute);
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
                   absl::StrCat(describe(a), " and ", describe(b)), "");
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
Tensor abs(const Tensor& x) { return unary("abs", OpKind::abs, x, ResultKind::same); }
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
  if (!x.defined()) throw_op_error("logical_not", "the input is undefined", "", "");
  return unary("logical_not", OpKind::logical_not, detail::cast_to(x, DType::boolean),
               ResultKind::boolean);
}

Tensor to(const Tensor& x, DType dtype) {
  if (!x.defined()) throw_op_error("to", "the input is undefined", "", "");
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
    throw_op_error("where", "an operand is undefined", "", "");
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
  if (!a.defined()) throw_op_error("where", "an operand is undefined", "", "");
  DType dtype = detail::result_type({a}, {b});
  return where(cond, a, detail::record_values(OpKind::full,
                                              {detail::constant_value(b.value(), dtype)},
                                              {{AttrName::shape, IntList{}}},
                                              {Shape{}, dtype}, a.device()));
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  if (!b.defined()) throw_op_error("where", "an operand is undefined", "", "");
  DType dtype = detail::result_type({b}, {a});
  return where(cond, detail::record_values(OpKind::full,
                                           {detail::constant_value(a.value(), dtype)},
                                           {{AttrName::shape, IntList{}}},
                                           {Shape{}, dtype}, b.device()),
               b);
}

}  // namespace mstep
