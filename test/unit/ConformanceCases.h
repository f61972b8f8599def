// The backend conformance table: one named case per op, shape and dtype
// of the public API. A case lists its inputs (shape, dtype, how they are
// filled, whether they require grad) and a function of those inputs; the
// driver in backend_conformance_test.cpp runs it on the ref backend (the
// oracle) and on every other backend with the same input data and compares
// outputs and input gradients.
//
// Inputs are filled from a hash of (input position, element index), so
// every backend, every run and every machine sees the same values.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/mstep.h"

namespace mstep::conformance {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
/// The op under test. `device` is where the inputs live; creation cases
/// and cases that make their own tensors use it.
using CaseFn = std::function<Outputs(const Inputs& in, Device device)>;

/// How an input's elements are chosen.
enum class Fill : uint8_t {
  uniform,     // floats in [-1, 1)
  positive,    // floats in [0.2, 2): the domain of log, sqrt, rsqrt, pow's base
  probability, // floats in [0, 1): targets of binary_cross_entropy_with_logits
  integers,    // whole numbers in [lo, hi): indices, class targets, ties for eq
  mask,        // bools, about 70 % true (so attention rows rarely see no key)
  special,     // uniform with NaN, +inf, -inf and 0 mixed in
  literal,     // exactly `literal`
};

struct InputSpec {
  Shape shape;
  DType dtype = DType::f32;
  Fill fill = Fill::uniform;
  int64_t lo = 0, hi = 0;      // Fill::integers
  std::vector<double> literal; // Fill::literal
  bool requires_grad = false;
};

/// A differentiable input (uniform floats, requires grad when floating).
inline InputSpec arg(Shape s, DType d = DType::f32) {
  return {.shape = s, .dtype = d, .requires_grad = is_floating(d)};
}
/// A differentiable input with values in [0.2, 2).
inline InputSpec positive(Shape s, DType d = DType::f32) {
  return {.shape = s, .dtype = d, .fill = Fill::positive, .requires_grad = is_floating(d)};
}
/// A floating input the loss does not differentiate (targets, masks).
inline InputSpec data(Shape s, DType d = DType::f32, Fill fill = Fill::uniform) {
  return {.shape = s, .dtype = d, .fill = fill};
}
/// Whole numbers in [lo, hi) of dtype `d` (i64 indices by default).
inline InputSpec ints(Shape s, int64_t lo, int64_t hi, DType d = DType::i64) {
  return {.shape = s, .dtype = d, .fill = Fill::integers, .lo = lo, .hi = hi};
}
inline InputSpec mask(Shape s) { return {.shape = s, .dtype = DType::boolean, .fill = Fill::mask}; }
inline InputSpec special(Shape s, DType d = DType::f32) {
  return {.shape = s, .dtype = d, .fill = Fill::special};
}
inline InputSpec literal(std::vector<double> v, Shape s, DType d = DType::i64) {
  return {.shape = s, .dtype = d, .fill = Fill::literal, .literal = std::move(v)};
}

/// A uniform value in [0, 1) for element `i` of input `slot` (splitmix64).
inline double hashed_unit(uint64_t slot, uint64_t i) {
  uint64_t z = (slot + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

/// The host values of input `slot` (NaN and inf only for Fill::special).
inline std::vector<double> input_values(const InputSpec& spec, uint64_t slot) {
  if (spec.fill == Fill::literal) return spec.literal;
  std::vector<double> v(spec.shape.numel());
  for (size_t i = 0; i < v.size(); ++i) {
    const double u = hashed_unit(slot, i);
    switch (spec.fill) {
    case Fill::uniform:
      v[i] = 2 * u - 1;
      break;
    case Fill::positive:
      v[i] = 0.2 + 1.8 * u;
      break;
    case Fill::probability:
      v[i] = u;
      break;
    case Fill::integers:
      v[i] = static_cast<double>(spec.lo + static_cast<int64_t>(u * (spec.hi - spec.lo)));
      break;
    case Fill::mask:
      v[i] = u < 0.7 ? 1 : 0;
      break;
    case Fill::special: {
      constexpr double kSpecials[] = {NAN, INFINITY, -INFINITY, 0.0};
      v[i] = i % 3 == 1 ? kSpecials[(i / 3) % 4] : 2 * u - 1;
      break;
    }
    case Fill::literal:
      break;
    }
  }
  return v;
}

/// A tensor of `spec` on `device` holding input_values(spec, slot).
inline Tensor make_input(const InputSpec& spec, uint64_t slot, Device device) {
  const std::vector<double> v = input_values(spec, slot);
  Tensor t;
  switch (spec.dtype) {
  case DType::boolean: {
    std::vector<bool> b(v.begin(), v.end());
    t = from_vector(b, spec.shape, device);
    break;
  }
  case DType::i64:
    t = from_vector(std::vector<int64_t>(v.begin(), v.end()), spec.shape, std::nullopt, device);
    break;
  case DType::i32:
    t = from_vector(std::vector<int32_t>(v.begin(), v.end()), spec.shape, std::nullopt, device);
    break;
  default: // floating: converted from f64 (bf16 rounds once, here)
    t = from_vector(v, spec.shape, spec.dtype, device);
  }
  if (spec.requires_grad) t.requires_grad_();
  return t;
}

/// Fixed pseudo-random f32 values in [center - scale, center + scale) of
/// `shape` on `device`, for weights and data that cases and training steps
/// build themselves.
inline Tensor fixed_tensor(Shape shape, uint64_t seed, Device device, double scale = 1.0,
                           double center = 0.0) {
  std::vector<float> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(center + scale * (2 * hashed_unit(1000 + seed, i) - 1));
  return from_vector(v, shape, std::nullopt, device);
}

struct ConformanceCase {
  std::string name; // unique, [A-Za-z0-9_]: op, then each input's dtype and shape
  std::vector<InputSpec> inputs;
  CaseFn fn;
  /// Backward through sum(out * w) over the outputs that require grad,
  /// comparing every input gradient. Off for cases that run their own
  /// backward (optimizer steps).
  bool check_grads = true;
  /// Multiplies the dtype's tolerance, for long accumulations.
  double tol_scale = 1.0;
};

/// "f32_3x1x5" ("f32_0d" for a 0-d input).
inline std::string describe(const InputSpec& s) {
  std::string dims = s.shape.rank() == 0 ? "0d" : absl::StrJoin(s.shape.dims(), "x");
  return absl::StrCat(dtype_name(s.dtype), "_", dims);
}

// Adapters from a plain function of tensors to a CaseFn.
template <typename F> CaseFn unary(F f) {
  return [f](const Inputs& in, Device) { return Outputs{f(in[0])}; };
}
template <typename F> CaseFn binary(F f) {
  return [f](const Inputs& in, Device) { return Outputs{f(in[0], in[1])}; };
}
template <typename F> CaseFn ternary(F f) {
  return [f](const Inputs& in, Device) { return Outputs{f(in[0], in[1], in[2])}; };
}
template <typename F> CaseFn on_device(F f) {
  return [f](const Inputs&, Device d) { return Outputs{f(d)}; };
}

/// Collects cases; each case's name is `op` plus its inputs' signatures.
class CaseTable {
public:
  void add(const std::string& op, std::vector<InputSpec> inputs, CaseFn fn,
           double tol_scale = 1.0) {
    std::string name = op;
    for (const InputSpec& s : inputs) absl::StrAppend(&name, "_", describe(s));
    cases_.push_back({std::move(name), std::move(inputs), std::move(fn), true, tol_scale});
  }
  /// A case that runs its own backward and optimizer steps.
  void add_without_grads(const std::string& op, std::vector<InputSpec> inputs, CaseFn fn) {
    add(op, std::move(inputs), std::move(fn));
    cases_.back().check_grads = false;
  }
  std::vector<ConformanceCase> take() { return std::move(cases_); }

private:
  std::vector<ConformanceCase> cases_;
};

/// The shapes every elementwise op runs on: size 1, odd, a size-1 middle
/// dim, odd 2-d, and one larger case.
inline const std::vector<Shape>& elementwise_shapes() {
  static const std::vector<Shape> shapes = {{1}, {7}, {3, 1, 5}, {17, 33}, {64, 257}};
  return shapes;
}
/// The smaller set bf16 variants run on.
inline const std::vector<Shape>& bf16_shapes() {
  static const std::vector<Shape> shapes = {{7}, {17, 33}};
  return shapes;
}

// ---- creation -------------------------------------------------------------

inline void add_creation_cases(CaseTable& t) {
  for (Shape s : {Shape{1}, Shape{3, 1, 5}, Shape{17, 33}}) {
    const std::string sig = absl::StrJoin(s.dims(), "x");
    t.add("zeros_" + sig, {}, on_device([s](Device d) { return zeros(s, DType::f32, d); }));
    t.add("ones_bf16_" + sig, {}, on_device([s](Device d) { return ones(s, DType::bf16, d); }));
    t.add("full_f32_" + sig, {},
          on_device([s](Device d) { return full(s, 2.5, std::nullopt, d); }));
    t.add("full_i64_" + sig, {}, on_device([s](Device d) { return full(s, 3, std::nullopt, d); }));
    t.add("full_bool_" + sig, {},
          on_device([s](Device d) { return full(s, true, std::nullopt, d); }));
    // Philox draws: the same seed must give the same numbers on every backend.
    t.add("rand_" + sig, {}, on_device([s](Device d) { return rand(s, DType::f32, d); }));
    t.add("randn_" + sig, {}, on_device([s](Device d) { return randn(s, DType::f32, d); }));
    t.add("rand_bf16_" + sig, {}, on_device([s](Device d) { return rand(s, DType::bf16, d); }));
    t.add("zeros_like", {data(s)}, unary([](const Tensor& x) { return zeros_like(x); }));
    t.add("ones_like", {ints(s, 0, 5)}, unary([](const Tensor& x) { return ones_like(x); }));
    t.add("full_like", {data(s, DType::bf16)},
          unary([](const Tensor& x) { return full_like(x, -1.25); }));
    // A materialized input read straight back: allocate, copy_in, copy_out.
    t.add("from_vector", {data(s)}, unary([](const Tensor& x) { return x; }));
    t.add("from_vector", {ints(s, -9, 9)}, unary([](const Tensor& x) { return x; }));
    t.add("from_vector", {mask(s)}, unary([](const Tensor& x) { return x; }));
  }
  t.add("rand_64x257", {}, on_device([](Device d) { return rand({64, 257}, DType::f32, d); }));
  t.add("randn_64x257", {}, on_device([](Device d) { return randn({64, 257}, DType::f32, d); }));
  t.add("arange_i64_7", {}, on_device([](Device d) { return arange(7, std::nullopt, d); }));
  t.add("arange_i64_step4", {},
        on_device([](Device d) { return arange(-3, 20, 4, std::nullopt, d); }));
  t.add("arange_f32_fractional", {},
        on_device([](Device d) { return arange(0.5, 3.7, 0.3, std::nullopt, d); }));
  t.add("arange_bf16", {}, on_device([](Device d) { return arange(0, 17, 1, DType::bf16, d); }));
  t.add("from_buffer_f32_3x1x5", {}, on_device([](Device d) {
          std::vector<float> v(15);
          for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 1;
          return from_buffer(v.data(), TensorType{Shape{3, 1, 5}, DType::f32}, d);
        }));
}

// ---- unary ----------------------------------------------------------------

struct UnaryOp {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  bool positive_domain; // log, sqrt, ...: inputs in [0.2, 2)
};

inline std::vector<UnaryOp> differentiable_unary_ops() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, false},
      {"abs", [](const Tensor& x) { return abs(x); }, false},
      {"exp", [](const Tensor& x) { return exp(x); }, false},
      {"log", [](const Tensor& x) { return log(x); }, true},
      {"log1p", [](const Tensor& x) { return log1p(x); }, false},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, true},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, true},
      {"sin", [](const Tensor& x) { return sin(x); }, false},
      {"cos", [](const Tensor& x) { return cos(x); }, false},
      {"tanh", [](const Tensor& x) { return tanh(x); }, false},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, false},
      {"relu", [](const Tensor& x) { return relu(x); }, false},
      {"gelu", [](const Tensor& x) { return gelu(x); }, false},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); }, false},
      {"silu", [](const Tensor& x) { return silu(x); }, false},
      {"erf", [](const Tensor& x) { return erf(x); }, false},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, true},
      // An op chain: what an elementwise fusion sees.
      {"chain_tanh_exp_mul",
       [](const Tensor& x) { return tanh(x) * exp(neg(x)) + sigmoid(x * 2.0); }, false},
  };
}

