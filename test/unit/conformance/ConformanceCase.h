// The backend conformance suite's case model: what a case is (named
// inputs with shapes, dtypes and fills, and a function of them), how its
// inputs are made, and the table cases are added to. The cases themselves
// are in the *Cases.h headers next to this one, one per op family;
// ../ConformanceCases.h collects them; the driver is
// ../backend_conformance_test.cpp.
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

/// The loss a case's backward runs from: sum(out * w) over every output
/// that requires grad, w fixed per output, accumulated in f32; undefined
/// when no output requires grad.
inline Tensor weighted_loss(const std::vector<Tensor>& outputs, Device device) {
  Tensor loss;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    if (!out.requires_grad()) continue;
    Tensor term = sum(to(out, DType::f32) * fixed_tensor(out.shape(), 500 + i, device));
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
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

} // namespace mstep::conformance
