// TileMath: the engines' fp32 ALU, activation functions and reductions.
#include "lib/backends/neuron/TileMath.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mstep::neuron {

namespace {

template <typename F>
inline void each2(const float* a, const float* b, float* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
}
template <typename F> inline void each1(const float* a, float* out, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

// NaN-propagating max/min, as fmaxf does not (a NaN input must show).
inline float max_nan(float x, float y) { return (x != x || x > y) ? x : y; }
inline float min_nan(float x, float y) { return (x != x || x < y) ? x : y; }

} // namespace

void alu_arrays(AluOp op, const float* a, const float* b, float* out, int64_t n) {
  switch (op) {
  case AluOp::add:
    return each2(a, b, out, n, [](float x, float y) { return x + y; });
  case AluOp::subtract:
    return each2(a, b, out, n, [](float x, float y) { return x - y; });
  case AluOp::multiply:
    return each2(a, b, out, n, [](float x, float y) { return x * y; });
  case AluOp::max:
    return each2(a, b, out, n, [](float x, float y) { return y != y ? y : max_nan(x, y); });
  case AluOp::min:
    return each2(a, b, out, n, [](float x, float y) { return y != y ? y : min_nan(x, y); });
  case AluOp::divide:
    return each2(a, b, out, n, [](float x, float y) { return x / y; });
  case AluOp::is_ge:
    return each2(a, b, out, n, [](float x, float y) { return x >= y ? 1.0f : 0.0f; });
  case AluOp::is_equal:
    return each2(a, b, out, n, [](float x, float y) { return x == y ? 1.0f : 0.0f; });
  case AluOp::not_equal:
    return each2(a, b, out, n, [](float x, float y) { return x != y ? 1.0f : 0.0f; });
  }
}

void alu_scalar(AluOp op, const float* a, float s, float* out, int64_t n) {
  switch (op) {
  case AluOp::add:
    return each1(a, out, n, [s](float x) { return x + s; });
  case AluOp::subtract:
    return each1(a, out, n, [s](float x) { return x - s; });
  case AluOp::multiply:
    return each1(a, out, n, [s](float x) { return x * s; });
  case AluOp::max:
    return each1(a, out, n, [s](float x) { return max_nan(x, s); });
  case AluOp::min:
    return each1(a, out, n, [s](float x) { return min_nan(x, s); });
  case AluOp::divide:
    return each1(a, out, n, [s](float x) { return x / s; });
  case AluOp::is_ge:
    return each1(a, out, n, [s](float x) { return x >= s ? 1.0f : 0.0f; });
  case AluOp::is_equal:
    return each1(a, out, n, [s](float x) { return x == s ? 1.0f : 0.0f; });
  case AluOp::not_equal:
    return each1(a, out, n, [s](float x) { return x != s ? 1.0f : 0.0f; });
  }
}

void activate(ActivationFunction f, const float* x, float scale, float bias, float* out,
              int64_t n) {
  auto affine = [scale, bias](float v) { return v * scale + bias; };
  switch (f) {
  case ActivationFunction::identity:
    return each1(x, out, n, [&](float v) { return affine(v); });
  case ActivationFunction::exp:
    return each1(x, out, n, [&](float v) { return std::exp(affine(v)); });
  case ActivationFunction::tanh:
    return each1(x, out, n, [&](float v) { return std::tanh(affine(v)); });
  case ActivationFunction::relu:
    return each1(x, out, n, [&](float v) {
      const float y = affine(v);
      return y != y ? y : std::max(y, 0.0f);
    });
  case ActivationFunction::sigmoid:
    return each1(x, out, n, [&](float v) { return 1.0f / (1.0f + std::exp(-affine(v))); });
  case ActivationFunction::square:
    return each1(x, out, n, [&](float v) {
      const float y = affine(v);
      return y * y;
    });
  case ActivationFunction::rsqrt:
    return each1(x, out, n, [&](float v) { return 1.0f / std::sqrt(affine(v)); });
  case ActivationFunction::log:
    return each1(x, out, n, [&](float v) { return std::log(affine(v)); });
  case ActivationFunction::sqrt:
    return each1(x, out, n, [&](float v) { return std::sqrt(affine(v)); });
  // The formulas and constants of ref (RefElementwise.cpp), in fp32.
  case ActivationFunction::erf:
    return each1(x, out, n, [&](float v) { return std::erf(affine(v)); });
  case ActivationFunction::gelu:
    return each1(x, out, n, [&](float v) {
      const float y = affine(v);
      return 0.5f * y * (1.0f + std::erf(y * 0.70710678118654752440f));
    });
  case ActivationFunction::cos:
    return each1(x, out, n, [&](float v) { return std::cos(affine(v)); });
  case ActivationFunction::gelu_tanh:
    return each1(x, out, n, [&](float v) {
      const float y = affine(v);
      return 0.5f * y * (1.0f + std::tanh(0.79788456080286535588f * (y + 0.044715f * y * y * y)));
    });
  }
}

float reduce_row(AluOp op, const float* x, int64_t n) {
  switch (op) {
  case AluOp::add: {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  case AluOp::multiply: {
    float s = 1;
    for (int64_t i = 0; i < n; ++i) s *= x[i];
    return s;
  }
  case AluOp::max: {
    float s = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) s = max_nan(x[i], s);
    return s;
  }
  case AluOp::min: {
    float s = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) s = min_nan(x[i], s);
    return s;
  }
  case AluOp::subtract:
  case AluOp::divide:
  case AluOp::is_ge:
  case AluOp::is_equal:
  case AluOp::not_equal:
    break; // the validator admits no such reduction
  }
  return std::numeric_limits<float>::quiet_NaN();
}

void bn_stats_row(const float* x, int64_t n, float* out) {
  const float mean = n > 0 ? reduce_row(AluOp::add, x, n) / static_cast<float>(n) : 0.0f;
  float m2 = 0;
  for (int64_t i = 0; i < n; ++i) m2 += (x[i] - mean) * (x[i] - mean);
  out[0] = static_cast<float>(n);
  out[1] = mean;
  out[2] = m2;
}

void bn_aggr_row(const float* records, int64_t count, float* out) {
  float n = 0, mean = 0, m2 = 0;
  for (int64_t r = 0; r < count; ++r) {
    const float nb = records[r * 3], mb = records[r * 3 + 1], m2b = records[r * 3 + 2];
    if (nb == 0) continue;
    const float total = n + nb, delta = mb - mean;
    mean += delta * (nb / total);
    m2 += m2b + delta * delta * (n * nb / total);
    n = total;
  }
  out[0] = n > 0 ? mean : std::numeric_limits<float>::quiet_NaN();
  out[1] = n > 0 ? m2 / n : std::numeric_limits<float>::quiet_NaN();
}

} // namespace mstep::neuron
