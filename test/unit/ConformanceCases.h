// The backend conformance table: one named case per op, shape and dtype
// of the public API. A case lists its inputs (shape, dtype, how they are
// filled, whether they require grad) and a function of those inputs; the
// driver in backend_conformance_test.cpp runs it on the ref backend (the
// oracle) and on every other backend with the same input data and compares
// outputs and input gradients. The case model is in
// conformance/ConformanceCase.h, the cases in conformance/*Cases.h.
#pragma once

#include "test/unit/conformance/ElementwiseCases.h"
#include "test/unit/conformance/HalfCases.h"
#include "test/unit/conformance/NNCases.h"
#include "test/unit/conformance/ShapeCases.h"

namespace mstep::conformance {

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

/// Every case, the 16-bit ones of HalfCases.h, and the f16 twin of every
/// case with a bf16 input, built once (backend_conformance_test's list,
/// and the cuda conformance suites').
inline const std::vector<ConformanceCase>& all_cases_with_f16() {
  static const std::vector<ConformanceCase> cases = [] {
    CaseTable t;
    add_16_bit_cases(t);
    std::vector<ConformanceCase> out = all_cases();
    for (ConformanceCase& c : t.take()) out.push_back(std::move(c));
    for (ConformanceCase& c : f16_twins(out)) out.push_back(std::move(c));
    return out;
  }();
  return cases;
}

} // namespace mstep::conformance
