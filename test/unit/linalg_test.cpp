// Unit tests for matmul, bmm and linear: hand-checked values, 1-D
// promotion, batch broadcasting, size-0/1 dims, non-contiguous inputs,
// integer and bf16 dtypes, and one test per error path. Convolution and
// pooling are in linalg_conv_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;
using testing::values;

/// [0, 1, ..., numel - 1] as f32 of `shape`, plus `offset`.
Tensor iota(const Shape& shape, float offset = 0) {
  std::vector<float> v(shape.numel());
  std::iota(v.begin(), v.end(), offset);
  return from_vector(v, shape);
}

// ---- matmul: values ---------------------------------------------------

TEST(Matmul, TwoByTwoByHand) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<float>{5, 6, 7, 8}, {2, 2});
  Tensor c = matmul(a, b);
  EXPECT_TRUE(c.is_pending());  // recorded, not computed
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(c), (std::vector<float>{19, 22, 43, 50}));
  EXPECT_EQ(values(a.matmul(b)), values(c));
}

TEST(Matmul, RectangularByHand) {
  // [2, 3] @ [3, 1]
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector(std::vector<float>{1, 0, -1}, {3, 1});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 1}));
  EXPECT_EQ(values(c), (std::vector<float>{-2, -2}));
}

TEST(Matmul, VectorDotVectorIsZeroDim) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = from_vector(std::vector<float>{4, 5, 6}, {3});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dim(), 0);
  EXPECT_EQ(c.item(), 32);
}

TEST(Matmul, VectorTimesMatrixDropsRowDim) {
  Tensor v = from_vector(std::vector<float>{1, 2}, {2});
  Tensor m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor c = matmul(v, m);
  EXPECT_EQ(c.shape(), (Shape{3}));
  EXPECT_EQ(values(c), (std::vector<float>{9, 12, 15}));
}

TEST(Matmul, MatrixTimesVectorDropsColumnDim) {
  Tensor m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = from_vector(std::vector<float>{1, 0, -1}, {3});
  Tensor c = matmul(m, v);
  EXPECT_EQ(c.shape(), (Shape{2}));
  EXPECT_EQ(values(c), (std::vector<float>{-2, -2}));
}

TEST(Matmul, BatchDimsBroadcast) {
  // [2, 1, 3, 4] @ [5, 4, 2] -> [2, 5, 3, 2]
  Tensor a = iota({2, 1, 3, 4});
  Tensor b = iota({5, 4, 2}, -20);
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  std::vector<float> av = values(a), bv = values(b), got = values(c);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int r = 0; r < 3; ++r)
        for (int q = 0; q < 2; ++q) {
          float want = 0;
          for (int k = 0; k < 4; ++k)
            want += av[(i * 3 + r) * 4 + k] * bv[(j * 4 + k) * 2 + q];
          EXPECT_EQ(got[((i * 5 + j) * 3 + r) * 2 + q], want)
              << i << " " << j << " " << r << " " << q;
        }
}

TEST(Matmul, MatrixTimesBatchAndVectorTimesBatch) {
  Tensor m = from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {3, 2});
  Tensor batch = iota({2, 2, 2});  // [[0,1],[2,3]], [[4,5],[6,7]]
  Tensor c = matmul(m, batch);
  ASSERT_EQ(c.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values(c),
            (std::vector<float>{0, 1, 2, 3, 2, 4, 4, 5, 6, 7, 10, 12}));

  Tensor v = from_vector(std::vector<float>{1, -1}, {2});
  Tensor d = matmul(v, batch);  // [2] @ [2, 2, 2] -> [2, 2]
  ASSERT_EQ(d.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(d), (std::vector<float>{-2, -2, -2, -2}));

  Tensor e = matmul(batch, v);  // [2, 2, 2] @ [2] -> [2, 2]
  ASSERT_EQ(e.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(e), (std::vector<float>{-1, -1, -1, -1}));
}

TEST(Matmul, SizeOneDims) {
  // [1, 1, 4] @ [3, 4, 1] -> [3, 1, 1]
  Tensor a = from_vector(std::vector<float>{1, 1, 1, 1}, {1, 1, 4});
  Tensor b = iota({3, 4, 1});
  Tensor c = matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{3, 1, 1}));
  EXPECT_EQ(values(c), (std::vector<float>{6, 22, 38}));
}

TEST(Matmul, ZeroRowsGiveEmptyResult) {
  Tensor c = matmul(zeros({0, 3}), ones({3, 2}));
  EXPECT_EQ(c.shape(), (Shape{0, 2}));
  EXPECT_TRUE(values(c).empty());
}

TEST(Matmul, EmptyContractionGivesZeros) {
  Tensor c = matmul(ones({2, 0}), ones({0, 3}));
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(values(c), std::vector<float>(6, 0));
}

