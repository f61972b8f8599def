// The scalar form of an elementwise custom op: what one element of each
// output is, written with the scalar vocabulary of mstep's built-in
// elementwise ops (neg, exp, add, where, ...). An op that declares one
// (CustomOpSchema::scalar_form) is fused by mstep-fuse-elementwise like a
// built-in elementwise op: the fused region computes the form and the
// kernel is not called there. The kernels still define the op wherever it
// is not fused (the ref backend, MSTEP_FUSE=0, inputs of other shapes or
// dtypes), so the form must compute what they compute.
//
//   .scalar_form = mstep::make_scalar_form([](mstep::ScalarFormBuilder& f) {
//     mstep::ScalarValue x = f.input(0);
//     return std::vector{f.where(x > 0.0, x, f.attr("alpha") * (f.exp(x) - 1.0))};
//   }),
//
// A form computes in the floating-point type of the call (f32, f64, bf16,
// f16; bf16 and f16 widened to f32 per op, as the built-in ops do). Its
// values are numbers or predicates (a comparison's result, for where and
// the logical ops); each output is a number. Attributes of type float, int
// and bool are read as constants of the call (attr("name")). Built by
// value, so two forms compare equal when they compute the same expression:
// the form is part of the op's schema (a changed form needs a new version)
// and of its id (so of every cache key of a graph that calls it).
//
// Plain data with no MLIR: the runtime stores it; the compiler expands it
// into mstep ops (lib/passes/CustomScalarForms.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace mstep {

/// The operations of a scalar form. Apart from input, constant and attr,
/// each is the mstep op of the same name (ElementwiseOps.td).
enum class ScalarOp : uint8_t {
  input, constant, attr,
  // number -> number
  neg, abs, exp, log, log1p, sqrt, rsqrt, sin, cos, tanh, erf, sigmoid, silu, relu, reciprocal,
  // (number, number) -> number
  add, sub, mul, div, pow, maximum, minimum,
  // (number, number) -> predicate
  eq, ne, lt, le, gt, ge,
  // predicates
  logical_and, logical_or, logical_not,
  // (predicate, number, number) -> number
  where,
};
/// The mnemonic: "exp", "add", ... ("input", "constant", "attr").
absl::string_view scalar_op_name(ScalarOp op);

/// One operation of a form; `args` index earlier nodes (-1: unused).
struct ScalarNode {
  ScalarOp op = ScalarOp::constant;
  std::array<int32_t, 3> args{-1, -1, -1};
  int64_t input = -1;      // ScalarOp::input
  double value = 0;        // ScalarOp::constant (compared bitwise)
  std::string attr;        // ScalarOp::attr
  bool predicate = false;  // the node's value is a predicate
  bool operator==(const ScalarNode& other) const;
};

/// A built form: nodes in dependency order and the node of each output.
/// `error` is the first mistake the builder saw (empty when none);
/// registration reports it with the op's name.
struct CustomScalarForm {
  std::vector<ScalarNode> nodes;
  std::vector<int32_t> outputs;
  std::string error;
  bool operator==(const CustomScalarForm&) const = default;

  /// A stable hash of the nodes and outputs (the op's id folds it in).
  uint64_t fingerprint() const;
  /// "[exp(in0) * attr(beta)]", for messages.
  std::string to_string() const;
};

class ScalarFormBuilder;

/// A value of a form under construction; made by a ScalarFormBuilder and
/// only meaningful to it.
class ScalarValue {
public:
  ScalarValue() = default;
  /// The builder that made it (null for a default-constructed one).
  ScalarFormBuilder* builder() const { return owner_; }

private:
  friend class ScalarFormBuilder;
  ScalarValue(ScalarFormBuilder* owner, int32_t index) : owner_(owner), index_(index) {}
  ScalarFormBuilder* owner_ = nullptr;
  int32_t index_ = -1;
};

/// Records a form. A misuse (a predicate where a number is needed, a value
/// of another builder) does not throw: the builder keeps the first one in
/// CustomScalarForm::error and registration refuses the op with it.
class ScalarFormBuilder {
public:
  /// Input `index` of the op (an element of it).
  ScalarValue input(int64_t index);
  /// A constant.
  ScalarValue constant(double value);
  /// The value of the call's attribute `name` (float, int or bool: false
  /// is 0, true 1), a constant of the compiled graph.
  ScalarValue attr(absl::string_view name);

