// Autograd of matmul, bmm, linear, conv2d and the 2-D pools: finite-
// difference checks in f64 over the variants (1-D, batched and broadcast
// products; stride, padding, dilation, groups, ceil_mode,
// count_include_pad; unbatched inputs), hand-checked values of the four
// gradient primitives, and their own (double-backward) formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lib/api/LinalgGrad.h"
#include "mstep/mstep.h"
#include "test/unit/GradCheck.h"

namespace mstep {
namespace {

using testing::gradcheck;
using ::testing::HasSubstr;
using V = std::vector<Tensor>;

/// Distinct, well-separated f64 values in [-1, 1) in a scrambled order, so
/// max-pool windows have no ties a finite difference could flip.
Tensor sample(const Shape& shape, int64_t seed = 0) {
  const int64_t n = shape.numel();
  std::vector<double> v(n);
  for (int64_t j = 0; j < n; ++j)
    v[j] = 2.0 * static_cast<double>((j * 7919 + seed * 104729) % n) / n - 1.0 + 0.5 / n;
  return from_vector(v, shape);
}

Tensor f64(std::vector<double> v, Shape s) { return from_vector(v, s); }

std::vector<double> grad_of(const Tensor& t) { return t.grad().to_vector<double>(); }

// ---- matmul, bmm, linear --------------------------------------------------

struct MatmulShapes {
  Shape a, b;
};

class MatmulGrad : public ::testing::TestWithParam<MatmulShapes> {};

TEST_P(MatmulGrad, MatchesFiniteDifferences) {
  const MatmulShapes& s = GetParam();
  EXPECT_TRUE(gradcheck([](const V& in) { return matmul(in[0], in[1]); },
                        {sample(s.a, 1), sample(s.b, 2)}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MatmulGrad,
    ::testing::Values(MatmulShapes{{3, 4}, {4, 5}},              // 2-D
                      MatmulShapes{{4}, {4}},                    // dot
                      MatmulShapes{{4}, {4, 3}},                 // vector @ matrix
                      MatmulShapes{{3, 4}, {4}},                 // matrix @ vector
                      MatmulShapes{{2, 3, 4}, {2, 4, 5}},        // batched
                      MatmulShapes{{2, 1, 3, 4}, {5, 4, 2}},     // both broadcast
                      MatmulShapes{{2, 3, 4}, {4, 5}},           // folded grad of b
                      MatmulShapes{{3, 4}, {2, 1, 4, 5}},        // folded grad of a
                      MatmulShapes{{4}, {2, 4, 3}},              // vector @ batched
                      MatmulShapes{{2, 3, 4}, {4}},              // batched @ vector
                      MatmulShapes{{1, 1, 4}, {3, 4, 1}}));      // size-1 dims

TEST(MatmulGrad, OnlyTheOperandThatRequiresGradGetsOne) {
  Tensor a = sample({2, 3}).requires_grad_();
  Tensor b = sample({3, 2}, 1);
  sum(matmul(a, b)).backward();
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  // d sum(a @ b) / d a[i, k] = sum_j b[k, j]
  auto bv = b.to_vector<double>();
  auto ga = grad_of(a);
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(ga[i * 3 + k], bv[k * 2] + bv[k * 2 + 1], 1e-12);
}

TEST(MatmulGrad, EmptyDimsGiveEmptyOrZeroGradients) {
  Tensor a = f64({}, {2, 0}).requires_grad_();
  Tensor b = f64({}, {0, 3}).requires_grad_();
  sum(matmul(a, b)).backward();
  EXPECT_EQ(a.grad().shape(), (Shape{2, 0}));
  EXPECT_EQ(b.grad().shape(), (Shape{0, 3}));
  // An empty batch on the left of a weight: the weight's gradient is 0.
  Tensor x = f64({}, {0, 2, 3}).requires_grad_();
  Tensor w = sample({3, 2}).requires_grad_();
  sum(matmul(x, w)).backward();
  EXPECT_EQ(grad_of(w), std::vector<double>(6, 0.0));
  EXPECT_EQ(x.grad().shape(), (Shape{0, 2, 3}));
}

TEST(MatmulGrad, F32GradientHasTheOperandType) {
  Tensor a = ones({2, 2, 3}).requires_grad_();
  Tensor b = ones({3, 4}).requires_grad_();
  sum(matmul(a, b)).backward();
  EXPECT_EQ(a.grad().type(), a.type());
  EXPECT_EQ(b.grad().type(), b.type());
  // Every b[k, j] meets 2 batches x 2 rows of ones.
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(12, 4.0f));
}

TEST(BmmGrad, MatchesFiniteDifferences) {
  EXPECT_TRUE(gradcheck([](const V& in) { return bmm(in[0], in[1]); },
                        {sample({3, 2, 4}, 1), sample({3, 4, 2}, 2)}));
}

TEST(LinearGrad, WithBias) {
  EXPECT_TRUE(gradcheck([](const V& in) { return linear(in[0], in[1], in[2]); },
                        {sample({4, 3}, 1), sample({5, 3}, 2), sample({5}, 3)}));
}

TEST(LinearGrad, WithoutBias) {
  EXPECT_TRUE(gradcheck([](const V& in) { return linear(in[0], in[1]); },
                        {sample({4, 3}, 1), sample({5, 3}, 2)}));
}

TEST(LinearGrad, BatchedAndVectorInputs) {
  EXPECT_TRUE(gradcheck([](const V& in) { return linear(in[0], in[1], in[2]); },
                        {sample({2, 3, 4}, 1), sample({3, 4}, 2), sample({3}, 3)}));
  EXPECT_TRUE(gradcheck([](const V& in) { return linear(in[0], in[1], in[2]); },
                        {sample({4}, 1), sample({3, 4}, 2), sample({3}, 3)}));
}

// ---- conv2d ---------------------------------------------------------------

struct ConvCase {
  Shape input, weight;
  bool bias;
  IntList stride, padding, dilation;
  int64_t groups;
};

class Conv2dGrad : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dGrad, MatchesFiniteDifferences) {
  const ConvCase& c = GetParam();
  V inputs = {sample(c.input, 1), sample(c.weight, 2)};
  if (c.bias) inputs.push_back(sample({c.weight[0]}, 3));
  EXPECT_TRUE(gradcheck(
      [&c](const V& in) {
        return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding, c.dilation,
                      c.groups);
      },
      inputs));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, Conv2dGrad,
    ::testing::Values(
        ConvCase{{2, 2, 5, 5}, {3, 2, 3, 3}, true, {1}, {0}, {1}, 1},        // basic + bias
        ConvCase{{1, 2, 5, 4}, {2, 2, 2, 3}, false, {1}, {0}, {1}, 1},       // no bias
        ConvCase{{1, 2, 6, 6}, {2, 2, 3, 3}, true, {2}, {1}, {1}, 1},        // stride + padding
        ConvCase{{1, 1, 7, 7}, {2, 1, 2, 2}, true, {3}, {0}, {1}, 1},        // untouched rows
        ConvCase{{1, 1, 6, 7}, {2, 1, 3, 2}, true, {1, 2}, {2, 1}, {2, 3}, 1},  // dilation
        ConvCase{{2, 4, 4, 4}, {4, 2, 3, 3}, true, {1}, {1}, {1}, 2},        // groups
        ConvCase{{1, 3, 4, 4}, {6, 1, 3, 3}, true, {2}, {1}, {1}, 3},        // depthwise
        ConvCase{{2, 3, 3, 3}, {2, 3, 1, 1}, true, {1}, {0}, {1}, 1},        // 1x1 kernel
        ConvCase{{3, 5, 5}, {2, 3, 3, 3}, true, {1}, {1}, {1}, 1}));         // unbatched

TEST(Conv2dGrad, BiasGradientSumsOverBatchAndSpace) {
  Tensor x = zeros({2, 1, 3, 3}, DType::f64);
  Tensor w = zeros({2, 1, 2, 2}, DType::f64);
  Tensor b = f64({0, 0}, {2}).requires_grad_();
  sum(conv2d(x, w, b)).backward();
  // 2 batches x 2 x 2 output positions per channel.
  EXPECT_EQ(grad_of(b), (std::vector<double>{8, 8}));
}

// ---- pooling --------------------------------------------------------------

struct PoolCase {
  Shape input;
  IntList kernel, stride, padding, dilation;
  bool ceil_mode;
  bool count_include_pad;  // avg_pool2d only
};

class MaxPoolGrad : public ::testing::TestWithParam<PoolCase> {};

TEST_P(MaxPoolGrad, MatchesFiniteDifferences) {
  const PoolCase& p = GetParam();
  EXPECT_TRUE(gradcheck(
      [&p](const V& in) {
        return max_pool2d(in[0], p.kernel, p.stride, p.padding, p.dilation, p.ceil_mode);
      },
      {sample(p.input, 1)}));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, MaxPoolGrad,
    ::testing::Values(PoolCase{{2, 2, 4, 4}, {2}, {}, {0}, {1}, false, true},       // disjoint
                      PoolCase{{1, 2, 5, 5}, {3}, {1}, {0}, {1}, false, true},      // overlapping
                      PoolCase{{1, 1, 7, 7}, {3}, {2}, {1}, {1}, false, true},      // padding
                      PoolCase{{1, 1, 7, 9}, {2, 3}, {1, 2}, {1}, {1}, false, true},
                      PoolCase{{1, 1, 8, 8}, {3}, {1}, {0}, {2}, false, true},      // dilation
                      PoolCase{{1, 2, 5, 5}, {2}, {2}, {0}, {1}, true, true},       // ceil_mode
                      PoolCase{{1, 1, 5, 5}, {2}, {2}, {1}, {1}, true, true},       // ceil, drop
                      PoolCase{{1, 1, 7, 8}, {2}, {3}, {0}, {2}, true, true},       // ceil+dilation
                      PoolCase{{2, 5, 4}, {2}, {1}, {0}, {1}, false, true}));       // unbatched

class AvgPoolGrad : public ::testing::TestWithParam<PoolCase> {};

TEST_P(AvgPoolGrad, MatchesFiniteDifferences) {
  const PoolCase& p = GetParam();
  EXPECT_TRUE(gradcheck(
      [&p](const V& in) {
        return avg_pool2d(in[0], p.kernel, p.stride, p.padding, p.ceil_mode, p.count_include_pad);
      },
      {sample(p.input, 1)}));
}

INSTANTIATE_TEST_SUITE_P(
    Variants, AvgPoolGrad,
    ::testing::Values(PoolCase{{2, 2, 4, 4}, {2}, {}, {0}, {1}, false, true},
                      PoolCase{{1, 2, 5, 5}, {3}, {1}, {0}, {1}, false, true},   // overlapping
                      PoolCase{{1, 1, 7, 7}, {3}, {2}, {1}, {1}, false, true},   // include pad
                      PoolCase{{1, 1, 7, 7}, {3}, {2}, {1}, {1}, false, false},  // exclude pad
                      PoolCase{{1, 1, 7, 9}, {2, 3}, {1, 2}, {1}, {1}, false, false},
                      PoolCase{{1, 2, 5, 5}, {2}, {2}, {0}, {1}, true, true},    // ceil_mode
                      PoolCase{{1, 1, 6, 6}, {3}, {2}, {1}, {1}, true, true},    // ceil + pad
                      PoolCase{{1, 1, 6, 7}, {3}, {2}, {1}, {1}, true, false},
                      PoolCase{{1, 1, 5, 5}, {3}, {3}, {1}, {1}, true, true},    // overhang
                      PoolCase{{2, 5, 4}, {2}, {1}, {0}, {1}, false, true}));    // unbatched

// ---- the gradient primitives, by hand -------------------------------------

const IntList kOne = {1, 1}, kZero = {0, 0};

TEST(Conv2dInputGrad, IsTheFullCorrelationByHand) {
  // g [[1, 2], [3, 4]] spread through w [[1, 10], [100, 1000]] onto 3x3:
  // gx[i, j] = sum g[oh, ow] * w[i - oh, j - ow].
  Tensor g = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor w = f64({1, 10, 100, 1000}, {1, 1, 2, 2});
  Tensor gx = detail::conv2d_input_grad(g, w, {1, 1, 3, 3}, kOne, kZero, kOne, 1);
  EXPECT_TRUE(gx.is_pending());
  EXPECT_EQ(gx.type(), (TensorType{{1, 1, 3, 3}, DType::f64}));
  EXPECT_EQ(gx.to_vector<double>(),
            (std::vector<double>{1, 12, 20, 103, 1234, 2040, 300, 3400, 4000}));
}

TEST(Conv2dInputGrad, StrideLeavesUntouchedPixelsZero) {
  // 1x1 kernel 2, stride 3 on 4x4: only (0, 0), (0, 3), (3, 0), (3, 3) are read.
  Tensor g = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor gx = detail::conv2d_input_grad(g, f64({2}, {1, 1, 1, 1}), {1, 1, 4, 4}, {3, 3}, kZero,
                                        kOne, 1);
  std::vector<double> want(16, 0.0);
  want[0] = 2, want[3] = 4, want[12] = 6, want[15] = 8;
  EXPECT_EQ(gx.to_vector<double>(), want);
}

TEST(Conv2dInputGrad, GroupsKeepChannelsApartInF32) {
  // 2 groups, one channel each: channel c only sees output channel c.
  Tensor g = from_vector(std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2}, {1, 2, 2, 2});
  Tensor w = from_vector(std::vector<float>{3, 5}, {2, 1, 1, 1});
  Tensor gx = detail::conv2d_input_grad(g, w, {1, 2, 2, 2}, kOne, kZero, kOne, 2);
  EXPECT_EQ(gx.to_vector<float>(), (std::vector<float>{3, 3, 3, 3, 10, 10, 10, 10}));
}