inline void add_unary_cases(CaseTable& t) {
  for (const UnaryOp& op : differentiable_unary_ops()) {
    auto input = [&](Shape s, DType d) { return op.positive_domain ? positive(s, d) : arg(s, d); };
    for (const Shape& s : elementwise_shapes())
      t.add(op.name, {input(s, DType::f32)}, unary(op.fn));
    for (const Shape& s : bf16_shapes()) t.add(op.name, {input(s, DType::bf16)}, unary(op.fn));
  }
  t.add("neg", {ints({17, 33}, -50, 50)}, unary([](const Tensor& x) { return neg(x); }));
  t.add("abs", {ints({7}, -50, 50)}, unary([](const Tensor& x) { return abs(x); }));
  t.add("exp_of_int", {ints({7}, -3, 3)}, unary([](const Tensor& x) { return exp(x); }));
  for (Shape s : {Shape{7}, Shape{17, 33}}) {
    for (DType d : {DType::f32, DType::bf16}) {
      t.add("isnan", {special(s, d)}, unary([](const Tensor& x) { return isnan(x); }));
      t.add("isfinite", {special(s, d)}, unary([](const Tensor& x) { return isfinite(x); }));
      t.add("logical_not", {special(s, d)}, unary([](const Tensor& x) { return logical_not(x); }));
    }
    t.add("logical_not", {mask(s)}, unary([](const Tensor& x) { return logical_not(x); }));
    t.add("logical_not", {ints(s, -2, 2)}, unary([](const Tensor& x) { return logical_not(x); }));
  }
  // Casts: float to int truncates toward zero; bf16 rounds to nearest even.
  for (Shape s : {Shape{1}, Shape{3, 1, 5}, Shape{17, 33}}) {
    t.add("to_bf16", {arg(s)}, unary([](const Tensor& x) { return to(x * 3.0, DType::bf16); }));
    t.add("to_f32", {arg(s, DType::bf16)},
          unary([](const Tensor& x) { return to(x, DType::f32); }));
    t.add("to_i64", {data(s)}, unary([](const Tensor& x) { return to(x * 7.5, DType::i64); }));
    t.add("to_i32", {data(s)}, unary([](const Tensor& x) { return to(x * 7.5, DType::i32); }));
    t.add("to_bool", {special(s)}, unary([](const Tensor& x) { return to(x, DType::boolean); }));
    t.add("to_f32", {ints(s, -100, 100)}, unary([](const Tensor& x) { return to(x, DType::f32); }));
    t.add("to_f32", {mask(s)}, unary([](const Tensor& x) { return to(x, DType::f32); }));
    t.add("to_i64", {mask(s)}, unary([](const Tensor& x) { return to(x, DType::i64); }));
  }
}

// ---- binary, comparisons, logic, where ---------------------------------------

struct BinaryOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  bool positive_domain; // pow: base in [0.2, 2)
};

inline std::vector<BinaryOp> differentiable_binary_ops() {
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, false},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, false},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, false},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, true},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, true},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, false},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, false},
  };
}