  ScalarValue neg(ScalarValue x) { return unary(ScalarOp::neg, x); }
  ScalarValue abs(ScalarValue x) { return unary(ScalarOp::abs, x); }
  ScalarValue exp(ScalarValue x) { return unary(ScalarOp::exp, x); }
  ScalarValue log(ScalarValue x) { return unary(ScalarOp::log, x); }
  ScalarValue log1p(ScalarValue x) { return unary(ScalarOp::log1p, x); }
  ScalarValue sqrt(ScalarValue x) { return unary(ScalarOp::sqrt, x); }
  ScalarValue rsqrt(ScalarValue x) { return unary(ScalarOp::rsqrt, x); }
  ScalarValue sin(ScalarValue x) { return unary(ScalarOp::sin, x); }
  ScalarValue cos(ScalarValue x) { return unary(ScalarOp::cos, x); }
  ScalarValue tanh(ScalarValue x) { return unary(ScalarOp::tanh, x); }
  ScalarValue erf(ScalarValue x) { return unary(ScalarOp::erf, x); }
  ScalarValue sigmoid(ScalarValue x) { return unary(ScalarOp::sigmoid, x); }
  ScalarValue silu(ScalarValue x) { return unary(ScalarOp::silu, x); }
  ScalarValue relu(ScalarValue x) { return unary(ScalarOp::relu, x); }
  ScalarValue reciprocal(ScalarValue x) { return unary(ScalarOp::reciprocal, x); }

  ScalarValue add(ScalarValue a, ScalarValue b) { return binary(ScalarOp::add, a, b); }
  ScalarValue sub(ScalarValue a, ScalarValue b) { return binary(ScalarOp::sub, a, b); }
  ScalarValue mul(ScalarValue a, ScalarValue b) { return binary(ScalarOp::mul, a, b); }
  ScalarValue div(ScalarValue a, ScalarValue b) { return binary(ScalarOp::div, a, b); }
  ScalarValue pow(ScalarValue a, ScalarValue b) { return binary(ScalarOp::pow, a, b); }
  ScalarValue maximum(ScalarValue a, ScalarValue b) { return binary(ScalarOp::maximum, a, b); }
  ScalarValue minimum(ScalarValue a, ScalarValue b) { return binary(ScalarOp::minimum, a, b); }

  ScalarValue eq(ScalarValue a, ScalarValue b) { return binary(ScalarOp::eq, a, b); }
  ScalarValue ne(ScalarValue a, ScalarValue b) { return binary(ScalarOp::ne, a, b); }
  ScalarValue lt(ScalarValue a, ScalarValue b) { return binary(ScalarOp::lt, a, b); }
  ScalarValue le(ScalarValue a, ScalarValue b) { return binary(ScalarOp::le, a, b); }
  ScalarValue gt(ScalarValue a, ScalarValue b) { return binary(ScalarOp::gt, a, b); }
  ScalarValue ge(ScalarValue a, ScalarValue b) { return binary(ScalarOp::ge, a, b); }

  ScalarValue logical_and(ScalarValue a, ScalarValue b) { return binary(ScalarOp::logical_and, a, b); }
  ScalarValue logical_or(ScalarValue a, ScalarValue b) { return binary(ScalarOp::logical_or, a, b); }
  ScalarValue logical_not(ScalarValue p) { return unary(ScalarOp::logical_not, p); }
  /// condition ? a : b.
  ScalarValue where(ScalarValue condition, ScalarValue a, ScalarValue b);

  /// The form with `outputs` (output i of the op is outputs[i]).
  CustomScalarForm build(const std::vector<ScalarValue>& outputs) &&;

private:
  ScalarValue unary(ScalarOp op, ScalarValue x);
  ScalarValue binary(ScalarOp op, ScalarValue a, ScalarValue b);
  /// Index of `x` in this form, or -1 (recording an error) when it is not
  /// a value of this builder or does not have the kind `predicate`.
  int32_t use(ScalarValue x, bool predicate, ScalarOp by);
  ScalarValue push(ScalarNode node);
  void fail(std::string message);

  CustomScalarForm form_;
};

/// The form `fn` builds.
CustomScalarForm make_scalar_form(
    absl::FunctionRef<std::vector<ScalarValue>(ScalarFormBuilder&)> fn);

// Operators, with doubles on either side as constants; they need the
// builder, which every ScalarValue knows.
ScalarValue operator+(ScalarValue a, ScalarValue b);
ScalarValue operator-(ScalarValue a, ScalarValue b);
ScalarValue operator*(ScalarValue a, ScalarValue b);
ScalarValue operator/(ScalarValue a, ScalarValue b);
ScalarValue operator-(ScalarValue a);
ScalarValue operator+(ScalarValue a, double b);
ScalarValue operator-(ScalarValue a, double b);
ScalarValue operator*(ScalarValue a, double b);
ScalarValue operator/(ScalarValue a, double b);
ScalarValue operator+(double a, ScalarValue b);
ScalarValue operator-(double a, ScalarValue b);
ScalarValue operator*(double a, ScalarValue b);
ScalarValue operator/(double a, ScalarValue b);
ScalarValue operator<(ScalarValue a, ScalarValue b);
ScalarValue operator<=(ScalarValue a, ScalarValue b);
ScalarValue operator>(ScalarValue a, ScalarValue b);
ScalarValue operator>=(ScalarValue a, ScalarValue b);
ScalarValue operator<(ScalarValue a, double b);
ScalarValue operator<=(ScalarValue a, double b);
ScalarValue operator>(ScalarValue a, double b);
ScalarValue operator>=(ScalarValue a, double b);

} // namespace mstep