TEST(Conv2dWeightGrad, CorrelatesInputWithGradByHand) {
  // x = 1..9 (3x3), g = ones (2x2): gw[kh, kw] = sum of the 2x2 block at (kh, kw).
  Tensor x = f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  Tensor gw = detail::conv2d_weight_grad(x, ones({1, 1, 2, 2}, DType::f64), {1, 1, 2, 2}, kOne,
                                         kZero, kOne, 1);
  EXPECT_EQ(gw.type(), (TensorType{{1, 1, 2, 2}, DType::f64}));
  EXPECT_EQ(gw.to_vector<double>(), (std::vector<double>{12, 16, 24, 28}));
}

TEST(Conv2dWeightGrad, SumsOverTheBatchPerGroup) {
  // 2 batches, 2 groups of 1 channel, 1x1 kernel: gw[o] = sum over n of x[n, o].
  Tensor x = f64({1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30, 40, 50, 60, 70, 80}, {2, 2, 2, 2});
  Tensor gw = detail::conv2d_weight_grad(x, ones({2, 2, 2, 2}, DType::f64), {2, 1, 1, 1}, kOne,
                                         kZero, kOne, 2);
  EXPECT_EQ(gw.to_vector<double>(), (std::vector<double>{110, 286}));
}

TEST(Conv2dWeightGrad, PaddingTapsAddNothing) {
  // 1x1 input 5, 3x3 kernel, padding 1: only the centre tap sees the input.
  Tensor gw = detail::conv2d_weight_grad(f64({5}, {1, 1, 1, 1}), f64({2}, {1, 1, 1, 1}),
                                         {1, 1, 3, 3}, kOne, kOne, kOne, 1);
  std::vector<double> want(9, 0.0);
  want[4] = 10;
  EXPECT_EQ(gw.to_vector<double>(), want);
}

