// Conformance cases: creation, unary and binary elementwise ops,
// comparisons, logic, where and reductions.
#pragma once

#include "test/unit/conformance/ConformanceCase.h"

namespace mstep::conformance {

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

} // namespace mstep::conformance