inline void add_binary_cases(CaseTable& t) {
  // Same shapes, then broadcasting (both sides, and a size-1 middle dim).
  const std::vector<std::pair<Shape, Shape>> shape_pairs = {{{1}, {1}},
                                                            {{7}, {7}},
                                                            {{3, 1, 5}, {3, 1, 5}},
                                                            {{17, 33}, {17, 33}},
                                                            {{64, 257}, {64, 257}},
                                                            {{17, 33}, {33}},
                                                            {{3, 1, 5}, {4, 1}},
                                                            {{1}, {17, 33}},
                                                            {{64, 1}, {1, 257}}};
  for (const BinaryOp& op : differentiable_binary_ops()) {
    auto input = [&](Shape s, DType d) { return op.positive_domain ? positive(s, d) : arg(s, d); };
    for (const auto& [a, b] : shape_pairs)
      t.add(op.name, {input(a, DType::f32), input(b, DType::f32)}, binary(op.fn));
    t.add(op.name, {input({17, 33}, DType::bf16), input({33}, DType::bf16)}, binary(op.fn));
    // Promotion: bf16 with f32 computes in f32.
    t.add(op.name, {input({7}, DType::bf16), input({7}, DType::f32)}, binary(op.fn));
  }
  // Integer arithmetic is exact; true division of integers gives f32.
  for (const char* name : {"add", "sub", "mul", "maximum", "minimum", "div"}) {
    auto fn = [name = std::string(name)](const Tensor& a, const Tensor& b) {
      if (name == "add") return add(a, b);
      if (name == "sub") return sub(a, b);
      if (name == "mul") return mul(a, b);
      if (name == "maximum") return maximum(a, b);
      if (name == "minimum") return minimum(a, b);
      return div(a, b);
    };
    t.add(name, {ints({17, 33}, -40, 40), ints({33}, 1, 9)}, binary(fn));
    t.add(name, {ints({3, 1, 5}, -40, 40, DType::i32), ints({4, 1}, 1, 9, DType::i32)}, binary(fn));
  }
  t.add("add_i64_f32_promotes", {ints({17, 33}, -5, 5), arg({17, 33})},
        binary([](const Tensor& a, const Tensor& b) { return add(a, b); }));
  t.add("pow_int_exponent", {ints({7}, -4, 4)}, unary([](const Tensor& a) { return pow(a, 3); }));
  // Host-scalar forms.
  for (Shape s : {Shape{7}, Shape{3, 1, 5}, Shape{64, 257}}) {
    t.add("add_scalar", {arg(s)}, unary([](const Tensor& a) { return a + 2.5; }));
    t.add("rsub_scalar", {arg(s)}, unary([](const Tensor& a) { return 2.0 - a; }));
    t.add("mul_scalar", {arg(s)}, unary([](const Tensor& a) { return a * -0.75; }));
    t.add("div_scalar", {arg(s)}, unary([](const Tensor& a) { return a / 3.0; }));
    t.add("rdiv_scalar", {positive(s)}, unary([](const Tensor& a) { return 2.0 / a; }));
    t.add("pow_scalar_exponent", {positive(s)}, unary([](const Tensor& a) { return pow(a, 2.5); }));
    t.add("pow_scalar_square", {arg(s)}, unary([](const Tensor& a) { return pow(a, 2); }));
    t.add("pow_scalar_base", {arg(s)}, unary([](const Tensor& a) { return pow(2.0, a); }));
  }
  t.add("mul_scalar", {arg({17, 33}, DType::bf16)}, unary([](const Tensor& a) { return a * 0.3; }));
  t.add("add_scalar", {ints({17, 33}, -9, 9)}, unary([](const Tensor& a) { return a + 4; }));
  t.add("mul_scalar_float_promotes", {ints({17, 33}, -9, 9)},
        unary([](const Tensor& a) { return a * 0.5; }));
}

inline void add_comparison_cases(CaseTable& t) {
  using Cmp = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Cmp>> cmps = {
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); }},
      {"le", [](const Tensor& a, const Tensor& b) { return le(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); }},
  };
  using CmpScalar = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, CmpScalar>> scalar_cmps = {
      {"eq_scalar", [](const Tensor& a) { return eq(a, 1.0); }},
      {"ne_scalar", [](const Tensor& a) { return ne(a, 1.0); }},
      {"lt_scalar", [](const Tensor& a) { return lt(a, 0.5); }},
      {"le_scalar", [](const Tensor& a) { return le(a, 1); }},
      {"gt_scalar", [](const Tensor& a) { return gt(a, -1); }},
      {"ge_scalar", [](const Tensor& a) { return ge(a, 0.0); }},
  };
  // Whole-number floats in [-2, 3) make ties, so eq, le and ge matter.
  for (const auto& [name, fn] : cmps) {
    t.add(name, {ints({7}, -2, 3, DType::f32), ints({7}, -2, 3, DType::f32)}, binary(fn));
    t.add(name, {ints({17, 33}, -2, 3, DType::f32), ints({33}, -2, 3, DType::f32)}, binary(fn));
    t.add(name, {ints({3, 1, 5}, -2, 3), ints({4, 1}, -2, 3)}, binary(fn));
    t.add(name, {ints({17, 33}, -2, 3, DType::bf16), ints({17, 33}, -2, 3, DType::f32)},
          binary(fn));
    t.add(name, {mask({64, 257}), mask({64, 257})}, binary(fn));
  }
  for (const auto& [name, fn] : scalar_cmps) {
    t.add(name, {ints({17, 33}, -2, 3, DType::f32)}, unary(fn));
    t.add(name, {ints({3, 1, 5}, -2, 3)}, unary(fn));
  }
  for (Shape s : {Shape{7}, Shape{17, 33}}) {
    t.add("logical_and", {mask(s), mask(s)},
          binary([](const Tensor& a, const Tensor& b) { return logical_and(a, b); }));
    t.add("logical_or", {mask(s), mask(s)},
          binary([](const Tensor& a, const Tensor& b) { return logical_or(a, b); }));
    // Any dtype: nonzero is true (NaN too).
    t.add("logical_and", {special(s), ints(s, -1, 2)},
          binary([](const Tensor& a, const Tensor& b) { return logical_and(a, b); }));
    t.add("logical_or", {special(s), mask(s)},
          binary([](const Tensor& a, const Tensor& b) { return logical_or(a, b); }));
  }
}

inline void add_where_cases(CaseTable& t) {
  auto where3 =
      ternary([](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); });
  for (Shape s : {Shape{1}, Shape{7}, Shape{3, 1, 5}, Shape{17, 33}, Shape{64, 257}})
    t.add("where", {mask(s), arg(s), arg(s)}, where3);
  t.add("where", {mask({17, 33}), arg({17, 33}), arg({33})}, where3);
  t.add("where", {mask({3, 4, 1}), arg({1, 5}), arg({3, 1, 5})}, where3);
  t.add("where", {mask({17, 33}), arg({17, 33}, DType::bf16), arg({17, 33}, DType::bf16)}, where3);
  t.add("where", {mask({17, 33}), ints({17, 33}, -9, 9), ints({33}, -9, 9)}, where3);
  t.add("where_scalar_other", {mask({17, 33}), arg({17, 33})},
        binary([](const Tensor& c, const Tensor& a) { return where(c, a, 0.5); }));
  t.add("where_scalar_self", {mask({3, 1, 5}), arg({3, 1, 5})},
        binary([](const Tensor& c, const Tensor& b) { return where(c, -1.0, b); }));
}

// ---- reductions -----------------------------------------------------------

