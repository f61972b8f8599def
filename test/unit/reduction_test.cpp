// Unit tests for reductions: hand-checked values, keepdim, negative and
// multiple dims, size-0 and size-1 dims, integer/bool/bf16 dtypes,
// broadcast (non-contiguous) inputs and every error path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using testing::f32;
using ::testing::HasSubstr;

/// 0, 1, 2, ... laid out as `shape` (built directly, not with reshape).
Tensor iota(Shape s) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return from_vector(v, s);
}

/// [[1, 2, 3], [4, 5, 6]]
Tensor x23() { return f32({1, 2, 3, 4, 5, 6}, {2, 3}); }

TEST(Reduction, SumAllDimsGivesScalar) {
  Tensor s = sum(x23());
  EXPECT_TRUE(s.is_pending());  // nothing computes at call time
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dtype(), DType::f32);
  EXPECT_EQ(s.item(), 21);
}

TEST(Reduction, SumOneDimKeepdimAndNegative) {
  EXPECT_THAT(sum(x23(), {0}).to_vector<float>(), ElementsAre(5, 7, 9));
  Tensor k = sum(x23(), {-1}, /*keepdim=*/true);
  EXPECT_EQ(k.shape(), (Shape{2, 1}));
  EXPECT_THAT(k.to_vector<float>(), ElementsAre(6, 15));
  EXPECT_THAT(x23().sum({1}).to_vector<float>(), ElementsAre(6, 15));
}

TEST(Reduction, SumMultipleDims) {
  // x[i][j][k] = 12 i + 4 j + k over [2, 3, 4].
  Tensor x = iota({2, 3, 4});
  Tensor s = sum(x, {2, -3});
  EXPECT_EQ(s.shape(), Shape{3});
  // sum over i, k of 12 i + 4 j + k = 4*12 + 8*4 j + 2*6 = 60 + 32 j.
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(60, 92, 124));
  Tensor k = sum(x, {0, 2}, true);
  EXPECT_EQ(k.shape(), (Shape{1, 3, 1}));
  EXPECT_THAT(k.to_vector<float>(), ElementsAre(60, 92, 124));
}

TEST(Reduction, SumIntAndBoolGiveI64) {
  Tensor i = from_vector(std::vector<int32_t>{2000000000, 2000000000, 5}, {3});
  Tensor s = sum(i);
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_vector<int64_t>(), std::vector<int64_t>{4000000005});  // no i32 overflow
  Tensor b = from_vector(std::vector<bool>{true, false, true, true}, {2, 2});
  Tensor bs = sum(b, {1});
  EXPECT_EQ(bs.dtype(), DType::i64);
  EXPECT_THAT(bs.to_vector<int64_t>(), ElementsAre(1, 2));
}

TEST(Reduction, SumOverSizeZeroDimIsZero) {
  Tensor z = zeros({0, 3});
  Tensor s = sum(z, {0});
  EXPECT_EQ(s.shape(), Shape{3});
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(0, 0, 0));
  EXPECT_EQ(sum(z).item(), 0);
  EXPECT_EQ(sum(z, {1}).shape(), Shape{0});
}

TEST(Reduction, SizeOneDimsAndScalars) {
  Tensor x = f32({1, 2, 3}, {3, 1});
  EXPECT_THAT(sum(x, {1}).to_vector<float>(), ElementsAre(1, 2, 3));
  EXPECT_THAT(max(x, {1}, true).to_vector<float>(), ElementsAre(1, 2, 3));
  Tensor s = f32({7}, {});
  EXPECT_EQ(sum(s).item(), 7);
  EXPECT_EQ(max(s, {0}).item(), 7);
  EXPECT_EQ(argmax(s).item(), 0);
}

TEST(Reduction, BroadcastInput) {
  // a + b broadcasts [3, 1] and [1, 4] to [3, 4]: row i is i*10 + (0..3).
  Tensor a = f32({0, 10, 20}, {3, 1});
  Tensor b = f32({0, 1, 2, 3}, {1, 4});
  Tensor x = a + b;
  EXPECT_THAT(sum(x, {0}).to_vector<float>(), ElementsAre(30, 33, 36, 39));
  EXPECT_THAT(max(x, {1}).to_vector<float>(), ElementsAre(3, 13, 23));
  EXPECT_THAT(argmax(x, 0).to_vector<int64_t>(), ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(mean(x, {-1}).to_vector<float>(), ElementsAre(1.5, 11.5, 21.5));
}

TEST(Reduction, Bf16SumAccumulatesWideAndRoundsOnce) {
  // 1 + 300 * 2^-9 = 1.5859375 is a bf16 value, but adding 2^-9 to 1 in
  // bf16 rounds back to 1: a bf16 accumulator would return 1.
  std::vector<float> v(301, 1.0f / 512);
  v[0] = 1;
  Tensor x = from_vector(v, {301}, DType::bf16);
  Tensor s = sum(x);
  EXPECT_EQ(s.dtype(), DType::bf16);
  EXPECT_EQ(s.item(), 1.5859375);
  // Half a bf16 ulp at 0.0053 is 1.5e-5.
  EXPECT_NEAR(mean(x).item(), 1.5859375 / 301, 1.6e-5);
}

TEST(Reduction, Mean) {
  EXPECT_EQ(mean(x23()).item(), 3.5);
  Tensor m = mean(x23(), {0}, true);
  EXPECT_EQ(m.shape(), (Shape{1, 3}));
  EXPECT_THAT(m.to_vector<float>(), ElementsAre(2.5, 3.5, 4.5));
  Tensor d = mean(from_vector(std::vector<double>{1, 2}, {2}));
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.item(), 1.5);
  EXPECT_TRUE(std::isnan(mean(zeros({0, 2}), {0}).to_vector<float>()[0]));
}

