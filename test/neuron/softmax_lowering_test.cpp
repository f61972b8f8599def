// LowerSoftmax.cpp: softmax and log_softmax over the last axis lowered to
// tile programs and run on the simulator, against double host math (the
// ref kernel's formula); ragged row tiles, chunked long rows, bf16, refusals.
#include <cmath>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

GraphNode softmax_node(bool log, const TensorType& t, int64_t dim) {
  GraphNode n = op(log ? OpKind::log_softmax : OpKind::softmax, {0}, t);
  n.attrs.push_back({AttrName::dim, AttrValue(dim)});
  return n;
}

void check_softmax(bool log, DType dt, int64_t rows, int64_t cols, float spread = 4) {
  const TensorType t{Shape({rows, cols}), dt};
  auto x = buffer(t, random_values(t.numel(), -spread, spread, 21));
  auto got = run_node(softmax_node(log, t, 1), {x});
  ASSERT_TRUE(got);
  const double ulp = std::ldexp(1.0, -24), out_ulp = std::ldexp(1.0, dt == DType::bf16 ? -8 : -24);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(at(*x, r * cols + c)));
    for (int64_t c = 0; c < cols; ++c) s += std::exp(at(*x, r * cols + c) - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double v = at(*x, r * cols + c);
      const double want = log ? v - m - std::log(s) : std::exp(v - m) / s;
      // fp32: the row sum's accumulation (cols ulps relative), exp/log/
      // divide (a few ulps); log_softmax's error is absolute in |x|, m and
      // log s. Then the output's rounding; softmax values below fp32's
      // normal range (2^-126) underflow.
      const double tol = log ? (cols + 8) * ulp * (std::abs(v) + std::abs(m) + std::log(s) + 1) +
                                   out_ulp * std::abs(want)
                             : ((cols + 8) * ulp + out_ulp) * want + std::ldexp(1.0, -126);
      ASSERT_NEAR(at(*got, r * cols + c), want, tol) << r << "," << c;
    }
  }
}

// 200 rows: tiles of 128 and 72; each row one chunk (stays in SBUF).
TEST(NeuronSoftmaxLowering, SoftmaxF32) { check_softmax(false, DType::f32, 200, 50); }
TEST(NeuronSoftmaxLowering, LogSoftmaxF32) { check_softmax(true, DType::f32, 200, 50); }
TEST(NeuronSoftmaxLowering, SoftmaxBf16) { check_softmax(false, DType::bf16, 130, 64); }
TEST(NeuronSoftmaxLowering, LogSoftmaxBf16) { check_softmax(true, DType::bf16, 130, 64); }
// 9000 columns: three chunks, each pass reloads them; large values check
// that the max is subtracted before exp (exp(80) overflows fp32 sums).
TEST(NeuronSoftmaxLowering, LongRowsAreChunked) {
  check_softmax(false, DType::f32, 130, 9000, 90);
  check_softmax(true, DType::f32, 3, 9000, 90);
}

TEST(NeuronSoftmaxLowering, RefusesOtherAxes) {
  const TensorType t{Shape({4, 5}), DType::f32};
  EXPECT_THAT(refusal(softmax_node(false, t, 0), {t}),
              HasSubstr("softmax not tiled: f32[4, 5]: only along the last axis"));
}

// A row too long for SBUF: the partials of 8192 chunks (x2 slots, x2 row
// tiles, max and sum) and the chunk buffers exceed a partition's 192 KiB;
// the validator refuses the program, so the op falls back.
TEST(NeuronSoftmaxLowering, ValidatorRefusalFallsBack) {
  const TensorType t{Shape({1, int64_t{8192} * 4096}), DType::f32};
  const std::string why = refusal(softmax_node(false, t, 1), {t});
  EXPECT_THAT(why, HasSubstr("rule capacity"));
}

} // namespace
} // namespace mstep::neuron