inline void add_reduction_cases(CaseTable& t) {
  using DimList = std::vector<int64_t>;
  struct Reduce {
    const char* name;
    std::function<Tensor(const Tensor&, const DimList&, bool)> fn;
  };
  const std::vector<Reduce> reductions = {
      {"sum", [](const Tensor& x, const DimList& d, bool k) { return sum(x, d, k); }},
      {"mean", [](const Tensor& x, const DimList& d, bool k) { return mean(x, d, k); }},
      {"max", [](const Tensor& x, const DimList& d, bool k) { return max(x, d, k); }},
      {"min", [](const Tensor& x, const DimList& d, bool k) { return min(x, d, k); }},
      {"logsumexp",
       [](const Tensor& x, const DimList& d, bool k) {
         // logsumexp needs dims: reduce every dim when the list is empty.
         DimList all = d;
         if (all.empty())
           for (int64_t i = 0; i < x.dim(); ++i) all.push_back(i);
         return logsumexp(x, all, k);
       }},
      {"var", [](const Tensor& x, const DimList& d, bool k) { return var(x, d, 1, k); }},
      {"var_biased", [](const Tensor& x, const DimList& d, bool k) { return var(x, d, 0, k); }},
  };
  struct Reduction {
    Shape shape;
    DimList dims;
    bool keepdim;
    const char* label;
  };
  const std::vector<Reduction> layouts = {
      {{7}, {}, false, "all"},           {{3, 1, 5}, {}, false, "all"},
      {{3, 1, 5}, {0, 2}, false, "d02"}, {{3, 1, 5}, {1}, true, "d1_keep"},
      {{17, 33}, {0}, false, "d0"},      {{17, 33}, {-1}, true, "dlast_keep"},
      {{64, 257}, {-1}, false, "dlast"}, {{64, 257}, {}, false, "all"},
  };
  for (const Reduce& r : reductions)
    for (const Reduction& l : layouts) {
      auto fn = r.fn;
      auto dims = l.dims;
      const bool keep = l.keepdim;
      // The sum over [64, 257] adds 16448 terms: allow for the order.
      t.add(absl::StrCat(r.name, "_", l.label), {arg(l.shape)},
            unary([fn, dims, keep](const Tensor& x) { return fn(x, dims, keep); }),
            l.shape.numel() > 10000 ? 4.0 : 1.0);
    }
  // Unbiased variance over one element divides by zero: NaN on both.
  t.add("var_single_element", {arg({1})}, unary([](const Tensor& x) { return var(x); }));
  for (const char* name : {"sum", "mean", "max", "min"}) {
    auto fn = [name = std::string(name)](const Tensor& x) {
      if (name == "sum") return sum(x, {-1});
      if (name == "mean") return mean(x, {-1});
      if (name == "max") return max(x, {0}, true);
      return min(x);
    };
    t.add(name, {arg({17, 33}, DType::bf16)}, unary(fn), 2.0);
  }
  t.add("sum_all", {ints({17, 33}, -100, 100)}, unary([](const Tensor& x) { return sum(x); }));
  t.add("sum_d0", {ints({3, 1, 5}, -100, 100, DType::i32)},
        unary([](const Tensor& x) { return sum(x, {0}); }));
  t.add("sum_dlast", {mask({17, 33})}, unary([](const Tensor& x) { return sum(x, {-1}); }));
  t.add("max_dlast", {ints({17, 33}, -100, 100)},
        unary([](const Tensor& x) { return max(x, {-1}); }));
  t.add("min_all", {ints({7}, -100, 100)}, unary([](const Tensor& x) { return min(x); }));
  // argmax: first maximum. Whole-number inputs make ties.
  for (Shape s : {Shape{1}, Shape{7}, Shape{3, 1, 5}, Shape{17, 33}, Shape{64, 257}}) {
    t.add("argmax_flat", {data(s)}, unary([](const Tensor& x) { return argmax(x); }));
    t.add("argmax_d0", {data(s)}, unary([](const Tensor& x) { return argmax(x, 0); }));
    t.add("argmax_dlast_keep", {data(s)},
          unary([](const Tensor& x) { return argmax(x, -1, true); }));
  }
  t.add("argmax_ties", {ints({17, 33}, 0, 4, DType::f32)},
        unary([](const Tensor& x) { return argmax(x, 1); }));
  t.add("argmax_ties", {ints({17, 33}, 0, 4)}, unary([](const Tensor& x) { return argmax(x, 0); }));
  t.add("argmax_d1", {data({17, 33}, DType::bf16)},
        unary([](const Tensor& x) { return argmax(x, 1); }));
}

// ---- shape and data movement ------------------------------------------------

inline void add_shape_cases(CaseTable& t) {
  t.add("reshape", {arg({17, 33})}, unary([](const Tensor& x) { return reshape(x, {33, 17}); }));
  t.add("reshape_infer", {arg({3, 1, 5})}, unary([](const Tensor& x) { return reshape(x, {-1}); }));
  t.add("reshape", {arg({64, 257})}, unary([](const Tensor& x) {
          return reshape(x, {257, 8, 8});
        }));
  t.add("view", {arg({7})}, unary([](const Tensor& x) { return view(x, {7, 1}); }));
  t.add("flatten_1", {arg({2, 3, 4, 5})}, unary([](const Tensor& x) { return flatten(x, 1); }));
  t.add("flatten_1_2", {ints({2, 3, 4, 5}, 0, 9)},
        unary([](const Tensor& x) { return flatten(x, 1, 2); }));
  t.add("permute", {arg({2, 3, 4, 5})}, unary([](const Tensor& x) {
          return permute(x, {3, 1, 0, 2});
        }));
  t.add("permute", {arg({3, 1, 5})}, unary([](const Tensor& x) { return permute(x, {2, 0, 1}); }));
  t.add("permute", {mask({3, 1, 5})}, unary([](const Tensor& x) { return permute(x, {2, 0, 1}); }));
  t.add("permute", {arg({2, 3, 4, 5}, DType::bf16)}, unary([](const Tensor& x) {
          return permute(x, {0, 2, 1, 3});
        }));
  for (Shape s : {Shape{17, 33}, Shape{64, 257}})
    t.add("transpose", {arg(s)}, unary([](const Tensor& x) { return transpose(x, 0, 1); }));
  t.add("transpose", {ints({3, 1, 5}, 0, 9)},
        unary([](const Tensor& x) { return transpose(x, 0, 2); }));
  // Transposed then consumed: a non-contiguous producer feeding math.
  t.add("transpose_then_exp", {arg({17, 33})},
        unary([](const Tensor& x) { return exp(transpose(x, 0, 1)) * 2.0; }));
  t.add("expand", {arg({3, 1, 5})}, unary([](const Tensor& x) { return expand(x, {2, 3, 4, 5}); }));
  t.add("expand", {arg({1})}, unary([](const Tensor& x) { return expand(x, {7}); }));
  t.add("expand_keep", {arg({17, 1})}, unary([](const Tensor& x) { return expand(x, {-1, 33}); }));
  t.add("expand", {mask({1, 5})}, unary([](const Tensor& x) { return expand(x, {3, 5}); }));
  t.add("squeeze_all", {arg({3, 1, 5})}, unary([](const Tensor& x) { return squeeze(x); }));
  t.add("squeeze_1", {arg({3, 1, 5})}, unary([](const Tensor& x) { return squeeze(x, 1); }));
  t.add("squeeze_all", {arg({1})}, unary([](const Tensor& x) { return squeeze(x); }));
  t.add("unsqueeze_0", {arg({17, 33})}, unary([](const Tensor& x) { return unsqueeze(x, 0); }));
  t.add("unsqueeze_last", {arg({7})}, unary([](const Tensor& x) { return unsqueeze(x, -1); }));
  t.add("slice_step3", {arg({17, 33})},
        unary([](const Tensor& x) { return slice(x, 1, 3, 29, 3); }));
  t.add("slice_negative_start", {arg({17, 33})},
        unary([](const Tensor& x) { return slice(x, 0, -5); }));
  t.add("slice_step2", {arg({64, 257})},
        unary([](const Tensor& x) { return slice(x, 1, 1, 256, 2); }));
  t.add("slice_clamped", {arg({3, 1, 5})},
        unary([](const Tensor& x) { return slice(x, 2, 2, 100); }));
  t.add("slice", {ints({17, 33}, 0, 9)},
        unary([](const Tensor& x) { return slice(x, 0, 1, 16, 4); }));
  t.add("cat_d0", {arg({3, 5}), arg({1, 5}), arg({7, 5})},
        [](const Inputs& in, Device) { return Outputs{cat(in, 0)}; });
  t.add("cat_d1", {arg({17, 33}), arg({17, 1}), arg({17, 2})},
        [](const Inputs& in, Device) { return Outputs{cat(in, 1)}; });
  t.add("cat_d1", {ints({3, 2}, 0, 9), ints({3, 5}, 0, 9)},
        [](const Inputs& in, Device) { return Outputs{cat(in, 1)}; });
  t.add("cat_d0", {arg({2, 7}, DType::bf16), arg({5, 7}, DType::bf16)},
        [](const Inputs& in, Device) { return Outputs{cat(in, 0)}; });
  t.add("stack_d0", {arg({3, 1, 5}), arg({3, 1, 5})},
        [](const Inputs& in, Device) { return Outputs{stack(in, 0)}; });
  t.add("stack_dlast", {arg({17, 33}), arg({17, 33}), arg({17, 33})},
        [](const Inputs& in, Device) { return Outputs{stack(in, -1)}; });
  t.add("stack_d1", {mask({7}), mask({7})},
        [](const Inputs& in, Device) { return Outputs{stack(in, 1)}; });
  t.add("chunk_4_d1", {arg({17, 33})}, [](const Inputs& in, Device) { return chunk(in[0], 4, 1); });
  t.add("chunk_3_d0", {arg({7})}, [](const Inputs& in, Device) { return chunk(in[0], 3, 0); });
  t.add("chunk_3_dlast", {arg({64, 257})},
        [](const Inputs& in, Device) { return chunk(in[0], 3, -1); });
}