TEST(MaxPool2dGrad, OverlappingWindowsAccumulateAtTheirMax) {
  // k2 s1 windows of [[1, 5, 2], [3, 4, 9], [0, 8, 6]]: maxima 5, 9, 8, 9.
  Tensor x = f64({1, 5, 2, 3, 4, 9, 0, 8, 6}, {1, 1, 3, 3});
  Tensor g = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor gx = detail::max_pool2d_grad(g, x, {2, 2}, kOne, kZero, kOne, false);
  EXPECT_EQ(gx.type(), x.type());
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{0, 1, 0, 0, 0, 6, 0, 3, 0}));
}

TEST(MaxPool2dGrad, TiesGoToTheFirstMaximum) {
  // All equal: each k2 s1 window picks its top-left tap (PyTorch).
  Tensor gx = detail::max_pool2d_grad(f64({1, 2, 3, 4}, {1, 1, 2, 2}),
                                      ones({1, 1, 3, 3}, DType::f64), {2, 2}, kOne, kZero, kOne,
                                      false);
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

TEST(MaxPool2dGrad, NaNAndMinusInfinityFollowPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // Two NaNs in one window: the last one scanned takes the gradient.
  Tensor gx = detail::max_pool2d_grad(f64({7}, {1, 1, 1, 1}), f64({nan, 1, nan, 1}, {1, 1, 2, 2}),
                                      {2, 2}, kOne, kZero, kOne, false);
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{0, 0, 7, 0}));
  // All -inf with padding: the first tap inside the input.
  Tensor x = full({1, 1, 3, 3}, -inf, DType::f64);
  Tensor gy = detail::max_pool2d_grad(f64({1, 2, 3, 4}, {1, 1, 2, 2}), x, {2, 2}, {2, 2}, kOne,
                                      kOne, false);
  EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{1, 2, 0, 3, 4, 0, 0, 0, 0}));
}

