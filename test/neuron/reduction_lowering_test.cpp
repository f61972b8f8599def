// LowerReductions.cpp: sum, mean, max and min over the last (or trailing)
// axes lowered to tile programs and run on the simulator, against a double
// host reduction; ragged row tiles, chunked long rows, bf16, refusals.
#include <cmath>
#include <limits>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

GraphNode reduction(OpKind k, const Shape& in_shape, IntList dims, DType dt) {
  std::vector<int64_t> out_dims;
  for (int64_t d = 0; d < in_shape.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) out_dims.push_back(in_shape[d]);
  GraphNode n = op(k, {0}, TensorType{Shape(out_dims), dt});
  n.attrs.push_back({AttrName::dims, AttrValue(dims)});
  n.attrs.push_back({AttrName::keepdim, AttrValue(int64_t{0})});
  return n;
}

void check_reduction(OpKind k, DType dt, const Shape& shape, IntList dims) {
  const TensorType t{shape, dt};
  int64_t cols = 1;
  for (int64_t d : dims) cols *= shape[d];
  const int64_t rows = t.numel() / cols;
  auto x = buffer(t, random_values(t.numel(), -2, 2, 11));
  auto got = run_node(reduction(k, shape, dims, dt), {x});
  ASSERT_TRUE(got);
  for (int64_t r = 0; r < rows; ++r) {
    double want = k == OpKind::max ? -INFINITY : k == OpKind::min ? INFINITY : 0, mag = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = at(*x, r * cols + c);
      if (k == OpKind::max)
        want = std::max(want, v);
      else if (k == OpKind::min)
        want = std::min(want, v);
      else
        want += v;
      mag += std::abs(v);
    }
    if (k == OpKind::mean) {
      want /= double(cols);
      mag /= double(cols);
    }
    // fp32 accumulation: cols * 2^-24 * sum|x| (max/min exact), plus the
    // result's rounding (2^-24, bf16 2^-8 relative).
    const bool adds = k == OpKind::sum || k == OpKind::mean;
    const double tol = (adds ? double(cols) * std::ldexp(1.0, -24) * mag : 0) +
                       std::ldexp(1.0, dt == DType::bf16 ? -8 : -24) * std::abs(want);
    ASSERT_NEAR(at(*got, r), want, tol + 1e-30) << op_name(k) << " row " << r;
  }
}

// 300 rows: tiles of 128, 128 and 44 (ragged).
TEST(NeuronReductionLowering, SumF32RaggedRows) {
  check_reduction(OpKind::sum, DType::f32, Shape({300, 70}), {1});
}
TEST(NeuronReductionLowering, MeanF32) {
  check_reduction(OpKind::mean, DType::f32, Shape({3, 50, 33}), {2});
}
TEST(NeuronReductionLowering, MaxAndMinF32) {
  check_reduction(OpKind::max, DType::f32, Shape({130, 17}), {1});
  check_reduction(OpKind::min, DType::f32, Shape({130, 17}), {1});
}
TEST(NeuronReductionLowering, SumBf16) {
  check_reduction(OpKind::sum, DType::bf16, Shape({129, 40}), {1});
}
// 10000 columns: three chunks of at most 4096, reduced into partials.
TEST(NeuronReductionLowering, LongRowsAreChunked) {
  check_reduction(OpKind::mean, DType::f32, Shape({5, 10000}), {1});
  check_reduction(OpKind::max, DType::bf16, Shape({5, 10000}), {1});
}
// Trailing axes reduce as one row of their product; all axes: one row.
TEST(NeuronReductionLowering, TrailingAxes) {
  check_reduction(OpKind::sum, DType::f32, Shape({6, 7, 9}), {1, 2});
  check_reduction(OpKind::sum, DType::f32, Shape({6, 7, 9}), {0, 1, 2});
}

TEST(NeuronReductionLowering, RefusesOtherAxes) {
  const TensorType t{Shape({4, 5}), DType::f32};
  EXPECT_THAT(refusal(reduction(OpKind::sum, t.shape, {0}, DType::f32), {t}),
              HasSubstr("sum not tiled: f32[4, 5]: only a reduction over trailing axes"));
  const TensorType i{Shape({4, 5}), DType::i32};
  EXPECT_THAT(refusal(reduction(OpKind::max, i.shape, {1}, DType::i32), {i}),
              HasSubstr("only f32/bf16"));
}

} // namespace
} // namespace mstep::neuron