inline void add_indexing_cases(CaseTable& t) {
  auto gather_on = [](int64_t dim) {
    return binary([dim](const Tensor& x, const Tensor& i) { return gather(x, dim, i); });
  };
  t.add("gather_d1", {arg({17, 33}), ints({17, 5}, 0, 33)}, gather_on(1));
  t.add("gather_d0", {arg({17, 33}), ints({4, 33}, 0, 17)}, gather_on(0));
  t.add("gather_d0", {arg({7}), ints({12}, 0, 7)}, gather_on(0));
  t.add("gather_d2", {arg({3, 1, 5}), ints({3, 1, 2}, 0, 5)}, gather_on(2));
  t.add("gather_d1", {arg({64, 257}), ints({64, 31}, 0, 257)}, gather_on(1));
  t.add("gather_d1", {ints({17, 33}, -9, 9), ints({17, 5}, 0, 33, DType::i32)}, gather_on(1));
  t.add("gather_d1", {arg({17, 33}, DType::bf16), ints({17, 5}, 0, 33)}, gather_on(1));
  auto select_on = [](int64_t dim) {
    return binary([dim](const Tensor& x, const Tensor& i) { return index_select(x, dim, i); });
  };
  t.add("index_select_d0", {arg({17, 33}), ints({9}, 0, 17)}, select_on(0));
  t.add("index_select_d1", {arg({17, 33}), ints({40}, 0, 33)}, select_on(1));
  t.add("index_select_d1", {arg({3, 1, 5}), ints({1}, 0, 1, DType::i32)}, select_on(1));
  t.add("index_select_d0", {ints({7}, -9, 9), ints({3}, 0, 7)}, select_on(0));
  t.add("index_select_d0", {arg({64, 257}, DType::bf16), ints({11}, 0, 64)}, select_on(0));
  auto embed = binary([](const Tensor& w, const Tensor& i) { return embedding(i, w); });
  // Duplicate indices: the weight gradient accumulates.
  t.add("embedding", {arg({17, 33}), ints({3, 5}, 0, 17)}, embed);
  t.add("embedding", {arg({7, 1}), ints({1}, 0, 7)}, embed);
  t.add("embedding", {arg({257, 64}), ints({2, 9}, 0, 257, DType::i32)}, embed);
  t.add("embedding", {arg({17, 33}, DType::bf16), ints({5}, 0, 17)}, embed);
  t.add("pad_last", {arg({3, 1, 5})}, unary([](const Tensor& x) { return pad(x, {1, 2}); }));
  t.add("pad_two_dims", {arg({3, 1, 5})}, unary([](const Tensor& x) {
          return pad(x, {2, 1, 0, 3}, -1.5);
        }));
  t.add("pad_three_dims", {arg({17, 33})}, unary([](const Tensor& x) {
          return pad(x, {0, 1, 3, 0});
        }));
  t.add("pad_last", {ints({7}, 0, 9)}, unary([](const Tensor& x) { return pad(x, {3, 3}, 4); }));
  t.add("pad_last", {arg({64, 257}, DType::bf16)}, unary([](const Tensor& x) {
          return pad(x, {1, 0}, 2);
        }));
  for (int64_t diag : {0, 2, -3}) {
    const std::string sfx = diag < 0 ? absl::StrCat("m", -diag) : absl::StrCat(diag);
    t.add("triu_" + sfx, {arg({17, 33})}, unary([diag](const Tensor& x) { return triu(x, diag); }));
    t.add("tril_" + sfx, {arg({17, 33})}, unary([diag](const Tensor& x) { return tril(x, diag); }));
    t.add("triu_" + sfx, {arg({3, 7, 5})},
          unary([diag](const Tensor& x) { return triu(x, diag); }));
    t.add("tril_" + sfx, {arg({3, 7, 5})},
          unary([diag](const Tensor& x) { return tril(x, diag); }));
  }
  t.add("triu_0", {ints({7, 7}, -9, 9)}, unary([](const Tensor& x) { return triu(x); }));
  t.add("tril_0", {mask({1, 7})}, unary([](const Tensor& x) { return tril(x); }));
  t.add("tril_1", {arg({64, 257}, DType::bf16)}, unary([](const Tensor& x) { return tril(x, 1); }));
}

inline void add_scatter_cases(CaseTable& t) {
  auto scatter_on = [](int64_t dim) {
    return ternary([dim](const Tensor& x, const Tensor& i, const Tensor& s) {
      return scatter_add(x, dim, i, s);
    });
  };
  // Duplicate indices accumulate; the index may be smaller than src.
  t.add("scatter_add_d0", {arg({5, 7}), ints({9, 7}, 0, 5), arg({9, 7})}, scatter_on(0));
  t.add("scatter_add_d1", {arg({7, 5}), ints({7, 6}, 0, 5), arg({7, 9})}, scatter_on(1));
  t.add("scatter_add_d0", {arg({7}), ints({20}, 0, 7), arg({20})}, scatter_on(0));
  t.add("scatter_add_d2", {arg({3, 1, 5}), ints({3, 1, 4}, 0, 5), arg({3, 1, 4})}, scatter_on(2));
  t.add("scatter_add_d1", {arg({64, 257}), ints({64, 300}, 0, 257), arg({64, 300})}, scatter_on(1));
  t.add("scatter_add_d0",
        {ints({5, 7}, -9, 9), ints({9, 7}, 0, 5, DType::i32), ints({9, 7}, -9, 9)}, scatter_on(0));
  t.add("scatter_add_d0", {arg({5, 7}, DType::bf16), ints({9, 7}, 0, 5), arg({9, 7}, DType::bf16)},
        scatter_on(0), 2.0);
  auto index_add_on = [](int64_t dim) {
    return ternary([dim](const Tensor& x, const Tensor& i, const Tensor& s) {
      return index_add(x, dim, i, s);
    });
  };
  t.add("index_add_d0", {arg({17, 33}), ints({9}, 0, 17), arg({9, 33})}, index_add_on(0));
  t.add("index_add_d1", {arg({17, 33}), ints({4}, 0, 33), arg({17, 4})}, index_add_on(1));
  t.add("index_add_d0", {arg({7}), ints({12}, 0, 7), arg({12})}, index_add_on(0));
  t.add("index_add_d1", {arg({3, 1, 5}), ints({3}, 0, 1), arg({3, 3, 5})}, index_add_on(1));
  t.add("index_add_d0", {arg({64, 257}), ints({100}, 0, 64), arg({100, 257})}, index_add_on(0));
  t.add("index_add_d0", {ints({5, 3}, -9, 9), ints({4}, 0, 5), ints({4, 3}, -9, 9)},
        index_add_on(0));
  t.add("slice_scatter_d1_step3", {arg({17, 33}), arg({17, 9})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 1, 3, 29, 3); }));
  t.add("slice_scatter_d0", {arg({17, 33}), arg({7, 33})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 0, 2, 9); }));
  t.add("slice_scatter_d2", {arg({3, 1, 5}), arg({3, 1, 2})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 2, -2); }));
  t.add("slice_scatter_d1_step2", {arg({64, 257}), arg({64, 128})},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 1, 1, 256, 2); }));
  t.add("slice_scatter_d0", {ints({7}, -9, 9), ints({3}, -9, 9)},
        binary([](const Tensor& x, const Tensor& s) { return slice_scatter(x, s, 0, 4); }));
}

/// Data-dependent shapes: these run eagerly on the host from the inputs'
/// materialized values, and return a tensor on the inputs' device.
inline void add_dynamic_shape_cases(CaseTable& t) {
  t.add("nonzero", {special({17, 33})}, unary([](const Tensor& x) { return nonzero(x); }));
  t.add("nonzero", {mask({3, 1, 5})}, unary([](const Tensor& x) { return nonzero(x); }));
  t.add("nonzero_of_pending", {data({64, 257})},
        unary([](const Tensor& x) { return nonzero(gt(x, 0.2)); }));
  t.add("masked_select", {data({17, 33}), mask({17, 33})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x, m); }));
  t.add("masked_select_broadcast_pending", {data({3, 1, 5}), mask({4, 1})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x * 2.0, m); }));
  t.add("masked_select", {ints({7}, -9, 9), mask({7})},
        binary([](const Tensor& x, const Tensor& m) { return masked_select(x, m); }));
}

// ---- linear algebra, convolution, pooling --------------------------------------

