// Unit tests for conv2d, max_pool2d and avg_pool2d: windows checked by
// hand, stride/padding/dilation/groups, ceil_mode and count_include_pad,
// unbatched and non-contiguous inputs, dtypes, and one test per error
// path. matmul, bmm and linear are in linalg_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using testing::values;

/// [0, 1, ..., numel - 1] as f32 of `shape`, plus `offset`.
Tensor iota(const Shape& shape, float offset = 0) {
  std::vector<float> v(shape.numel());
  std::iota(v.begin(), v.end(), offset);
  return from_vector(v, shape);
}

// ---- conv2d: values ---------------------------------------------------

TEST(Conv2d, ThreeByThreeOnesKernelWithPaddingByHand) {
  // Each output is the sum of the 3x3 neighbourhood of 1..9, plus bias 1.
  Tensor x = iota({1, 1, 3, 3}, 1);
  Tensor y = conv2d(x, ones({1, 1, 3, 3}), ones({1}), {1}, {1});
  EXPECT_TRUE(y.is_pending());
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y),
            (std::vector<float>{13, 22, 17, 28, 46, 34, 25, 40, 29}));
}

TEST(Conv2d, AsymmetricKernelByHand) {
  // weight [[1, 0], [0, -1]]: out[i][j] = x[i][j] - x[i+1][j+1] = -4.
  Tensor w = from_vector(std::vector<float>{1, 0, 0, -1}, {1, 1, 2, 2});
  Tensor y = conv2d(iota({1, 1, 3, 3}, 1), w);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), std::vector<float>(4, -4));
}

TEST(Conv2d, StrideTwo) {
  Tensor y = conv2d(iota({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, {2});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{10, 18, 42, 50}));
}

TEST(Conv2d, DilationTwo) {
  // Taps x[i][j], x[i][j+2], x[i+2][j], x[i+2][j+2] of x[i][j] = 5i + j.
  Tensor y = conv2d(iota({1, 1, 5, 5}), ones({1, 1, 2, 2}), {}, {1}, {0}, {2});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  std::vector<float> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(4 * (5 * i + j) + 24);
  EXPECT_EQ(values(y), want);
}

TEST(Conv2d, GroupsKeepChannelsApart) {
  // Two groups of one channel: out0 = 2 * in0 + 1, out1 = 3 * in1 - 1.
  Tensor x = iota({1, 2, 2, 2}, 1);
  Tensor w = from_vector(std::vector<float>{2, 3}, {2, 1, 1, 1});
  Tensor b = from_vector(std::vector<float>{1, -1}, {2});
  Tensor y = conv2d(x, w, b, {1}, {0}, {1}, 2);
  ASSERT_EQ(y.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{3, 5, 7, 9, 14, 17, 20, 23}));
}

TEST(Conv2d, GroupsWithSeveralChannelsPerGroup) {
  // 4 input channels, 2 groups, 1 output per group: each output sums its
  // group's two channels.
  Tensor x = iota({1, 4, 1, 1}, 1);  // channels 1, 2, 3, 4
  Tensor y = conv2d(x, ones({2, 2, 1, 1}), {}, {1}, {0}, {1}, 2);
  EXPECT_EQ(values(y), (std::vector<float>{3, 7}));
}

TEST(Conv2d, SeparateStrideAndPaddingPerDim) {
  Tensor y = conv2d(ones({1, 1, 5, 7}), ones({1, 1, 3, 3}), {}, {2, 1}, {1, 0});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 5}));
  // Top row: the window's first row lies in the padding.
  EXPECT_EQ(values(y)[0], 6);
  EXPECT_EQ(values(y)[5], 9);
}

TEST(Conv2d, UnbatchedInput) {
  Tensor y = conv2d(iota({1, 3, 3}, 1), ones({2, 1, 3, 3}), {}, {1}, {1});
  ASSERT_EQ(y.shape(), (Shape{2, 3, 3}));
  EXPECT_EQ(values(y)[4], 45);
  EXPECT_EQ(values(y)[13], 45);
}

TEST(Conv2d, NonContiguousInput) {
  // A transposed image reads as its transpose, not as the buffer it came
  // from (the asymmetric kernel tells the two apart).
  Tensor x = transpose(iota({1, 1, 3, 3}, 1), 2, 3);
  Tensor w = from_vector(std::vector<float>{1, 0, 2, -1}, {1, 1, 2, 2});
  // x^T[i][j] = 3j + i + 1: out = x^T[i][j] + 2 x^T[i+1][j] - x^T[i+1][j+1].
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      want.push_back((3 * j + i + 1) + 2 * (3 * j + i + 2) -
                     (3 * (j + 1) + i + 2));
  EXPECT_EQ(values(conv2d(x, w)), want);
}