TEST(Matmul, EmptyBatchGivesEmptyResult) {
  Tensor c = matmul(ones({0, 2, 3}), ones({3, 4}));
  EXPECT_EQ(c.shape(), (Shape{0, 2, 4}));
  EXPECT_TRUE(values(c).empty());
}

TEST(Matmul, NonContiguousInputs) {
  // a^T and a permuted batch read the same as their materialized values.
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor at = transpose(a, 0, 1);  // [[1, 3, 5], [2, 4, 6]]
  Tensor c = matmul(at, a);        // [2, 2]
  EXPECT_EQ(values(c), (std::vector<float>{35, 44, 44, 56}));

  Tensor batch = permute(iota({2, 2, 3}), {2, 0, 1});  // [3, 2, 2]
  Tensor d = matmul(batch, from_vector(std::vector<float>{1, 1}, {2}));
  ASSERT_EQ(d.shape(), (Shape{3, 2}));
  // batch[k][i][j] = i * 6 + j * 3 + k; row sums over j.
  EXPECT_EQ(values(d), (std::vector<float>{3, 15, 5, 17, 7, 19}));
}

TEST(Matmul, IntegerDtypes) {
  Tensor a = from_vector(std::vector<int32_t>{1, -2, 3, 4}, {2, 2});
  Tensor b = from_vector(std::vector<int32_t>{5, 6, -7, 8}, {2, 2});
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::i32);
  EXPECT_EQ(c.to_vector<int32_t>(), (std::vector<int32_t>{19, -10, -13, 50}));

  // i64 sums stay exact beyond float and int32 range.
  const int64_t big = int64_t{1} << 40;
  Tensor x = from_vector(std::vector<int64_t>{big, 3}, {1, 2});
  Tensor y = from_vector(std::vector<int64_t>{3, big + 1}, {2, 1});
  Tensor z = matmul(x, y);
  EXPECT_EQ(z.dtype(), DType::i64);
  EXPECT_EQ(z.to_vector<int64_t>(), (std::vector<int64_t>{6 * big + 3}));
}

TEST(Matmul, Bf16AccumulatesInFloatAndRoundsOnce) {
  // 1 + 4 * 2^-9 = 1 + 2^-7 is a bf16 value, but adding 2^-9 to 1 one
  // step at a time in bf16 would stay at 1.
  const float tiny = 1.0f / 512;
  Tensor a = from_vector(std::vector<float>{1, tiny, tiny, tiny, tiny}, {1, 5},
                         DType::bf16);
  Tensor b = ones({5, 1}, DType::bf16);
  Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::bf16);
  EXPECT_EQ(values(c), (std::vector<float>{1.0078125f}));

  Tensor m = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}, DType::bf16);
  EXPECT_EQ(values(matmul(m, m)), (std::vector<float>{7, 10, 15, 22}));
}

TEST(Matmul, F64) {
  Tensor a = from_vector(std::vector<double>{0.1, 0.2}, {1, 2});
  Tensor b = from_vector(std::vector<double>{0.3, 0.4}, {2, 1});
  EXPECT_DOUBLE_EQ(matmul(a, b).item(), 0.1 * 0.3 + 0.2 * 0.4);
}

// ---- matmul: errors ---------------------------------------------------

TEST(MatmulErrors, MixedDtypes) {
  EXPECT_THAT(error_of([] {
                matmul(ones({2, 3}), ones({3, 2}, DType::f64));
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("same dtype"),
                    HasSubstr("f32[2, 3]"), HasSubstr("f64[3, 2]")));
}

TEST(MatmulErrors, Bool) {
  Tensor t = ones({2, 2}, DType::boolean);
  EXPECT_THAT(error_of([&] { matmul(t, t); }),
              AllOf(HasSubstr("matmul"), HasSubstr("bool")));
}

TEST(MatmulErrors, ZeroDimOperand) {
  EXPECT_THAT(error_of([] { matmul(Tensor::scalar(2), ones({2})); }),
              AllOf(HasSubstr("matmul"), HasSubstr("at least 1 dim")));
}

TEST(MatmulErrors, ContractedDimsDiffer) {
  EXPECT_THAT(error_of([] {
                matmul(ones({2, 3}), ones({4, 2}));
              }),
              AllOf(HasSubstr("matmul"), HasSubstr("contracted dims differ: 3"),
                    HasSubstr("f32[2, 3] and f32[4, 2]")));
}

TEST(MatmulErrors, VectorLengthsDiffer) {
  EXPECT_THAT(
      error_of([] { matmul(ones({3}), ones({4})); }),
      AllOf(HasSubstr("contracted dims differ"), HasSubstr("only dim")));
}

TEST(MatmulErrors, BatchDimsDoNotBroadcast) {
  EXPECT_THAT(error_of([] {
                matmul(ones({2, 3, 4}), ones({3, 4, 5}));
              }),
              AllOf(HasSubstr("matmul"),
                    HasSubstr("batch dims cannot be broadcast"),
                    HasSubstr("f32[2, 3, 4] and f32[3, 4, 5]")));
}

TEST(MatmulErrors, UndefinedOperand) {
  EXPECT_THAT(error_of([] { matmul(Tensor(), ones({2})); }),
              AllOf(HasSubstr("matmul"), HasSubstr("undefined")));
}

// ---- bmm --------------------------------------------------------------

TEST(MatmulBmm, ValuesPerBatch) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3, 4, 1, 0, 0, 1}, {2, 2, 2});
  Tensor b = from_vector(std::vector<float>{5, 6, 7, 8, 9, 8, 7, 6}, {2, 2, 2});
  Tensor c = bmm(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(values(c), (std::vector<float>{19, 22, 43, 50, 9, 8, 7, 6}));
}