inline void add_linalg_cases(CaseTable& t) {
  auto mm = binary([](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  t.add("matmul", {arg({17, 33}), arg({33, 7})}, mm);
  t.add("matmul", {arg({1, 1}), arg({1, 1})}, mm);
  t.add("matmul_vec_mat", {arg({7}), arg({7, 5})}, mm);
  t.add("matmul_mat_vec", {arg({3, 7}), arg({7})}, mm);
  t.add("matmul_dot", {arg({7}), arg({7})}, mm);
  t.add("matmul_batched_broadcast", {arg({2, 3, 4, 5}), arg({5, 6})}, mm);
  t.add("matmul_batch_dims_broadcast", {arg({2, 1, 4, 5}), arg({3, 5, 2})}, mm);
  t.add("matmul", {arg({3, 1, 5}), arg({3, 5, 1})}, mm);
  t.add("matmul", {arg({64, 257}), arg({257, 33})}, mm, 2.0);
  t.add("matmul", {arg({17, 33}, DType::bf16), arg({33, 7}, DType::bf16)}, mm);
  t.add("matmul", {arg({64, 257}, DType::bf16), arg({257, 33}, DType::bf16)}, mm, 2.0);
  t.add("matmul_transposed_operand", {arg({33, 17}), arg({33, 7})},
        binary([](const Tensor& a, const Tensor& b) { return matmul(transpose(a, 0, 1), b); }));
  auto bm = binary([](const Tensor& a, const Tensor& b) { return bmm(a, b); });
  t.add("bmm", {arg({3, 4, 5}), arg({3, 5, 6})}, bm);
  t.add("bmm", {arg({1, 7, 1}), arg({1, 1, 7})}, bm);
  t.add("bmm", {arg({4, 17, 33}), arg({4, 33, 9})}, bm);
  t.add("bmm", {arg({2, 7, 5}, DType::bf16), arg({2, 5, 3}, DType::bf16)}, bm);
  auto lin =
      ternary([](const Tensor& x, const Tensor& w, const Tensor& b) { return linear(x, w, b); });
  auto lin_nobias = binary([](const Tensor& x, const Tensor& w) { return linear(x, w); });
  t.add("linear", {arg({7, 5}), arg({3, 5}), arg({3})}, lin);
  t.add("linear", {arg({2, 3, 5}), arg({4, 5}), arg({4})}, lin);
  t.add("linear", {arg({1}), arg({7, 1}), arg({7})}, lin);
  t.add("linear_no_bias", {arg({2, 3, 5}), arg({4, 5})}, lin_nobias);
  t.add("linear", {arg({64, 257}), arg({33, 257}), arg({33})}, lin, 2.0);
  t.add("linear", {arg({17, 33}, DType::bf16), arg({9, 33}, DType::bf16), arg({9}, DType::bf16)},
        lin);
  // Linear followed by activations: what a matmul + eltwise post-op fusion sees.
  t.add("linear_gelu", {arg({17, 33}), arg({9, 33}), arg({9})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return gelu(linear(x, w, b));
        }));
  t.add("linear_relu_scale", {arg({17, 33}), arg({9, 33}), arg({9})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return relu(linear(x, w, b)) * 0.5 + 1.0;
        }));
}

inline void add_conv_pool_cases(CaseTable& t) {
  using Ints = std::vector<int64_t>;
  struct Conv {
    const char* label;
    Shape input, weight;
    bool bias;
    Ints stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<Conv> convs = {
      {"basic", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {1}, {0}, {1}, 1},
      {"stride2_pad1", {2, 3, 7, 9}, {4, 3, 3, 3}, true, {2}, {1}, {1}, 1},
      {"stride_pad_per_dim", {1, 2, 8, 5}, {3, 2, 3, 2}, false, {2, 1}, {1, 0}, {1}, 1},
      {"dilation2", {2, 3, 9, 9}, {2, 3, 3, 3}, true, {1}, {2}, {2}, 1},
      {"groups2", {1, 4, 6, 5}, {6, 2, 3, 2}, true, {1}, {1}, {1}, 2},
      {"depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, false, {1}, {1}, {1}, 3},
      {"pointwise", {1, 5, 1, 7}, {4, 5, 1, 1}, true, {1}, {0}, {1}, 1},
      {"larger", {4, 16, 17, 17}, {8, 16, 3, 3}, true, {1}, {1}, {1}, 1},
  };
  for (const Conv& c : convs) {
    std::vector<InputSpec> in = {arg(c.input), arg(c.weight)};
    if (c.bias) in.push_back(arg({c.weight[0]}));
    t.add(
        absl::StrCat("conv2d_", c.label), in,
        [c](const Inputs& x, Device) {
          return Outputs{conv2d(x[0], x[1], c.bias ? x[2] : Tensor(), c.stride, c.padding,
                                c.dilation, c.groups)};
        },
        c.input.numel() > 10000 ? 2.0 : 1.0);
  }
  t.add("conv2d_basic", {arg({2, 3, 7, 9}, DType::bf16), arg({4, 3, 3, 3}, DType::bf16)},
        binary([](const Tensor& x, const Tensor& w) { return conv2d(x, w); }), 2.0);
  t.add("conv2d_relu_pool", {arg({2, 3, 8, 8}), arg({4, 3, 3, 3}), arg({4})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return max_pool2d(relu(conv2d(x, w, b, {1}, {1})), {2});
        }));

  struct Pool {
    const char* label;
    Shape input;
    Ints kernel, stride, padding, dilation;
    bool ceil_mode, count_include_pad;
  };
  const std::vector<Pool> pools = {
      {"k2", {2, 3, 8, 8}, {2}, {}, {0}, {1}, false, true},
      {"k3_s1_p1", {1, 2, 7, 9}, {3}, {1}, {1}, {1}, false, true},
      {"k3_s2_ceil", {1, 2, 7, 9}, {3}, {2}, {0}, {1}, true, true},
      {"k2x3_s2x1_p1x0", {2, 1, 7, 5}, {2, 3}, {2, 1}, {1, 0}, {1}, false, true},
      {"k3_s2_p1_no_pad_count", {1, 3, 9, 9}, {3}, {2}, {1}, {1}, false, false},
      {"k3_s2_p1_ceil_no_pad_count", {1, 3, 8, 8}, {3}, {2}, {1}, {1}, true, false},
      {"k1", {1, 1, 1, 7}, {1}, {}, {0}, {1}, false, true},
      {"larger_k3_s2", {4, 16, 33, 33}, {3}, {2}, {1}, {1}, false, true},
  };
  for (const Pool& p : pools) {
    t.add(absl::StrCat("max_pool2d_", p.label), {arg(p.input)}, unary([p](const Tensor& x) {
            return max_pool2d(x, p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
          }));
    t.add(absl::StrCat("avg_pool2d_", p.label), {arg(p.input)}, unary([p](const Tensor& x) {
            return avg_pool2d(x, p.kernel, p.stride, p.padding, p.ceil_mode, p.count_include_pad);
          }));
  }
  t.add("max_pool2d_dilation2", {arg({1, 2, 9, 9})},
        unary([](const Tensor& x) { return max_pool2d(x, {3}, {1}, {0}, {2}); }));
  t.add("max_pool2d_k2", {arg({2, 3, 8, 8}, DType::bf16)},
        unary([](const Tensor& x) { return max_pool2d(x, {2}); }));
  t.add("avg_pool2d_k2", {arg({2, 3, 8, 8}, DType::bf16)},
        unary([](const Tensor& x) { return avg_pool2d(x, {2}); }));
}

// ---- softmax, norms, dropout --------------------------------------------------

inline void add_nn_cases(CaseTable& t) {
  const std::vector<std::pair<Shape, int64_t>> softmax_layouts = {
      {{7}, 0}, {{3, 1, 5}, 1}, {{3, 1, 5}, -1}, {{17, 33}, 0}, {{17, 33}, -1}, {{64, 257}, -1}};
  for (const auto& [s, dim] : softmax_layouts) {
    const std::string d = dim < 0 ? "dlast" : absl::StrCat("d", dim);
    t.add("softmax_" + d, {arg(s)}, unary([dim](const Tensor& x) { return softmax(x, dim); }));
    t.add("log_softmax_" + d, {arg(s)},
          unary([dim](const Tensor& x) { return log_softmax(x, dim); }));
  }
  t.add("softmax_dlast", {arg({17, 33}, DType::bf16)},
        unary([](const Tensor& x) { return softmax(x, -1); }));
  t.add("log_softmax_dlast", {arg({17, 33}, DType::bf16)},
        unary([](const Tensor& x) { return log_softmax(x, -1); }));
  // Large logits: the max subtraction matters.
  t.add("softmax_scaled_logits", {arg({17, 33})},
        unary([](const Tensor& x) { return softmax(x * 80.0, -1); }));

  auto ln = ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
    return layer_norm(x, w.shape().dims(), w, b);
  });
  t.add("layer_norm", {arg({17, 33}), arg({33}), arg({33})}, ln);
  t.add("layer_norm", {arg({3, 1, 5}), arg({1, 5}), arg({1, 5})}, ln);
  t.add("layer_norm", {arg({2, 3, 7}), arg({3, 7}), arg({3, 7})}, ln);
  t.add("layer_norm", {arg({64, 257}), arg({257}), arg({257})}, ln, 2.0);
  t.add("layer_norm", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16), arg({33}, DType::bf16)},
        ln, 2.0);
  t.add("layer_norm_no_affine", {arg({17, 33})},
        unary([](const Tensor& x) { return layer_norm(x, {33}); }));
  t.add("layer_norm_eps_0_1", {arg({7}), arg({7}), arg({7})},
        ternary([](const Tensor& x, const Tensor& w, const Tensor& b) {
          return layer_norm(x, {7}, w, b, 0.1);
        }));
  auto rms = binary(
      [](const Tensor& x, const Tensor& w) { return rms_norm(x, w.shape().dims(), w, 1e-6); });
  t.add("rms_norm", {arg({17, 33}), arg({33})}, rms);
  t.add("rms_norm", {arg({3, 1, 5}), arg({5})}, rms);
  t.add("rms_norm", {arg({64, 257}), arg({257})}, rms, 2.0);
  t.add("rms_norm", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)}, rms, 2.0);
  t.add("rms_norm_default_eps_no_weight", {arg({2, 3, 7})}, unary([](const Tensor& x) {
          return rms_norm(x, {3, 7});
        }));

  // Dropout: the runner seeds both backends alike, so the keep masks must
  // be identical; the second output compares them exactly.
  auto dropout_case = [](double p, bool train = true) {
    return [p, train](const Inputs& in, Device) {
      Tensor y = dropout(in[0], p, train);
      return Outputs{y, eq(y, 0.0)};
    };
  };
  for (Shape s : {Shape{7}, Shape{3, 1, 5}, Shape{17, 33}, Shape{64, 257}}) {
    t.add("dropout_p0_3", {arg(s)}, dropout_case(0.3));
    t.add("dropout_p0_5", {arg(s)}, dropout_case(0.5));
  }
  t.add("dropout_eval", {arg({17, 33})}, dropout_case(0.5, false));
  t.add("dropout_p0", {arg({17, 33})}, dropout_case(0.0));
  t.add("dropout_p0_2", {arg({17, 33}, DType::bf16)}, dropout_case(0.2));
  // Two draws in one graph: each takes its own slice of the Philox stream.
  t.add("dropout_twice", {arg({17, 33})},
        unary([](const Tensor& x) { return dropout(dropout(x, 0.3) + 1.0, 0.4); }));
}