TEST(Conv2d, EmptyBatch) {
  Tensor y = conv2d(ones({0, 2, 4, 4}), ones({3, 2, 3, 3}));
  EXPECT_EQ(y.shape(), (Shape{0, 3, 2, 2}));
  EXPECT_TRUE(values(y).empty());
}

TEST(Conv2d, Bf16AndF64) {
  Tensor y =
      conv2d(iota({1, 1, 3, 3}, 1).to(DType::bf16),
             ones({1, 1, 3, 3}, DType::bf16), ones({1}, DType::bf16), {1}, {1});
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(values(y),
            (std::vector<float>{13, 22, 17, 28, 46, 34, 25, 40, 29}));
  Tensor z = conv2d(ones({1, 1, 2, 2}, DType::f64),
                    full({1, 1, 2, 2}, 0.25, DType::f64));
  EXPECT_EQ(z.dtype(), DType::f64);
  EXPECT_DOUBLE_EQ(z.item(), 1.0);
}

// ---- conv2d: errors ---------------------------------------------------

TEST(Conv2dErrors, InputRank) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({3, 3}), ones({1, 1, 2, 2}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("4-D input"),
                    HasSubstr("f32[3, 3]")));
}

TEST(Conv2dErrors, WeightRank) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 1, 3, 3}), ones({2, 2}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("4-D weight")));
}

TEST(Conv2dErrors, ChannelsNotDivisibleByGroups) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 3, 4, 4}), ones({2, 1, 1, 1}), {}, {1}, {0}, {1}, 2);
      }),
      AllOf(HasSubstr("conv2d"),
            HasSubstr("3 channels are not divisible by groups=2")));
}

TEST(Conv2dErrors, OutChannelsNotDivisibleByGroups) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 4, 4, 4}), ones({3, 2, 1, 1}), {}, {1}, {0}, {1}, 2);
      }),
      AllOf(HasSubstr("conv2d"),
            HasSubstr("3 out_channels are not divisible")));
}

TEST(Conv2dErrors, WeightChannelsMismatch) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 3, 4, 4}), ones({2, 2, 3, 3}));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("expects 2 input channels"),
                    HasSubstr("the input has 3"),
                    HasSubstr("f32[2, 2, 3, 3]")));
}

TEST(Conv2dErrors, KernelLargerThanPaddedInput) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3}));
      }),
      AllOf(HasSubstr("conv2d"), HasSubstr("more than the padded input's 2")));
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 4, 4}), ones({1, 1, 2, 2}), {}, {1}, {0}, {4});
      }),
      HasSubstr("spans 5 rows"));
}

TEST(Conv2dErrors, BadStrideValue) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), {}, {0});
      }),
      AllOf(HasSubstr("conv2d"), HasSubstr("stride values must be >= 1")));
}

TEST(Conv2dErrors, NegativePadding) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), {}, {1}, {-1});
              }),
              HasSubstr("padding values must be >= 0"));
}

TEST(Conv2dErrors, ThreeSpatialValues) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), {}, {1, 1, 1});
              }),
              AllOf(HasSubstr("stride must have 1 or 2 values"),
                    HasSubstr("stride=[1, 1, 1]")));
}

TEST(Conv2dErrors, GroupsBelowOne) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}), {}, {1}, {0}, {1}, 0);
      }),
      HasSubstr("groups must be >= 1"));
}

TEST(Conv2dErrors, IntegerInput) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 3, 3}, DType::i64), ones({1, 1, 1, 1}, DType::i64));
      }),
      AllOf(HasSubstr("conv2d"), HasSubstr("floating-point")));
}

TEST(Conv2dErrors, MixedDtypes) {
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 1, 3, 3}), ones({1, 1, 1, 1}, DType::f64));
              }),
              AllOf(HasSubstr("conv2d"), HasSubstr("share one dtype")));
}

TEST(Conv2dErrors, BiasShape) {
  EXPECT_THAT(
      error_of([] {
        conv2d(ones({1, 1, 3, 3}), ones({2, 1, 1, 1}), ones({3}));
      }),
      AllOf(HasSubstr("conv2d"), HasSubstr("bias of out_channels = 2")));
}