TEST(Reduction, MaxMinValues) {
  Tensor x = f32({3, -1, 7, 0, 5, -2}, {2, 3});
  EXPECT_EQ(max(x).item(), 7);
  EXPECT_EQ(min(x).item(), -2);
  EXPECT_THAT(max(x, {0}).to_vector<float>(), ElementsAre(3, 5, 7));
  EXPECT_THAT(min(x, {-1}, true).to_vector<float>(), ElementsAre(-1, -2));
  EXPECT_EQ(min(x, {-1}, true).shape(), (Shape{2, 1}));
}

TEST(Reduction, MaxMinKeepIntAndBoolDtypes) {
  Tensor i = from_vector(std::vector<int64_t>{4, -9, 2, 8}, {2, 2});
  Tensor m = max(i, {1});
  EXPECT_EQ(m.dtype(), DType::i64);
  EXPECT_THAT(m.to_vector<int64_t>(), ElementsAre(4, 8));
  EXPECT_EQ(min(i).item(), -9);
  Tensor b = from_vector(std::vector<bool>{false, false, true, false}, {2, 2});
  EXPECT_EQ(max(b, {1}).dtype(), DType::boolean);
  EXPECT_THAT(max(b, {1}).to_vector<bool>(), ElementsAre(false, true));
  EXPECT_THAT(min(b, {0}).to_vector<bool>(), ElementsAre(false, false));
}

TEST(Reduction, MaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = f32({1, nan, 3, 4}, {2, 2});
  std::vector<float> m = max(x, {1}).to_vector<float>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 4);
  EXPECT_TRUE(std::isnan(min(x).item()));
}

TEST(Reduction, MaxOverNonEmptyDimOfEmptyTensor) {
  Tensor m = max(zeros({0, 3}), {1});
  EXPECT_EQ(m.shape(), Shape{0});
  EXPECT_TRUE(m.to_vector<float>().empty());
}

