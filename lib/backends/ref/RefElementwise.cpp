// Ref kernels for elementwise ops. Operands share one dtype (the API
// inserts casts) and broadcast to the result shape; arithmetic runs in
// Compute<T> (float for 16-bit floats) and rounds once on store.
#include <cmath>

#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

Shape::Dims broadcast_strides(const Shape& in, const Shape& out) {
  Shape::Dims strides(out.rank(), 0);
  Shape::Dims in_strides = in.strides();
  const int64_t lead = out.rank() - in.rank();
  for (int64_t d = 0; d < in.rank(); ++d) strides[lead + d] = in[d] == 1 ? 0 : in_strides[d];
  return strides;
}

namespace {

/// Applies `f(x)` elementwise; input and output may differ in dtype.
template <typename F>
absl::Status map_unary(const KernelArgs& a, F f) {
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  dispatch(in.type().dtype, [&]<typename T>() {
    dispatch(out.type().dtype, [&]<typename U>() {
      const T* x = in.data<T>();
      U* y = out.data<U>();
      for (int64_t i = 0; i < out.numel(); ++i)
        y[i] = static_cast<U>(f(static_cast<Compute<T>>(x[i])));
    });
  });
  return absl::OkStatus();
}

/// Applies `f(x, y)` with broadcasting. Operands share a dtype.
template <typename F>
absl::Status map_binary(const KernelArgs& a, F f) {
  const HostBuffer& lhs = a.in(0);
  const HostBuffer& rhs = a.in(1);
  HostBuffer& out = a.out();
  const Shape& shape = out.type().shape;
  std::array<Shape::Dims, 2> strides = {
      broadcast_strides(lhs.type().shape, shape),
      broadcast_strides(rhs.type().shape, shape)};
  dispatch(lhs.type().dtype, [&]<typename T>() {
    dispatch(out.type().dtype, [&]<typename U>() {
      const T* x = lhs.data<T>();
      const T* y = rhs.data<T>();
      U* z = out.data<U>();
      for_each_strided(shape, strides, [&](int64_t i, const std::array<int64_t, 2>& o) {
        z[i] = static_cast<U>(
            f(static_cast<Compute<T>>(x[o[0]]), static_cast<Compute<T>>(y[o[1]])));
      });
    });
  });
  return absl::OkStatus();
}

template <typename V>
V gelu_erf(V x) {
  return V(0.5) * x * (V(1) + std::erf(x * V(0.70710678118654752440)));
}
template <typename V>
V gelu_tanh(V x) {
  const V k = V(0.79788456080286535588);  // sqrt(2/pi)
  return V(0.5) * x * (V(1) + std::tanh(k * (x + V(0.044715) * x * x * x)));
}
template <typename V>
V sigmoid(V x) {
  return V(1) / (V(1) + std::exp(-x));
}

// Integer-safe helpers: the API only sends floating inputs to the math
// functions, but the generic lambdas are still instantiated for ints.
template <typename V>
auto fp(V x) {
  if constexpr (std::is_floating_point_v<V>) return x; else return static_cast<double>(x);
}

/// |x|; std::fabs for floats so that abs(-0.0) is +0.0, as PyTorch.
template <typename V>
V abs_value(V x) {
  if constexpr (std::is_floating_point_v<V>) return std::fabs(x); else return x < 0 ? V(-x) : x;
}

#define MSTEP_UNARY(op, expr)                                         \
  absl::Status op##_kernel(const KernelArgs& a) {                     \
    return map_unary(a, [](auto x) { return expr; });                 \
  }
MSTEP_UNARY(neg, -x)
MSTEP_UNARY(abs, abs_value(x))
MSTEP_UNARY(exp, std::exp(fp(x)))
MSTEP_UNARY(log, std::log(fp(x)))
MSTEP_UNARY(log1p, std::log1p(fp(x)))
MSTEP_UNARY(sqrt, std::sqrt(fp(x)))
MSTEP_UNARY(rsqrt, decltype(fp(x))(1) / std::sqrt(fp(x)))
MSTEP_UNARY(sin, std::sin(fp(x)))
MSTEP_UNARY(cos, std::cos(fp(x)))
MSTEP_UNARY(tanh, std::tanh(fp(x)))
MSTEP_UNARY(sigmoid, sigmoid(fp(x)))
// x < 0 (not x > 0) keeps NaN and -0.0, as PyTorch.
MSTEP_UNARY(relu, x < 0 ? decltype(x)(0) : x)
MSTEP_UNARY(silu, fp(x) * sigmoid(fp(x)))
MSTEP_UNARY(erf, std::erf(fp(x)))
MSTEP_UNARY(reciprocal, decltype(fp(x))(1) / fp(x))
MSTEP_UNARY(isnan, std::isnan(fp(x)))
MSTEP_UNARY(isfinite, std::isfinite(fp(x)))
MSTEP_UNARY(logical_not, !x)
MSTEP_UNARY(cast, x)
#undef MSTEP_UNARY