TEST(MatmulBmm, RequiresThreeDims) {
  EXPECT_THAT(
      error_of([] {
        bmm(ones({2, 2}), ones({1, 2, 2}));
      }),
      AllOf(HasSubstr("bmm"), HasSubstr("3-D"), HasSubstr("f32[2, 2]")));
}

TEST(MatmulBmm, BatchSizesMustMatch) {
  EXPECT_THAT(error_of([] {
                bmm(ones({2, 2, 3}), ones({1, 3, 2}));
              }),
              AllOf(HasSubstr("bmm"), HasSubstr("batch sizes differ: 2 vs 1"),
                    HasSubstr("does not broadcast")));
}

TEST(MatmulBmm, ContractedDimsMustMatch) {
  EXPECT_THAT(error_of([] {
                bmm(ones({2, 2, 3}), ones({2, 4, 2}));
              }),
              AllOf(HasSubstr("bmm"), HasSubstr("contracted dims differ: 3")));
}

TEST(MatmulBmm, DtypesMustMatch) {
  EXPECT_THAT(error_of([] {
                bmm(ones({1, 2, 2}), ones({1, 2, 2}, DType::i64));
              }),
              AllOf(HasSubstr("bmm"), HasSubstr("same dtype")));
}

// ---- linear -----------------------------------------------------------

TEST(LinalgLinear, WithBiasByHand) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor w = from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {2, 3});
  Tensor b = from_vector(std::vector<float>{10, 20}, {2});
  Tensor y = linear(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(y), (std::vector<float>{11, 26, 14, 35}));
  EXPECT_EQ(values(linear(x, w)), (std::vector<float>{1, 6, 4, 15}));
}

TEST(LinalgLinear, VectorAndHigherRankInputs) {
  Tensor w = from_vector(std::vector<float>{1, 0, 0, 1, 1, 1}, {2, 3});
  Tensor v = linear(from_vector(std::vector<float>{1, 2, 3}, {3}), w);
  EXPECT_EQ(v.shape(), (Shape{2}));
  EXPECT_EQ(values(v), (std::vector<float>{1, 6}));

  Tensor y = linear(iota({2, 4, 3}), w, ones({2}));
  EXPECT_EQ(y.shape(), (Shape{2, 4, 2}));
  EXPECT_EQ(values(y)[0], 1);    // row [0, 1, 2]: 0 + 1
  EXPECT_EQ(values(y)[15], 67);  // row [21, 22, 23]: 66 + 1
}

TEST(LinalgLinear, WeightMustBe2D) {
  EXPECT_THAT(
      error_of([] {
        linear(ones({2, 3}), ones({3}));
      }),
      AllOf(HasSubstr("linear"), HasSubstr("2-D weight"), HasSubstr("f32[3]")));
}

TEST(LinalgLinear, InFeaturesMustMatch) {
  EXPECT_THAT(error_of([] {
                linear(ones({2, 3}), ones({4, 5}));
              }),
              AllOf(HasSubstr("linear"), HasSubstr("last dim (3)"),
                    HasSubstr("in_features (5")));
}

TEST(LinalgLinear, BiasShapeMustBeOutFeatures) {
  EXPECT_THAT(
      error_of([] {
        linear(ones({2, 3}), ones({4, 3}), ones({3}));
      }),
      AllOf(HasSubstr("linear"), HasSubstr("bias of out_features = 4")));
}

TEST(LinalgLinear, BiasDtypeMustMatch) {
  EXPECT_THAT(
      error_of([] {
        linear(ones({2, 3}), ones({4, 3}), ones({4}, DType::f64));
      }),
      AllOf(HasSubstr("linear"), HasSubstr("bias to have the input's dtype")));
}

TEST(LinalgLinear, InputDtypeMustMatchWeight) {
  EXPECT_THAT(error_of([] {
                linear(ones({2, 3}, DType::bf16), ones({4, 3}));
              }),
              AllOf(HasSubstr("linear"), HasSubstr("same dtype")));
}

TEST(LinalgLinear, ZeroDimInput) {
  EXPECT_THAT(error_of([] {
                linear(Tensor::scalar(1), ones({4, 1}));
              }),
              AllOf(HasSubstr("linear"), HasSubstr("at least 1 dim")));
}

}  // namespace
}  // namespace mstep
