// A custom op with a scalar form, shared by the unit and oracle tests:
// scaled_elu(x; alpha = 1, scale = 1) = scale * (x > 0 ? x : alpha * (e^x - 1))
// on f32 or f64 (PyTorch: scale * torch.nn.functional.elu(x, alpha)).
// Its ref and cpu kernels count their calls, so a test can tell whether a
// backend ran the kernel or the fused scalar form.
#pragma once

#include <atomic>
#include <cmath>
#include <string>
#include <vector>

#include "mstep/mstep.h"

namespace mstep::test_ops {

inline constexpr const char* kScaledElu = "test_ops.scaled_elu";

/// Calls of the kernel so far (any backend).
inline std::atomic<int>& scaled_elu_kernel_calls() {
  static std::atomic<int> calls{0};
  return calls;
}

/// The kernel, in the element type with the attributes rounded to it, in
/// the order of the scalar form (so the two differ only by exp's rounding).
template <typename T>
void scaled_elu_loop(const T* x, T* y, int64_t n, double alpha, double scale) {
  const T a = static_cast<T>(alpha), s = static_cast<T>(scale);
  for (int64_t i = 0; i < n; ++i) y[i] = s * (x[i] > T(0) ? x[i] : a * (std::exp(x[i]) - T(1)));
}

inline absl::Status scaled_elu_kernel(const HostKernelCall& call) {
  ++scaled_elu_kernel_calls();
  MSTEP_ASSIGN_OR_RETURN(double alpha, call.attrs.get_double("alpha"));
  MSTEP_ASSIGN_OR_RETURN(double scale, call.attrs.get_double("scale"));
  const int64_t n = call.input_types[0].shape.numel();
  if (call.input_types[0].dtype == DType::f64)
    scaled_elu_loop(static_cast<const double*>(call.inputs[0]),
                    static_cast<double*>(call.outputs[0]), n, alpha, scale);
  else
    scaled_elu_loop(static_cast<const float*>(call.inputs[0]),
                    static_cast<float*>(call.outputs[0]), n, alpha, scale);
  return absl::OkStatus();
}

/// scale * where(x > 0, x, alpha * (exp(x) - 1)).
inline CustomScalarForm scaled_elu_form() {
  return make_scalar_form([](ScalarFormBuilder& f) {
    ScalarValue x = f.input(0);
    return std::vector{f.attr("scale") * f.where(x > 0.0, x, f.attr("alpha") * (f.exp(x) - 1.0))};
  });
}

inline CustomOpDef scaled_elu_def() {
  return {.name = kScaledElu,
          .schema = {.inputs = {{"x", {DType::f32, DType::f64}}},
                     .attrs = {{"alpha", CustomAttrType::float64, 1.0},
                               {"scale", CustomAttrType::float64, 1.0}},
                     .scalar_form = scaled_elu_form()},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", host_kernel(scaled_elu_kernel)},
                      {"cpu", host_kernel(scaled_elu_kernel)}}};
}

/// Registers the op (again: a no-op).
inline void register_scaled_elu() { register_custom_op(scaled_elu_def()); }

/// A call.
inline Tensor scaled_elu(const Tensor& x, double alpha = 1.0, double scale = 1.0) {
  register_scaled_elu();
  return custom(kScaledElu, {x}, {{"alpha", alpha}, {"scale", scale}})[0];
}

} // namespace mstep::test_ops
