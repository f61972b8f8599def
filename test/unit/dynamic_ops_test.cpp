// nonzero and masked_select: values against torch's (hand-computed,
// row-major), shapes, dtypes, broadcasting, the sync point, the fallback
// count, and errors.
#include <cmath>
#include <cstdint>
#include <limits>

#include "lib/runtime/RuntimeInternal.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using testing::f32;
using ::testing::HasSubstr;
using testing::iota;
using ::testing::IsEmpty;

class DynamicOpsTest : public ::testing::Test {
protected:
  void SetUp() override {
    mark_step(); // flush anything a previous test left pending
    reset_metrics();
  }
};

Tensor bools(std::vector<bool> v, Shape s) { return from_vector(v, s); }

// ---- nonzero -------------------------------------------------------

// torch.nonzero(torch.tensor([[0, 1.5, 0], [-2, 0, 3]]))
//   -> [[0, 1], [1, 0], [1, 2]]
TEST_F(DynamicOpsTest, NonzeroMatrixIsRowMajor) {
  Tensor r = nonzero(f32({0, 1.5, 0, -2, 0, 3}, {2, 3}));
  EXPECT_EQ(r.dtype(), DType::i64);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  EXPECT_FALSE(r.is_pending());
  EXPECT_EQ(r.device(), default_device());
  EXPECT_FALSE(r.requires_grad());
  EXPECT_THAT(r.to_vector<int64_t>(), ElementsAre(0, 1, 1, 0, 1, 2));
}

// torch.nonzero(torch.tensor([0, 0, 7, 0, 1])) -> [[2], [4]]
TEST_F(DynamicOpsTest, NonzeroVector) {
  Tensor r = nonzero(f32({0, 0, 7, 0, 1}, {5}));
  EXPECT_EQ(r.shape(), (Shape{2, 1}));
  EXPECT_THAT(r.to_vector<int64_t>(), ElementsAre(2, 4));
}

// x = torch.arange(12).reshape(2, 2, 3) % 4 == 0 (flat 0, 4, 8):
// torch.nonzero(x) -> [[0, 0, 0], [0, 1, 1], [1, 0, 2]]
TEST_F(DynamicOpsTest, Nonzero3DOfBoolFromAPendingExpression) {
  std::vector<bool> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i % 4 == 0;
  Tensor x = logical_and(bools(v, {2, 2, 3}), ones({2, 2, 3}, DType::boolean));
  ASSERT_TRUE(x.is_pending());
  Tensor r = nonzero(x);
  EXPECT_EQ(r.shape(), (Shape{3, 3}));
  EXPECT_THAT(r.to_vector<int64_t>(), ElementsAre(0, 0, 0, 0, 1, 1, 1, 0, 2));
  EXPECT_EQ(metrics().sync_points, 1); // the input was computed first
  EXPECT_EQ(metrics().fallbacks, 1);
}

TEST_F(DynamicOpsTest, NonzeroEmptyResults) {
  // All zeros: torch gives an empty [0, rank] tensor.
  Tensor r = nonzero(zeros({3, 4}));
  EXPECT_EQ(r.shape(), (Shape{0, 2}));
  EXPECT_THAT(r.to_vector<int64_t>(), IsEmpty());
  // An empty input.
  EXPECT_EQ(nonzero(zeros({0, 5})).shape(), (Shape{0, 2}));
}

// torch.nonzero(torch.tensor(5.)) -> shape [1, 0]; of tensor(0.) -> [0, 0].
TEST_F(DynamicOpsTest, NonzeroOfScalar) {
  EXPECT_EQ(nonzero(Tensor::scalar(5.0)).shape(), (Shape{1, 0}));
  EXPECT_EQ(nonzero(Tensor::scalar(0.0)).shape(), (Shape{0, 0}));
}

TEST_F(DynamicOpsTest, NonzeroSpecialValuesAndDtypes) {
  // -0.0 is zero and NaN is not, as in torch.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(nonzero(f32({-0.0f, nan, 0.0f, -1e-30f}, {4})).to_vector<int64_t>(),
              ElementsAre(1, 3));
  // i64 beyond double's exact range is still nonzero; compared exactly.
  Tensor big = from_vector(std::vector<int64_t>{0, int64_t{1} << 62, 0, -1}, {4});
  EXPECT_THAT(nonzero(big).to_vector<int64_t>(), ElementsAre(1, 3));
  EXPECT_THAT(nonzero(from_vector(std::vector<int32_t>{3, 0, 0}, {3})).to_vector<int64_t>(),
              ElementsAre(0));
  Tensor half = from_vector(std::vector<float>{0, 0.5f, 0}, {3}, DType::bf16);
  EXPECT_THAT(nonzero(half).to_vector<int64_t>(), ElementsAre(1));
}

TEST_F(DynamicOpsTest, NonzeroResultFeedsLazyOps) {
  Tensor idx = nonzero(f32({0, 2, 0, 4}, {4}));
  Tensor doubled = idx * int64_t{2};
  EXPECT_TRUE(doubled.is_pending());
  mark_step();
  EXPECT_THAT(doubled.to_vector<int64_t>(), ElementsAre(2, 6));
}

TEST_F(DynamicOpsTest, NonzeroCountsAFallback) {
  nonzero(f32({1}, {1}));
  nonzero(from_vector(std::vector<int32_t>{1}, {1}));
  EXPECT_EQ(metrics().fallbacks, 2);
  const std::string table = internal::fallback_table();
  EXPECT_THAT(table, HasSubstr("nonzero"));
  EXPECT_THAT(table, HasSubstr("i32"));
}

// ---- masked_select -------------------------------------------------