TEST(AvgPool2dGrad, OverlappingWindowsShareByHand) {
  // k2 s1 on 3x3, g = ones: each pixel gets (windows covering it) / 4.
  Tensor gx = detail::avg_pool2d_grad(ones({1, 1, 2, 2}, DType::f64), {1, 1, 3, 3}, {2, 2}, kOne,
                                      kZero, false, true);
  EXPECT_EQ(gx.type(), (TensorType{{1, 1, 3, 3}, DType::f64}));
  EXPECT_EQ(gx.to_vector<double>(),
            (std::vector<double>{0.25, 0.5, 0.25, 0.5, 1, 0.5, 0.25, 0.5, 0.25}));
}

TEST(AvgPool2dGrad, PaddingDivisorWithAndWithoutCountIncludePad) {
  // k2 s2 p1 on 3x3: windows cover rows/cols {0} and {1, 2}.
  Tensor g = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor incl = detail::avg_pool2d_grad(g, {1, 1, 3, 3}, {2, 2}, {2, 2}, kOne, false, true);
  EXPECT_EQ(incl.to_vector<double>(),
            (std::vector<double>{0.25, 0.5, 0.5, 0.75, 1, 1, 0.75, 1, 1}));
  Tensor excl = detail::avg_pool2d_grad(g, {1, 1, 3, 3}, {2, 2}, {2, 2}, kOne, false, false);
  EXPECT_EQ(excl.to_vector<double>(), (std::vector<double>{1, 1, 1, 1.5, 1, 1, 1.5, 1, 1}));
}

