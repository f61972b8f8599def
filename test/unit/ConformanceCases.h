// The backend conformance table: one named case per op, shape and dtype
// of the public API. A case lists its inputs (shape, dtype, how they are
// filled, whether they require grad) and a function of those inputs; the
// driver in backend_conformance_test.cpp runs it on the ref backend (the
// oracle) and on every other backend with the same input data and compares
// outputs and input gradients. The case model is in
// conformance/ConformanceCase.h, the cases in conformance/*Cases.h.
#pragma once

#include "test/unit/conformance/ElementwiseCases.h"
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

} // namespace mstep::conformance