absl::Status gelu_kernel(const KernelArgs& a) {
  if (attr_int(a.node.attrs, AttrName::approximate) == 1)
    return map_unary(a, [](auto x) { return gelu_tanh(fp(x)); });
  return map_unary(a, [](auto x) { return gelu_erf(fp(x)); });
}

#define MSTEP_BINARY(op, expr)                                      \
  absl::Status op##_kernel(const KernelArgs& a) {                   \
    return map_binary(a, [](auto x, auto y) { return expr; });      \
  }
MSTEP_BINARY(add, x + y)
MSTEP_BINARY(sub, x - y)
MSTEP_BINARY(mul, x * y)
MSTEP_BINARY(div, fp(x) / fp(y))
MSTEP_BINARY(maximum, (std::isnan(fp(x)) || x > y) ? x : y)
MSTEP_BINARY(minimum, (std::isnan(fp(x)) || x < y) ? x : y)
MSTEP_BINARY(eq, x == y)
MSTEP_BINARY(ne, x != y)
MSTEP_BINARY(lt, x < y)
MSTEP_BINARY(le, x <= y)
MSTEP_BINARY(gt, x > y)
MSTEP_BINARY(ge, x >= y)
MSTEP_BINARY(logical_and, x && y)
MSTEP_BINARY(logical_or, x || y)
#undef MSTEP_BINARY

absl::Status pow_kernel(const KernelArgs& a) {
  return map_binary(a, [](auto x, auto y) {
    using V = decltype(x);
    if constexpr (std::is_integral_v<V> && !std::is_same_v<V, bool>) {
      // Exact integer power by squaring (negative exponents give 0 unless
      // the base is +-1, as PyTorch's integer pow).
      if (y < 0) return x == 1 ? V(1) : x == -1 ? (y % 2 ? V(-1) : V(1)) : V(0);
      // Unsigned arithmetic: overflow wraps (as PyTorch) instead of being UB.
      using UV = std::make_unsigned_t<V>;
      UV result = 1, base = static_cast<UV>(x);
      for (V e = y; e > 0; e >>= 1) {
        if (e & 1) result *= base;
        if (e > 1) base *= base;
      }
      return static_cast<V>(result);
    } else {
      return static_cast<V>(std::pow(fp(x), fp(y)));
    }
  });
}

absl::Status where_kernel(const KernelArgs& a) {
  const HostBuffer& cond = a.in(0);
  const HostBuffer& lhs = a.in(1);
  const HostBuffer& rhs = a.in(2);
  HostBuffer& out = a.out();
  const Shape& shape = out.type().shape;
  std::array<Shape::Dims, 3> strides = {
      broadcast_strides(cond.type().shape, shape),
      broadcast_strides(lhs.type().shape, shape),
      broadcast_strides(rhs.type().shape, shape)};
  dispatch(out.type().dtype, [&]<typename T>() {
    const bool* c = cond.data<bool>();
    const T* x = lhs.data<T>();
    const T* y = rhs.data<T>();
    T* z = out.data<T>();
    for_each_strided(shape, strides, [&](int64_t i, const std::array<int64_t, 3>& o) {
      z[i] = c[o[0]] ? x[o[1]] : y[o[2]];
    });
  });
  return absl::OkStatus();
}

}  // namespace

void register_elementwise_kernels(KernelTable& t) {
#define MSTEP_REGISTER(op) t[static_cast<int>(OpKind::op)] = op##_kernel;
  MSTEP_REGISTER(neg) MSTEP_REGISTER(abs) MSTEP_REGISTER(exp)
  MSTEP_REGISTER(log) MSTEP_REGISTER(log1p) MSTEP_REGISTER(sqrt)
  MSTEP_REGISTER(rsqrt) MSTEP_REGISTER(sin) MSTEP_REGISTER(cos)
  MSTEP_REGISTER(tanh) MSTEP_REGISTER(sigmoid) MSTEP_REGISTER(relu)
  MSTEP_REGISTER(gelu) MSTEP_REGISTER(silu) MSTEP_REGISTER(erf)
  MSTEP_REGISTER(reciprocal) MSTEP_REGISTER(isnan) MSTEP_REGISTER(isfinite)
  MSTEP_REGISTER(logical_not) MSTEP_REGISTER(cast)
  MSTEP_REGISTER(add) MSTEP_REGISTER(sub) MSTEP_REGISTER(mul)
  MSTEP_REGISTER(div) MSTEP_REGISTER(pow) MSTEP_REGISTER(maximum)
  MSTEP_REGISTER(minimum) MSTEP_REGISTER(eq) MSTEP_REGISTER(ne)
  MSTEP_REGISTER(lt) MSTEP_REGISTER(le) MSTEP_REGISTER(gt) MSTEP_REGISTER(ge)
  MSTEP_REGISTER(logical_and) MSTEP_REGISTER(logical_or) MSTEP_REGISTER(where)
#undef MSTEP_REGISTER
}

}  // namespace mstep::ref