TEST(Reduction, Argmax) {
  Tensor x = f32({1, 9, 9, 4, 2, 8}, {2, 3});
  Tensor flat = argmax(x);
  EXPECT_EQ(flat.dtype(), DType::i64);
  EXPECT_EQ(flat.shape(), Shape{});
  EXPECT_EQ(flat.item(), 1);  // first of the two maxima
  EXPECT_THAT(argmax(x, 1).to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_THAT(argmax(x, -2).to_vector<int64_t>(), ElementsAre(1, 0, 0));
  Tensor k = argmax(x, 1, true);
  EXPECT_EQ(k.shape(), (Shape{2, 1}));
  // Without a dim, keepdim keeps every dim at size 1 (as PyTorch).
  EXPECT_EQ(argmax(x, std::nullopt, true).shape(), (Shape{1, 1}));
  Tensor i = from_vector(std::vector<int32_t>{3, 3, -1}, {3});
  EXPECT_EQ(argmax(i).item(), 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(f32({1, nan, 5}, {3})).item(), 1);  // NaN counts as max
}

TEST(Reduction, ArgmaxFlattenedIndexOver3D) {
  Tensor x = iota({2, 3, 4});
  Tensor y = f32({0}, {1}) - x;  // maximum at the first element, then 0 - 1...
  EXPECT_EQ(argmax(x).item(), 23);
  EXPECT_EQ(argmax(y).item(), 0);
  EXPECT_THAT(argmax(x, 1).to_vector<int64_t>(),
              ElementsAre(2, 2, 2, 2, 2, 2, 2, 2));
}

TEST(Reduction, Logsumexp) {
  Tensor x = f32({0, 0, 1000, 1000}, {2, 2});
  std::vector<float> v = logsumexp(x, {1}).to_vector<float>();
  EXPECT_NEAR(v[0], std::log(2.0), 1e-6);
  EXPECT_NEAR(v[1], 1000 + std::log(2.0), 1e-3);  // no overflow
  EXPECT_NEAR(logsumexp(x, {}).item(), 1000 + std::log(2.0), 1e-3);
  const float inf = std::numeric_limits<float>::infinity();
  Tensor special = f32({-inf, -inf, inf, 1}, {2, 2});
  std::vector<float> w = logsumexp(special, {-1}, true).to_vector<float>();
  EXPECT_EQ(w[0], -inf);
  EXPECT_EQ(w[1], inf);
  EXPECT_EQ(logsumexp(zeros({0}), {0}).item(), -inf);
}

TEST(Reduction, VarWithCorrection) {
  Tensor x = f32({1, 2, 3, 4}, {4});
  EXPECT_NEAR(var(x).item(), 5.0 / 3, 1e-6);
  EXPECT_NEAR(var(x, {}, 0).item(), 1.25, 1e-6);
  EXPECT_NEAR(var(x, {0}, 2).item(), 2.5, 1e-6);
  Tensor m = var(f32({1, 2, 3, 2, 4, 6}, {2, 3}), {1}, 1, true);
  EXPECT_EQ(m.shape(), (Shape{2, 1}));
  EXPECT_THAT(m.to_vector<float>(), ElementsAre(1, 4));
  // One element with correction 1: 0/0.
  EXPECT_TRUE(std::isnan(var(f32({5}, {1})).item()));
  // n <= correction with spread: x/0 = inf (as PyTorch).
  EXPECT_EQ(var(f32({1, 2}, {2}), {0}, 3).item(), std::numeric_limits<double>::infinity());
}

TEST(Reduction, VarIsStableForLargeOffsets) {
  // E[x^2] - E[x]^2 would cancel catastrophically here in f32.
  Tensor x = from_vector(std::vector<float>{1e4f + 1, 1e4f + 2, 1e4f + 3}, {3});
  EXPECT_NEAR(var(x).item(), 1.0, 1e-6);
}

TEST(ReductionErrors, DimOutOfRange) {
  std::string msg = error_of([] { sum(x23(), {2}); });
  EXPECT_THAT(msg, HasSubstr("mstep::sum"));
  EXPECT_THAT(msg, HasSubstr("dim 2 is out of range [-2, 1]"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3]"));
}

TEST(ReductionErrors, DuplicateDims) {
  std::string msg = error_of([] { mean(x23(), {1, -1}); });
  EXPECT_THAT(msg, HasSubstr("mstep::mean"));
  EXPECT_THAT(msg, HasSubstr("names a dim twice"));
}

TEST(ReductionErrors, MeanOfIntegers) {
  std::string msg = error_of([] { mean(from_vector(std::vector<int64_t>{1, 2}, {2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::mean: expects a floating-point input"));
  EXPECT_THAT(msg, HasSubstr("i64[2]"));
  EXPECT_THAT(msg, HasSubstr("DType::f32"));
}

TEST(ReductionErrors, LogsumexpAndVarOfIntegers) {
  Tensor i = from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_THAT(error_of([&] { logsumexp(i, {0}); }),
              HasSubstr("mstep::logsumexp: expects a floating-point input"));
  EXPECT_THAT(error_of([&] { var(i); }),
              HasSubstr("mstep::var: expects a floating-point input"));
}

TEST(ReductionErrors, VarNegativeCorrection) {
  std::string msg = error_of([] { var(x23(), {}, -1); });
  EXPECT_THAT(msg, HasSubstr("mstep::var: correction must be >= 0, got -1"));
}

TEST(ReductionErrors, MaxOfEmptyTensorOverAllDims) {
  std::string msg = error_of([] { max(zeros({0, 3})); });
  EXPECT_THAT(msg, HasSubstr("mstep::max: cannot reduce a tensor with no elements"));
  EXPECT_THAT(msg, HasSubstr("f32[0, 3]"));
}

TEST(ReductionErrors, MinOverSizeZeroDim) {
  std::string msg = error_of([] { min(zeros({2, 0}), {-1}); });
  EXPECT_THAT(msg, HasSubstr("mstep::min: reduction dim 1 has size 0"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 0]"));
}

TEST(ReductionErrors, ArgmaxOfEmpty) {
  EXPECT_THAT(error_of([] { argmax(zeros({0})); }),
              HasSubstr("mstep::argmax: cannot reduce a tensor with no elements"));
  EXPECT_THAT(error_of([] { argmax(zeros({3, 0}), 1); }),
              HasSubstr("mstep::argmax: reduction dim 1 has size 0"));
  EXPECT_THAT(error_of([] { argmax(x23(), 5); }),
              HasSubstr("mstep::argmax: dim 5 is out of range"));
}

TEST(ReductionErrors, UndefinedInput) {
  EXPECT_THAT(error_of([] { sum(Tensor()); }),
              HasSubstr("mstep::sum: the input is undefined"));
}

}  // namespace
}  // namespace mstep