// ---- max_pool2d ---------------------------------------------------------

TEST(PoolMax, TwoByTwoDefaultStrideByHand) {
  Tensor y = max_pool2d(iota({1, 1, 4, 4}), {2});
  EXPECT_TRUE(y.is_pending());
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{5, 7, 13, 15}));
}

TEST(PoolMax, PaddingNeverWins) {
  // All values negative: a zero-valued padding would show up as 0.
  Tensor x = iota({1, 1, 3, 3}, 1) * -1.0;
  Tensor y = max_pool2d(x, {3}, {1}, {1});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y),
            (std::vector<float>{-1, -1, -2, -1, -1, -2, -4, -4, -5}));
}

TEST(PoolMax, CeilModeKeepsPartialWindows) {
  Tensor x = iota({1, 1, 5, 5});
  EXPECT_EQ(max_pool2d(x, {2}, {2}).shape(), (Shape{1, 1, 2, 2}));
  Tensor y = max_pool2d(x, {2}, {2}, {0}, {1}, /*ceil_mode=*/true);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
}

TEST(PoolMax, CeilModeDropsWindowStartingInRightPadding) {
  // 5 wide, kernel 2, stride 2, padding 1: windows start at -1, 1, 3; a
  // 4th would start at 5, in the right padding, and is dropped.
  Tensor y = max_pool2d(iota({1, 1, 5, 5}), {2}, {2}, {1}, {1}, true);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{0, 2, 4, 10, 12, 14, 20, 22, 24}));
}

TEST(PoolMax, Dilation) {
  // Taps x[i][j], x[i][j+2], x[i+2][j], x[i+2][j+2]: the max is the last.
  Tensor y = max_pool2d(iota({1, 1, 4, 4}), {2}, {1}, {0}, {2});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{10, 11, 14, 15}));
}

TEST(PoolMax, NanPropagates) {
  Tensor x =
      from_vector(std::vector<float>{1, NAN, 3, 4, 5, 6, 7, 8}, {1, 1, 2, 4});
  std::vector<float> y = values(max_pool2d(x, {2}));
  ASSERT_EQ(y.size(), 2u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_EQ(y[1], 8);
}

TEST(PoolMax, IntegerDtypes) {
  Tensor x = from_vector(std::vector<int64_t>{-5, -3, -8, -1}, {1, 1, 2, 2});
  Tensor y = max_pool2d(x, {2});
  EXPECT_EQ(y.dtype(), DType::i64);
  EXPECT_EQ(y.to_vector<int64_t>(), (std::vector<int64_t>{-1}));
  Tensor z = max_pool2d(x.to(DType::i32), {2}, {1}, {1});
  EXPECT_EQ(z.to_vector<int32_t>(),
            (std::vector<int32_t>{-5, -3, -3, -5, -1, -1, -8, -1, -1}));
}

TEST(PoolMax, UnbatchedNonContiguousBf16) {
  Tensor x = transpose(iota({2, 4, 4}), 1, 2).to(DType::bf16);  // [c][w][h]
  Tensor y = max_pool2d(x, {2});
  ASSERT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_EQ(values(y), (std::vector<float>{5, 13, 7, 15, 21, 29, 23, 31}));
}

TEST(PoolMax, EmptyBatch) {
  EXPECT_EQ(max_pool2d(ones({0, 2, 4, 4}), {2}).shape(), (Shape{0, 2, 2, 2}));
}

// ---- avg_pool2d ---------------------------------------------------------

TEST(PoolAvg, TwoByTwoByHand) {
  Tensor y = avg_pool2d(iota({1, 1, 4, 4}), {2});
  ASSERT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
}

TEST(PoolAvg, CountIncludePad) {
  Tensor x = ones({1, 1, 3, 3});
  // Included padding counts in the divisor: corners see 4 of 9 ones.
  EXPECT_THAT(
      values(avg_pool2d(x, {3}, {1}, {1})),
      Pointwise(FloatNear(1e-6),
                std::vector<float>{4 / 9.f, 6 / 9.f, 4 / 9.f, 6 / 9.f, 1,
                                   6 / 9.f, 4 / 9.f, 6 / 9.f, 4 / 9.f}));
  EXPECT_EQ(
      values(avg_pool2d(x, {3}, {1}, {1}, false, /*count_include_pad=*/false)),
      std::vector<float>(9, 1));
}

TEST(PoolAvg, CeilModeDividesByTheClippedWindow) {
  // The last row and column windows hang over the input edge (no padding):
  // they average only the elements inside.
  Tensor y = avg_pool2d(iota({1, 1, 5, 5}), {2}, {2}, {0}, /*ceil_mode=*/true);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y),
            (std::vector<float>{3, 5, 6.5, 13, 15, 16.5, 20.5, 22.5, 24}));
}

