// The backend conformance table: one named case per op, shape and dtype
// of the public API. A case lists its inputs (shape, dtype, how they are
// filled, whether they require grad) and a function of those inputs; the
// driver in backend_conformance_test.cpp runs it on the ref backend (the
// oracle) and on every other backend with the same input data and compares
// outputs and input gradients. The case model is in
// conformance/ConformanceCase.h, the cases in conformance/*Cases.h.
#pragma once

#include "absl/strings/str_replace.h"
#include "test/unit/conformance/ElementwiseCases.h"
#include "test/unit/conformance/NNCases.h"
#include "test/unit/conformance/ShapeCases.h"

namespace mstep::conformance {

/// The f16 twin of every case with a bf16 input: the same op on f16
/// inputs, named with "f16" for "bf16", so each 16-bit float case runs in
/// both formats (the cases that make their own 16-bit tensors list f16
/// themselves).
inline void add_f16_twins(std::vector<ConformanceCase>& cases) {
  const size_t n = cases.size();
  for (size_t i = 0; i < n; ++i) {
    bool bf16 = false;
    for (const InputSpec& s : cases[i].inputs) bf16 |= s.dtype == DType::bf16;
    if (!bf16) continue;
    ConformanceCase twin = cases[i];
    for (InputSpec& s : twin.inputs)
      if (s.dtype == DType::bf16) s.dtype = DType::f16;
    twin.name = absl::StrReplaceAll(twin.name, {{"bf16", "f16"}});
    cases.push_back(std::move(twin));
  }
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
    std::vector<ConformanceCase> cases = t.take();
    add_f16_twins(cases);
    return cases;
  }();
  return cases;
}

} // namespace mstep::conformance