// ---- attention ------------------------------------------------------------------

/// One attention case: q, k, v shapes, the options and which extra inputs
/// (mask, valid_seq_len) it takes.
struct SdpaCase {
  std::string label;
  Shape q, k, v;
  DType dtype = DType::f32;
  std::function<SdpaOptions()> options;
  std::vector<InputSpec> extra; // attn_mask (float or bool), then valid_seq_len
  bool fused = false;           // fused_sdpa returning probabilities and mask
};

inline SdpaOptions sdpa_opts(bool causal = false, double dropout_p = 0, bool recompute = true) {
  SdpaOptions o;
  o.is_causal = causal;
  o.dropout_p = dropout_p;
  o.recompute = recompute;
  return o;
}

inline void add_sdpa_case(CaseTable& t, const SdpaCase& c) {
  std::vector<InputSpec> in = {arg(c.q, c.dtype), arg(c.k, c.dtype), arg(c.v, c.dtype)};
  for (const InputSpec& e : c.extra) in.push_back(e);
  const bool has_mask =
      !c.extra.empty() && c.extra[0].dtype != DType::i64 && c.extra[0].dtype != DType::i32;
  const bool has_len = c.extra.size() == 2 || (!c.extra.empty() && !has_mask);
  t.add((c.fused ? "fused_sdpa_" : "sdpa_") + c.label, in,
        [c, has_mask, has_len](const Inputs& x, Device) {
          SdpaOptions o = c.options();
          if (has_mask) o.attn_mask = x[3];
          if (has_len) o.valid_seq_len = x.back();
          if (!c.fused) return Outputs{scaled_dot_product_attention(x[0], x[1], x[2], o)};
          o.return_attn_probs = true;
          o.return_dropout_mask = o.dropout_p > 0;
          SdpaResult r = fused_sdpa(x[0], x[1], x[2], o);
          // The probabilities are not differentiable (only `out` is).
          Outputs out = {r.out, r.attn_probs.detach()};
          if (r.dropout_mask.defined()) out.push_back(r.dropout_mask);
          return out;
        },
        c.dtype == DType::bf16 ? 2.0 : 1.0);
}