TEST(PoolAvg, CeilModeWithPaddingCountsPaddingOnlyUpToThePaddedEdge) {
  // 4 wide, kernel 3, stride 2, padding 1, ceil: windows start at columns
  // -1, 1, 3; the last covers column 3, column 4 (right padding) and 5
  // (beyond it): with count_include_pad the divisor counts 2 columns.
  Tensor x = ones({1, 1, 1, 4});
  Tensor y = avg_pool2d(x, {1, 3}, {1, 2}, {0, 1}, true);
  ASSERT_EQ(y.shape(), (Shape{1, 1, 1, 3}));
  EXPECT_THAT(values(y),
              Pointwise(FloatNear(1e-6), std::vector<float>{2 / 3.f, 1, 0.5}));
}

TEST(PoolAvg, UnbatchedF64AndBf16) {
  Tensor y = avg_pool2d(iota({1, 4, 4}).to(DType::f64), {2});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(y.dtype(), DType::f64);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  Tensor z = avg_pool2d(iota({1, 1, 4, 4}).to(DType::bf16), {2});
  EXPECT_EQ(z.dtype(), DType::bf16);
  EXPECT_EQ(values(z), (std::vector<float>{2.5, 4.5, 10.5, 12.5}));
}

// ---- pooling: errors ----------------------------------------------------

TEST(PoolErrors, PaddingMoreThanHalfKernel) {
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 1, 4, 4}), {2}, {}, {2});
              }),
              AllOf(HasSubstr("max_pool2d"),
                    HasSubstr("padding 2 is more than half the kernel size 2"),
                    HasSubstr("f32[1, 1, 4, 4]")));
  EXPECT_THAT(
      error_of([] {
        avg_pool2d(ones({1, 1, 4, 4}), {3}, {}, {2});
      }),
      AllOf(HasSubstr("avg_pool2d"), HasSubstr("more than half the kernel")));
}

TEST(PoolErrors, OutputWouldBeEmpty) {
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 1, 1, 1}), {3});
              }),
              AllOf(HasSubstr("max_pool2d"), HasSubstr("output would be empty"),
                    HasSubstr("kernel [3, 3]")));
}

TEST(PoolErrors, InputRank) {
  EXPECT_THAT(error_of([] {
                avg_pool2d(ones({4, 4}), {2});
              }),
              AllOf(HasSubstr("avg_pool2d"), HasSubstr("4-D input"),
                    HasSubstr("f32[4, 4]")));
}

TEST(PoolErrors, EmptyChannelOrSpatialDim) {
  EXPECT_THAT(
      error_of([] {
        max_pool2d(ones({1, 0, 4, 4}), {2});
      }),
      AllOf(HasSubstr("max_pool2d"), HasSubstr("non-empty C, H and W")));
}

TEST(PoolErrors, KernelBelowOne) {
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 1, 4, 4}), {0});
              }),
              HasSubstr("kernel values must be >= 1"));
}

TEST(PoolErrors, KernelWithThreeValues) {
  EXPECT_THAT(error_of([] {
                avg_pool2d(ones({1, 1, 4, 4}), {2, 2, 2});
              }),
              HasSubstr("kernel must have 1 or 2 values"));
}

TEST(PoolErrors, ZeroStride) {
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 1, 4, 4}), {2}, {0});
              }),
              HasSubstr("stride values must be >= 1"));
}

TEST(PoolErrors, AvgNeedsFloating) {
  EXPECT_THAT(error_of([] {
                avg_pool2d(ones({1, 1, 4, 4}, DType::i64), {2});
              }),
              AllOf(HasSubstr("avg_pool2d"), HasSubstr("floating-point"),
                    HasSubstr("i64")));
}

TEST(PoolErrors, MaxRejectsBool) {
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 1, 4, 4}, DType::boolean), {2});
              }),
              AllOf(HasSubstr("max_pool2d"), HasSubstr("bool")));
}

}  // namespace
}  // namespace mstep