TEST(AvgPool2dGrad, CeilModeWindowDividesByItsClippedSize) {
  // k2 s2 ceil on 3x3: the last row/column of windows holds 1 row/column.
  Tensor g = f64({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor gx = detail::avg_pool2d_grad(g, {1, 1, 3, 3}, {2, 2}, {2, 2}, kZero, true, true);
  EXPECT_EQ(gx.to_vector<double>(),
            (std::vector<double>{0.25, 0.25, 1, 0.25, 0.25, 1, 1.5, 1.5, 4}));
}

TEST(LinalgGradPrimitives, RejectShapesNoForwardCouldHave) {
  Tensor g = zeros({1, 2, 2, 2}, DType::f64);
  try {
    detail::conv2d_input_grad(g, zeros({3, 1, 2, 2}, DType::f64), {1, 1, 3, 3}, kOne, kZero,
                              kOne, 1);
    ADD_FAILURE() << "expected an mstep::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("conv2d_input_grad"));
  }
  EXPECT_THROW(detail::max_pool2d_grad(g, zeros({2, 2, 3, 3}, DType::f64), {2, 2}, kOne, kZero,
                                       kOne, false),
               Error);
}

// ---- double backward through the primitives --------------------------------

TEST(LinalgGradPrimitives, ConvGradsAreDifferentiable) {
  const IntList stride = {2, 1}, pad = {1, 0}, dil = {1, 2};
  // input [1, 4, 5, 6], weight [2, 2, 3, 2], groups 2 -> grad_out [1, 2, 3, 4].
  EXPECT_TRUE(gradcheck(
      [&](const V& in) {
        return detail::conv2d_input_grad(in[0], in[1], {1, 4, 5, 6}, stride, pad, dil, 2);
      },
      {sample({1, 2, 3, 4}, 1), sample({2, 2, 3, 2}, 2)}));
  EXPECT_TRUE(gradcheck(
      [&](const V& in) {
        return detail::conv2d_weight_grad(in[0], in[1], {2, 2, 3, 2}, stride, pad, dil, 2);
      },
      {sample({1, 4, 5, 6}, 1), sample({1, 2, 3, 4}, 2)}));
}

TEST(LinalgGradPrimitives, AvgPoolGradIsDifferentiable) {
  // 6x7, k3 s2 p1 ceil, excluding padding -> 4x4 windows.
  EXPECT_TRUE(gradcheck(
      [](const V& in) {
        return detail::avg_pool2d_grad(in[0], {1, 1, 6, 7}, {3, 3}, {2, 2}, kOne, true, false);
      },
      {sample({1, 1, 4, 4}, 1)}));
}

TEST(LinalgGradPrimitives, MaxPoolGradHasNoSecondDerivative) {
  Tensor g = sample({1, 1, 2, 2}).requires_grad_();
  Tensor gx = detail::max_pool2d_grad(g, sample({1, 1, 3, 3}, 1), {2, 2}, kOne, kZero, kOne, false);
  try {
    sum(gx).backward();
    ADD_FAILURE() << "expected an mstep::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("max_pool2d_grad"));
  }
}

}  // namespace
}  // namespace mstep
