// LowerNorms.cpp: layer_norm and rms_norm over the trailing axes lowered to
// tile programs and run on the simulator, against double host math (the ref
// kernel's formulas); weight/bias as row broadcasts, ragged row tiles,
// chunked long rows, bf16, refusals.
#include <cmath>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

struct NormCase {
  bool layer = true;
  DType dt = DType::f32;
  Shape shape;
  int64_t normalized_ndim = 1;
  bool weight = true, bias = true;
};

GraphNode norm_node(const NormCase& c, int64_t operands) {
  GraphNode n = op(c.layer ? OpKind::layer_norm : OpKind::rms_norm, {}, {c.shape, c.dt});
  for (int64_t i = 0; i < operands; ++i) n.operands.push_back(ValueRef{uint32_t(i), 0});
  n.attrs.push_back({AttrName::normalized_ndim, AttrValue(c.normalized_ndim)});
  n.attrs.push_back({AttrName::eps, AttrValue(1e-5)});
  n.attrs.push_back({AttrName::has_weight, AttrValue(int64_t{c.weight})});
  if (c.layer) n.attrs.push_back({AttrName::has_bias, AttrValue(int64_t{c.bias})});
  return n;
}

void check_norm(const NormCase& c) {
  const TensorType t{c.shape, c.dt};
  int64_t cols = 1;
  for (int64_t d = c.shape.rank() - c.normalized_ndim; d < c.shape.rank(); ++d) cols *= c.shape[d];
  const int64_t rows = t.numel() / cols;
  const TensorType row{Shape({cols}), c.dt};
  // x off-centre (mean 1.5), so the two-pass statistics matter.
  std::vector<std::shared_ptr<host::HostBuffer>> in = {
      buffer(t, random_values(t.numel(), -0.5, 3.5, 31))};
  if (c.weight) in.push_back(buffer(row, random_values(cols, 0.5, 2, 32)));
  const bool bias = c.layer && c.bias;
  if (bias) in.push_back(buffer(row, random_values(cols, -1, 1, 33)));
  auto got = run_node(norm_node(c, static_cast<int64_t>(in.size())), in);
  ASSERT_TRUE(got);
  const host::HostBuffer& x = *in[0];
  const double ulp = std::ldexp(1.0, -24),
               out_ulp = std::ldexp(1.0, c.dt == DType::bf16 ? -8 : -24);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, sq = 0, mag = 0;
    for (int64_t j = 0; j < cols; ++j) {
      mean += at(x, r * cols + j);
      mag += std::abs(at(x, r * cols + j));
    }
    mean = c.layer ? mean / cols : 0;
    for (int64_t j = 0; j < cols; ++j) sq += std::pow(at(x, r * cols + j) - mean, 2);
    const double rstd = 1 / std::sqrt(sq / cols + 1e-5);
    // fp32 sums: the mean is off by up to cols ulps of mean|x|, the
    // statistics by cols ulps relative; that carries into y through rstd.
    // x * rstd - mean * rstd rounds at the size of |x| * rstd.
    const double mean_err = c.layer ? cols * ulp * mag / cols : 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double w = c.weight ? at(*in[1], j) : 1, b = bias ? at(*in[2], j) : 0;
      const double normed = (at(x, r * cols + j) - mean) * rstd;
      const double want = normed * w + b;
      const double tol = (mean_err * rstd + (cols + 16) * ulp * std::abs(normed) +
                          4 * ulp * std::abs(at(x, r * cols + j)) * rstd) *
                             std::abs(w) +
                         16 * ulp * std::abs(b) + out_ulp * std::abs(want) + 1e-30;
      ASSERT_NEAR(at(*got, r * cols + j), want, tol) << r << "," << j;
    }
  }
}

// 300 rows: tiles of 128, 128 and 44; weight and bias loaded once.
TEST(NeuronNormLowering, LayerNormF32) { check_norm({true, DType::f32, Shape({300, 96})}); }
TEST(NeuronNormLowering, LayerNormBf16WeightOnly) {
  check_norm({true, DType::bf16, Shape({130, 64}), 1, true, false});
}
TEST(NeuronNormLowering, LayerNormNoAffineTwoAxes) {
  check_norm({true, DType::f32, Shape({4, 6, 40}), 2, false, false});
}
TEST(NeuronNormLowering, RmsNormF32) {
  check_norm({false, DType::f32, Shape({200, 80}), 1, true, false});
}
TEST(NeuronNormLowering, RmsNormBf16NoWeight) {
  check_norm({false, DType::bf16, Shape({129, 48}), 1, false, false});
}
// 9000 columns: three chunks per pass, weight and bias reloaded per chunk.
TEST(NeuronNormLowering, LongRowsAreChunked) {
  check_norm({true, DType::f32, Shape({129, 9000})});
  check_norm({false, DType::f32, Shape({3, 9000}), 1, true, false});
}

TEST(NeuronNormLowering, RefusesMismatchedWeight) {
  const NormCase c{true, DType::f32, Shape({8, 16}), 1, true, false};
  const TensorType t{c.shape, c.dt}, w{Shape({16}), DType::bf16};
  EXPECT_THAT(refusal(norm_node(c, 2), {t, w}),
              HasSubstr("layer_norm not tiled: weight/bias bf16[16] is not 16 elements of f32"));
}

} // namespace
} // namespace mstep::neuron