inline void add_attention_cases(CaseTable& t) {
  auto plain = [] { return sdpa_opts(); };
  auto causal = [] { return sdpa_opts(true); };
  auto right = [](bool is_causal, double p, bool recompute) {
    return [=] {
      SdpaOptions o = sdpa_opts(is_causal, p, recompute);
      o.padding_side = PaddingSide::right;
      return o;
    };
  };
  auto left = [](bool is_causal, double p, bool recompute) {
    return [=] {
      SdpaOptions o = sdpa_opts(is_causal, p, recompute);
      o.padding_side = PaddingSide::left;
      return o;
    };
  };
  const InputSpec lens = literal({2, 6, 1}, {3});
  const InputSpec lens_with_zero = literal({0, 3}, {2}, DType::i32);
  // clang-format off
  const std::vector<SdpaCase> cases = {
      {"basic", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain},
      {"single_query_key", {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, DType::f32, plain},
      {"rank4_causal", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32, causal},
      {"causal_L_lt_S", {1, 2, 5, 4}, {1, 2, 7, 4}, {1, 2, 7, 6}, DType::f32, causal},
      {"causal_L_gt_S", {1, 2, 7, 4}, {1, 2, 5, 4}, {1, 2, 5, 6}, DType::f32, causal},
      {"scale_0_5", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, [] {
         SdpaOptions o;
         o.scale = 0.5;
         return o;
       }},
      {"bool_mask", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain, {mask({5, 7})}},
      {"bool_mask_broadcast_heads", {2, 2, 6, 4}, {2, 2, 6, 4}, {2, 2, 6, 4}, DType::f32, plain,
       {mask({2, 1, 6, 6})}},
      // A float mask that requires grad: its gradient is compared too.
      {"float_mask", {2, 3, 5, 4}, {2, 3, 7, 4}, {2, 3, 7, 3}, DType::f32, plain, {arg({2, 1, 5, 7})}},
      {"valid_len_right", {3, 4, 6, 8}, {3, 4, 6, 8}, {3, 4, 6, 8}, DType::f32, right(false, 0, true), {lens}},
      {"valid_len_left", {3, 4, 6, 8}, {3, 4, 6, 8}, {3, 4, 6, 8}, DType::f32, left(false, 0, true), {lens}},
      {"valid_len_right_causal", {3, 6, 8}, {3, 6, 8}, {3, 6, 5}, DType::f32, right(true, 0, true), {lens}},
      {"valid_len_left_causal", {3, 6, 8}, {3, 6, 8}, {3, 6, 5}, DType::f32, left(true, 0, true), {lens}},
      {"valid_len_zero_left", {2, 2, 3, 4}, {2, 2, 3, 4}, {2, 2, 3, 4}, DType::f32, left(false, 0, true),
       {lens_with_zero}},
      {"valid_len_left_float_mask", {3, 2, 6, 4}, {3, 2, 6, 4}, {3, 2, 6, 4}, DType::f32,
       left(false, 0, true), {arg({6, 6}), lens}},
      {"dropout", {2, 6, 4}, {2, 7, 4}, {2, 7, 4}, DType::f32, [] { return sdpa_opts(false, 0.3); }},
      {"dropout_causal_valid_len_right", {3, 2, 6, 4}, {3, 2, 6, 4}, {3, 2, 6, 4}, DType::f32,
       right(true, 0.25, true), {lens}},
      {"recompute_off", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32,
       [] { return sdpa_opts(false, 0, false); }},
      {"recompute_off_causal_dropout", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::f32,
       [] { return sdpa_opts(true, 0.2, false); }},
      {"recompute_off_valid_len_left_dropout", {3, 6, 8}, {3, 6, 8}, {3, 6, 8}, DType::f32,
       left(false, 0.3, false), {lens}},
      {"recompute_off_float_mask", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32,
       [] { return sdpa_opts(false, 0, false); }, {arg({5, 7})}},
      // Sizes where a tiled (flash) kernel takes several blocks, odd tails.
      {"larger_causal", {2, 4, 64, 32}, {2, 4, 64, 32}, {2, 4, 64, 32}, DType::f32, causal},
      {"larger_odd", {1, 2, 129, 64}, {1, 2, 257, 64}, {1, 2, 257, 64}, DType::f32, plain},
      {"larger_valid_len_left_causal", {3, 2, 70, 16}, {3, 2, 70, 16}, {3, 2, 70, 16}, DType::f32,
       left(true, 0, true), {literal({70, 33, 1}, {3})}},
      {"basic", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::bf16, plain},
      {"rank4_causal", {2, 3, 9, 8}, {2, 3, 9, 8}, {2, 3, 9, 8}, DType::bf16, causal},
  };
  for (const SdpaCase& c : cases) add_sdpa_case(t, c);
  std::vector<SdpaCase> fused = {
      {"probs", {2, 5, 4}, {2, 7, 4}, {2, 7, 3}, DType::f32, plain},
      {"probs_mask_dropout", {2, 2, 6, 4}, {2, 2, 7, 4}, {2, 2, 7, 4}, DType::f32,
       [] { return sdpa_opts(false, 0.3); }},
      {"probs_mask_dropout_causal_valid_len_left", {3, 6, 8}, {3, 6, 8}, {3, 6, 8}, DType::f32,
       left(true, 0.3, true), {lens}},
      {"probs_recompute_off_dropout", {2, 6, 4}, {2, 6, 4}, {2, 6, 4}, DType::f32,
       [] { return sdpa_opts(false, 0.4, false); }},
  };
  // clang-format on
  for (SdpaCase& c : fused) {
    c.fused = true;
    add_sdpa_case(t, c);
  }
}

// ---- losses -----------------------------------------------------------------------

inline void add_loss_cases(CaseTable& t) {
  auto ce = [](Reduction r, int64_t ignore = -100, double smoothing = 0) {
    return binary([=](const Tensor& x, const Tensor& y) {
      return cross_entropy(x, y, r, ignore, smoothing);
    });
  };
  t.add("cross_entropy_mean", {arg({7, 5}), ints({7}, 0, 5)}, ce(Reduction::mean));
  t.add("cross_entropy_sum", {arg({17, 33}), ints({17}, 0, 33)}, ce(Reduction::sum));
  t.add("cross_entropy_none", {arg({17, 33}), ints({17}, 0, 33)}, ce(Reduction::none));
  t.add("cross_entropy_one_row", {arg({1, 1}), ints({1}, 0, 1)}, ce(Reduction::mean));
  t.add("cross_entropy_ignore_index", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        ce(Reduction::mean));
  t.add("cross_entropy_ignore_index_3", {arg({7, 5}), literal({0, 3, 4, 3, 3, 1, 2}, {7})},
        ce(Reduction::none, 3));
  t.add("cross_entropy_label_smoothing", {arg({17, 33}), ints({17}, 0, 33)},
        ce(Reduction::mean, -100, 0.1));
  t.add("cross_entropy_smoothing_ignore", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        ce(Reduction::sum, -100, 0.2));
  t.add("cross_entropy_mean", {arg({64, 257}), ints({64}, 0, 257)}, ce(Reduction::mean));
  t.add("cross_entropy_mean", {arg({17, 33}), ints({17}, 0, 33, DType::i32)}, ce(Reduction::mean));
  t.add("cross_entropy_mean", {arg({17, 33}, DType::bf16), ints({17}, 0, 33)}, ce(Reduction::mean),
        2.0);
  auto nll = [](Reduction r, int64_t ignore = -100) {
    return binary([=](const Tensor& x, const Tensor& y) { return nll_loss(x, y, r, ignore); });
  };
  t.add("nll_loss_mean", {arg({7, 5}), ints({7}, 0, 5)}, nll(Reduction::mean));
  t.add("nll_loss_sum", {arg({17, 33}), ints({17}, 0, 33)}, nll(Reduction::sum));
  t.add("nll_loss_none_ignore", {arg({7, 5}), literal({0, -100, 4, 2, -100, 1, 3}, {7})},
        nll(Reduction::none));
  t.add("nll_loss_of_log_softmax", {arg({64, 257}), ints({64}, 0, 257)},
        binary([](const Tensor& x, const Tensor& y) { return nll_loss(log_softmax(x, 1), y); }));
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const std::string sfx = r == Reduction::mean ? "mean" : r == Reduction::sum ? "sum" : "none";
    auto mse = binary([r](const Tensor& a, const Tensor& b) { return mse_loss(a, b, r); });
    auto bce = binary([r](const Tensor& a, const Tensor& b) {
      return binary_cross_entropy_with_logits(a, b, r);
    });
    for (Shape s : {Shape{1}, Shape{3, 1, 5}, Shape{17, 33}}) {
      t.add("mse_loss_" + sfx, {arg(s), arg(s)}, mse);
      t.add("bce_with_logits_" + sfx, {arg(s), data(s, DType::f32, Fill::probability)}, bce);
    }
  }
  t.add("mse_loss_mean", {arg({64, 257}), arg({64, 257})},
        binary([](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }), 4.0);
  // Large logits: the log-sum-exp form must stay finite.
  t.add("bce_with_logits_large_logits",
        {arg({17, 33}), data({17, 33}, DType::f32, Fill::probability)},
        binary([](const Tensor& a, const Tensor& b) {
          return binary_cross_entropy_with_logits(a * 60.0, b, Reduction::none);
        }));
  t.add("mse_loss_mean", {arg({17, 33}, DType::bf16), arg({17, 33}, DType::bf16)},
        binary([](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }), 2.0);
}

// ---- optimizer steps ------------------------------------------------------------------

using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

/// Two steps of `make` on parameters [17, 33] and [33] (f32 or bf16) with
/// loss = sum(tanh(x @ w + b) * target); returns the updated parameters and
/// every state tensor the optimizer keeps.
inline CaseFn optimizer_steps(OptimizerFactory make, bool clip = false) {
  return [make, clip](const Inputs& in, Device device) {
    Tensor w = in[0], b = in[1];
    std::unique_ptr<optim::Optimizer> opt = make({w, b});
    const Tensor x = to(fixed_tensor({8, 17}, 1, device), w.dtype());
    const Tensor target = to(fixed_tensor({8, 33}, 2, device), w.dtype());
    for (int step = 0; step < 2; ++step) {
      opt->zero_grad();
      sum(tanh(matmul(x, w) + b) * target).backward();
      if (clip) optim::clip_grad_norm_(opt->parameters(), 0.5);
      opt->step();
      mark_step();
    }
    Outputs out = {w, b};
    for (const auto& [name, value] : opt->state_dict())
      if (name.rfind("state.", 0) == 0) out.push_back(value);
    return out;
  };
}

inline void add_optimizer_cases(CaseTable& t) {
  const std::vector<std::pair<const char*, OptimizerFactory>> optimizers = {
      {"sgd",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions{.lr = 0.1});
       }},
      {"sgd_momentum_dampening_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p,
             optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"sgd_nesterov",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
       }},
      {"adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions{.lr = 0.01});
       }},
      {"adam_amsgrad_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(
             p, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"adamw",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01});
       }},
      {"adamw_amsgrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(
             p, optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"adadelta",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions{.lr = 1.0});
       }},
  };
  for (const auto& [name, make] : optimizers) {
    t.add_without_grads(absl::StrCat("optim_", name), {arg({17, 33}), arg({33})},
                        optimizer_steps(make));
  }
  t.add_without_grads("optim_adamw_clip_grad_norm", {arg({17, 33}), arg({33})},
                      optimizer_steps(optimizers[5].second, /*clip=*/true));
  t.add_without_grads("optim_adamw", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(optimizers[5].second));
  t.add_without_grads("optim_sgd_momentum", {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(optimizers[1].second));
}

/// Every case, built once.
inline const std::vector<ConformanceCase>& all_cases() {
  static const std::vector<ConformanceCase> cases = [] {
    CaseTable t;
    add_creation_cases(t);
    add_unary_cases(t);
    add_binary_cases(t);
    add_comparison_cases(t);
    add_where_cases(t);
    add_reduction_cases(t);
    add_shape_cases(t);
    add_indexing_cases(t);
    add_scatter_cases(t);
    add_dynamic_shape_cases(t);
    add_linalg_cases(t);
    add_conv_pool_cases(t);
    add_nn_cases(t);
    add_attention_cases(t);
    add_loss_cases(t);
    add_optimizer_cases(t);
    return t.take();
  }();
  return cases;
}

} // namespace mstep::conformance