// x = torch.arange(6.).reshape(2, 3); m = [[T, F, T], [F, F, T]]
// torch.masked_select(x, m) -> [0, 2, 5]
TEST_F(DynamicOpsTest, MaskedSelectSameShape) {
  Tensor r = masked_select(iota({2, 3}), bools({true, false, true, false, false, true}, {2, 3}));
  EXPECT_EQ(r.shape(), (Shape{3}));
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_FALSE(r.is_pending());
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(0, 2, 5));
  EXPECT_EQ(metrics().fallbacks, 1);
}

// torch.masked_select(torch.arange(6.).reshape(2, 3), torch.tensor([F, T, T]))
//   -> [1, 2, 4, 5]
TEST_F(DynamicOpsTest, MaskedSelectBroadcastsTheMaskOverRows) {
  Tensor r = masked_select(iota({2, 3}), bools({false, true, true}, {3}));
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(1, 2, 4, 5));
}

// mask [[T], [F]] (shape [2, 1]) selects the whole first row: [0, 1, 2]
TEST_F(DynamicOpsTest, MaskedSelectBroadcastsTheMaskOverColumns) {
  Tensor r = masked_select(iota({2, 3}), bools({true, false}, {2, 1}));
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(0, 1, 2));
}

// x broadcasts too, as in torch: x = [10, 20, 30], mask [[T, F, T], [T, T, F]]
//   -> [10, 30, 10, 20]
TEST_F(DynamicOpsTest, MaskedSelectBroadcastsXToTheMask) {
  Tensor r =
      masked_select(f32({10, 20, 30}, {3}), bools({true, false, true, true, true, false}, {2, 3}));
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(10, 30, 10, 20));
}

// x [2, 1] against mask [1, 3]: broadcast shape [2, 3].
// x = [[1], [2]], mask = [[T, F, T]] -> [1, 1, 2, 2]
TEST_F(DynamicOpsTest, MaskedSelectBroadcastsBothWays) {
  Tensor r = masked_select(f32({1, 2}, {2, 1}), bools({true, false, true}, {1, 3}));
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(1, 1, 2, 2));
}

TEST_F(DynamicOpsTest, MaskedSelectEmptyAndScalarMask) {
  Tensor none = masked_select(iota({2, 2}), bools({false, false, false, false}, {2, 2}));
  EXPECT_EQ(none.shape(), (Shape{0}));
  EXPECT_THAT(none.to_vector<float>(), IsEmpty());
  // A 0-d true mask selects everything, flattened.
  Tensor all = masked_select(iota({2, 2}), from_vector(std::vector<bool>{true}, Shape{}));
  EXPECT_THAT(all.to_vector<float>(), ElementsAre(0, 1, 2, 3));
}

TEST_F(DynamicOpsTest, MaskedSelectKeepsDtypeAndPendingInputs) {
  // i64 values beyond double precision survive (bytes are copied).
  const int64_t big = (int64_t{1} << 60) + 1;
  Tensor x = from_vector(std::vector<int64_t>{big, 7, -3}, {3});
  Tensor r = masked_select(x, bools({true, false, true}, {3}));
  EXPECT_EQ(r.dtype(), DType::i64);
  // (Compared on the device: to_vector<int64_t> reads through double.)
  Tensor expected = from_vector(std::vector<int64_t>{big, -3}, {2});
  EXPECT_THAT(eq(r, expected).to_vector<bool>(), ElementsAre(true, true));
  EXPECT_THAT(eq(r, expected - int64_t{1}).to_vector<bool>(), ElementsAre(false, false));
  // bf16 stays bf16; a pending mask is computed first.
  Tensor h = from_vector(std::vector<float>{1.5f, -2.f, 3.f}, {3}, DType::bf16);
  Tensor m = gt(f32({1, -1, 1}, {3}), 0.0);
  ASSERT_TRUE(m.is_pending());
  Tensor hr = masked_select(h, m);
  EXPECT_EQ(hr.dtype(), DType::bf16);
  EXPECT_THAT(hr.to_vector<float>(), ElementsAre(1.5f, 3.f));
}

TEST_F(DynamicOpsTest, MaskedSelectResultHasNoGrad) {
  Tensor w = f32({1, 2, 3}, {3});
  w.requires_grad_();
  Tensor r = masked_select(w, bools({true, true, false}, {3}));
  EXPECT_FALSE(r.requires_grad());
  EXPECT_THAT(r.to_vector<float>(), ElementsAre(1, 2));
}

TEST_F(DynamicOpsTest, MaskedSelectRejectsANonBoolMask) {
  const std::string msg = error_of([] { masked_select(iota({2, 3}), f32({1, 0, 1}, {3})); });
  EXPECT_THAT(msg, HasSubstr("mstep::masked_select"));
  EXPECT_THAT(msg, HasSubstr("mask must be bool"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("f32[3]"));
  EXPECT_EQ(metrics().fallbacks, 0); // nothing ran
}

TEST_F(DynamicOpsTest, MaskedSelectRejectsUnbroadcastableShapes) {
  const std::string msg = error_of([] { masked_select(iota({2, 3}), bools({true, false}, {2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::masked_select"));
  EXPECT_THAT(msg, HasSubstr("cannot be broadcast"));
  EXPECT_THAT(msg, HasSubstr("x f32[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("mask bool[2]"));
}

TEST_F(DynamicOpsTest, UndefinedInputsAreErrors) {
  EXPECT_THAT(error_of([] { nonzero(Tensor()); }), HasSubstr("`x` is undefined"));
  EXPECT_THAT(error_of([] { masked_select(iota({2}), Tensor()); }),
              HasSubstr("`mask` is undefined"));
}

} // namespace
} // namespace mstep
