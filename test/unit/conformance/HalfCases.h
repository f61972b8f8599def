// Conformance cases in f16, and bf16 cases the other 16-bit-float cases
// need: f16 creation and casts, f64 to bf16 / f16 casts, the clipped optimizer update of bf16
// parameters, and (f16_twins) the f16 twin of every case with a bf16
// input. backend_conformance_test runs them on every backend, and the
// cuda suites compile them and run their plans on the host
// (all_cases_with_f16, ../ConformanceCases.h).
#pragma once

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "test/unit/conformance/NNCases.h"

namespace mstep::conformance {

inline void add_16_bit_cases(CaseTable& t) {
  for (Shape s : {Shape{1}, Shape{3, 1, 5}, Shape{17, 33}}) {
    const std::string sig = absl::StrJoin(s.dims(), "x");
    t.add("ones_f16_" + sig, {}, on_device([s](Device d) { return ones(s, DType::f16, d); }));
    t.add("rand_f16_" + sig, {}, on_device([s](Device d) { return rand(s, DType::f16, d); }));
    // f32 to f16 rounds to nearest even (ties, overflow, subnormals).
    t.add("to_f16", {arg(s)}, unary([](const Tensor& x) { return to(x * 3.0, DType::f16); }));
  }
  // f64 to bf16 / f16 goes through f32 (two roundings, as ref and PyTorch),
  // also inside a fusion (x * 3 and the cast fuse).
  for (DType to_dtype : {DType::bf16, DType::f16})
    t.add(absl::StrCat("to_", dtype_name(to_dtype), "_from_f64"), {arg({17, 33}, DType::f64)},
          unary([to_dtype](const Tensor& x) { return to(x * 3.0, to_dtype); }));
  t.add("arange_f16", {}, on_device([](Device d) { return arange(0, 17, 1, DType::f16, d); }));
  // Clipping 16-bit gradients: the norms in the parameters' arithmetic
  // (ref's); f16_twins adds the f16 ones.
  auto adamw = [](std::vector<Tensor> p) {
    return std::unique_ptr<optim::Optimizer>(new optim::AdamW(p, {.lr = 0.01}));
  };
  auto sgd_momentum = [](std::vector<Tensor> p) {
    return std::unique_ptr<optim::Optimizer>(
        new optim::SGD(p, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}));
  };
  t.add_without_grads("optim_adamw_clip_grad_norm",
                      {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(adamw, /*clip=*/true));
  t.add_without_grads("optim_sgd_momentum_clip_grad_norm_inf",
                      {arg({17, 33}, DType::bf16), arg({33}, DType::bf16)},
                      optimizer_steps(sgd_momentum, /*clip=*/true,
                                      std::numeric_limits<double>::infinity()));
}

/// The f16 twins of `cases`: each case with a bf16 input, on f16 inputs,
/// named with "f16" for "bf16".
inline std::vector<ConformanceCase> f16_twins(const std::vector<ConformanceCase>& cases) {
  std::vector<ConformanceCase> out;
  for (const ConformanceCase& c : cases) {
    bool bf16 = false;
    for (const InputSpec& s : c.inputs) bf16 |= s.dtype == DType::bf16;
    if (!bf16) continue;
    ConformanceCase twin = c;
    for (InputSpec& s : twin.inputs)
      if (s.dtype == DType::bf16) s.dtype = DType::f16;
    twin.name = absl::StrReplaceAll(twin.name, {{"bf16", "f16"}});
    out.push_back(std::move(twin));
  }
  return out;
}

} // namespace mstep::conformance
