// Unit tests for the scatter ops: scatter_add, index_add, slice_scatter.
// Hand-checked values, edge cases (negative dims, duplicate indices, 0-d
// and empty indices, size-0 dims, non-contiguous inputs, i32 indices,
// integer, bool and bf16 dtypes), one test per call-time error, and the
// run-time index-range errors, after which the runtime must keep working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using testing::expect_step_error;
using testing::f32;
using ::testing::HasSubstr;
using testing::idx;
using testing::iota;

// ---- scatter_add --------------------------------------------------------

TEST(ScatterAdd, DuplicatesAccumulateAlongDim0) {
  // out[index[i][j]][j] += src[i][j]
  Tensor y = scatter_add(zeros({3, 2}), 0, idx({0, 1, 2, 0, 0, 0}, {3, 2}),
                         f32({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_TRUE(y.is_pending());
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(6, 10, 0, 2, 3, 0));
}

TEST(ScatterAdd, NegativeDimAndIndexSmallerThanSrc) {
  // Only src[:, :2] is used: the index is [2, 2], src [2, 3].
  Tensor y =
      scatter_add(ones({2, 3}), -1, idx({2, 2, 0, 1}, {2, 2}), f32({1, 2, 9, 3, 4, 9}, {2, 3}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, 1, 4, 4, 5, 1));
  // The index may also be shorter than the input outside `dim`.
  Tensor z = scatter_add(zeros({3, 2}), 0, idx({2}, {1, 1}), f32({7, 8}, {1, 2}));
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(0, 0, 0, 0, 7, 0));
}

TEST(ScatterAdd, DtypesAndI32Index) {
  Tensor i32 = from_vector(std::vector<int32_t>{1, 1, 0}, {3});
  EXPECT_THAT(
      scatter_add(iota({2}, DType::i64), 0, i32, iota({3}, DType::i64)).to_vector<int64_t>(),
      ElementsAre(2, 2));
  Tensor b = from_vector(std::vector<bool>{false, false, true}, {3});
  Tensor bs = from_vector(std::vector<bool>{true, false, false}, {3});
  // bool adds as "or", as PyTorch.
  EXPECT_THAT(scatter_add(b, 0, idx({0, 0, 2}, {3}), bs).to_vector<bool>(),
              ElementsAre(true, false, true));
  Tensor h = scatter_add(zeros({2}, DType::bf16), 0, idx({1, 1}, {2}),
                         from_vector(std::vector<float>{0.5f, 1.5f}, {2}, DType::bf16));
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_THAT(h.to_vector<float>(), ElementsAre(0, 2));
}

TEST(ScatterAdd, NonContiguousScalarAndEmpty) {
  Tensor x = transpose(iota({2, 3}), 0, 1);                     // [[0, 3], [1, 4], [2, 5]]
  Tensor src = transpose(f32({10, 20, 30, 40}, {2, 2}), 0, 1);  // [[10, 30], [20, 40]]
  EXPECT_THAT(scatter_add(x, 1, idx({1, 1, 0, 0}, {2, 2}), src).to_vector<float>(),
              ElementsAre(0, 43, 61, 4, 2, 5));
  Tensor s = scatter_add(Tensor::scalar(1.0), 0, idx({0}, {}), Tensor::scalar(2.0));
  EXPECT_EQ(s.shape(), (Shape{}));
  EXPECT_EQ(s.item(), 3.0);
  // An empty index changes nothing and skips the size checks, as PyTorch.
  EXPECT_THAT(scatter_add(iota({3}), 0, idx({}, {0}), f32({9}, {1})).to_vector<float>(),
              ElementsAre(0, 1, 2));
  EXPECT_EQ(scatter_add(zeros({0, 2}), 1, idx({}, {0, 2}), zeros({0, 2})).shape(), (Shape{0, 2}));
}

TEST(ScatterAddErrors, FloatIndex) {
  std::string msg = error_of([] { scatter_add(iota({3}), 0, iota({2}), iota({2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::scatter_add"));
  EXPECT_THAT(msg, HasSubstr("must be an integer tensor, got f32"));
}

TEST(ScatterAddErrors, RankMismatch) {
  std::string msg = error_of([] { scatter_add(iota({2, 3}), 1, idx({0, 1}, {2}), iota({2})); });
  EXPECT_THAT(msg, HasSubstr("the same number of dims; they have 2, 1 and 1"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3], index i64[2] and src f32[2]"));
}

TEST(ScatterAddErrors, DtypeMismatch) {
  std::string msg =
      error_of([] { scatter_add(iota({3}), 0, idx({0}, {1}), iota({1}, DType::f64)); });
  EXPECT_THAT(msg, HasSubstr("the src has dtype f64 but the input has f32"));
}

TEST(ScatterAddErrors, IndexLargerThanSrc) {
  std::string msg = error_of([] {
    scatter_add(iota({3, 2}), 0, idx({0, 1, 1}, {3, 1}), iota({2, 2}));
  });
  EXPECT_THAT(msg, HasSubstr("index size 3 exceeds the src size 2 in dim 0"));
}

TEST(ScatterAddErrors, IndexLargerThanInputOutsideDim) {
  std::string msg = error_of([] {
    scatter_add(iota({3, 2}), 0, idx({0, 0, 0}, {1, 3}), iota({1, 3}));
  });
  EXPECT_THAT(msg, HasSubstr("index size 3 exceeds the input size 2 in dim 1"));
}

TEST(ScatterAddErrors, DimOutOfRange) {
  std::string msg = error_of([] { scatter_add(iota({3}), 1, idx({0}, {1}), iota({1})); });
  EXPECT_THAT(msg, HasSubstr("dim 1 is out of range [-1, 0]"));
}

TEST(ScatterAddErrors, IndexOutOfRangeAtRunTime) {
  expect_step_error(
      [] {
        return scatter_add(zeros({2, 3}), 1, idx({0, 3}, {2, 1}), ones({2, 1}));
      },
      {"mstep::scatter_add", "index 3", "element 1", "out of range [0, 3)", "dim 1"});
}

TEST(ScatterAddErrors, NegativeIndexAtRunTime) {
  expect_step_error(
      [] {
        return scatter_add(zeros({4}), 0, idx({1, -1}, {2}), ones({2}));
      },
      {"mstep::scatter_add", "index -1", "[0, 4)", "negative indices are not wrapped"});
}

// ---- index_add ----------------------------------------------------------

TEST(IndexAdd, DuplicatesAccumulateAlongDim0) {
  Tensor y = index_add(zeros({3, 2}), 0, idx({0, 2, 0}, {3}), f32({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_TRUE(y.is_pending());
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(6, 8, 0, 0, 3, 4));
}

TEST(IndexAdd, NegativeDimScalarIndexAndScalarInput) {
  Tensor y = index_add(ones({2, 3}), -1, idx({2, 2}, {2}), f32({1, 2, 3, 4}, {2, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, 1, 4, 1, 1, 8));
  // A 0-d index stands for one entry.
  Tensor z = index_add(zeros({2, 2}), 0, idx({1}, {}), f32({5, 6}, {1, 2}));
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(0, 0, 5, 6));
  Tensor s = index_add(Tensor::scalar(1.0), 0, idx({0}, {1}), Tensor::scalar(2.0));
  EXPECT_EQ(s.shape(), (Shape{}));
  EXPECT_EQ(s.item(), 3.0);
}

TEST(IndexAdd, DtypesI32IndexNonContiguousAndEmpty) {
  Tensor i32 = from_vector(std::vector<int32_t>{1, 1}, {2});
  EXPECT_THAT(
      index_add(iota({2, 2}, DType::i32), 0, i32, iota({2, 2}, DType::i32)).to_vector<int32_t>(),
      ElementsAre(0, 1, 4, 7));
  Tensor b = from_vector(std::vector<bool>{false, true, false}, {3});
  Tensor bs = from_vector(std::vector<bool>{true, false}, {2});
  EXPECT_THAT(index_add(b, 0, idx({0, 1}, {2}), bs).to_vector<bool>(),
              ElementsAre(true, true, false));
  Tensor x = transpose(iota({2, 3}), 0, 1);                     // [[0, 3], [1, 4], [2, 5]]
  Tensor src = transpose(f32({10, 20, 30, 40}, {2, 2}), 0, 1);  // [[10, 30], [20, 40]]
  EXPECT_THAT(index_add(x, 0, idx({2, 0}, {2}), src).to_vector<float>(),
              ElementsAre(20, 43, 1, 4, 12, 35));
  EXPECT_THAT(index_add(iota({3}), 0, idx({}, {0}), zeros({0})).to_vector<float>(),
              ElementsAre(0, 1, 2));
  EXPECT_EQ(index_add(zeros({2, 0}), 0, idx({1}, {1}), zeros({1, 0})).shape(), (Shape{2, 0}));
}

TEST(IndexAddErrors, MatrixIndex) {
  std::string msg = error_of([] { index_add(iota({3}), 0, idx({0, 1}, {1, 2}), iota({2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::index_add"));
  EXPECT_THAT(msg, HasSubstr("must be 1-d (or 0-d), it has 2 dims"));
}

TEST(IndexAddErrors, BoolIndex) {
  std::string msg = error_of(
      [] { index_add(iota({3}), 0, from_vector(std::vector<bool>{true}, {1}), iota({1})); });
  EXPECT_THAT(msg, HasSubstr("must be an integer tensor, got bool"));
}

TEST(IndexAddErrors, DtypeMismatch) {
  std::string msg = error_of([] { index_add(iota({3}), 0, idx({0}, {1}), iota({1}, DType::i64)); });
  EXPECT_THAT(msg, HasSubstr("the source has dtype i64 but the input has f32"));
}

TEST(IndexAddErrors, SourceRankMismatch) {
  std::string msg = error_of([] { index_add(iota({3, 2}), 0, idx({0}, {1}), iota({2})); });
  EXPECT_THAT(msg, HasSubstr("the source has 1 dims but the input has 2"));
}

TEST(IndexAddErrors, SourceSizeMismatch) {
  std::string in_dim = error_of([] { index_add(iota({3, 2}), 0, idx({0, 1}, {2}), iota({3, 2})); });
  EXPECT_THAT(in_dim, HasSubstr("size 3 in dim 0 but the index has 2 entries"));
  std::string other = error_of([] { index_add(iota({3, 2}), 0, idx({0, 1}, {2}), iota({2, 3})); });
  EXPECT_THAT(other, HasSubstr("size 3 in dim 1 but the input has 2 (only dim 0 may differ)"));
}

TEST(IndexAddErrors, ScalarInputManyIndices) {
  std::string msg = error_of([] {
    index_add(Tensor::scalar(1.0), 0, idx({0, 0}, {2}), iota({2}));
  });
  EXPECT_THAT(msg, HasSubstr("a 0-d input takes exactly one index"));
}

TEST(IndexAddErrors, IndexOutOfRangeAtRunTime) {
  expect_step_error(
      [] {
        return index_add(zeros({3, 2}), 0, idx({0, 7, 1}, {3}), ones({3, 2}));
      },
      {"mstep::index_add", "index 7", "element 1", "[0, 3)"});
}

TEST(IndexAddErrors, NegativeIndexAtRunTime) {
  expect_step_error(
      [] {
        return index_add(zeros({3, 2}), 1, idx({-2}, {1}), ones({3, 1}));
      },
      {"mstep::index_add", "index -2", "[0, 2)"});
}

// ---- slice_scatter ------------------------------------------------------

TEST(SliceScatter, StepAndNegativeBounds) {
  Tensor y = slice_scatter(zeros({6}), f32({1, 2}, {2}), 0, 1, 5, 3);
  EXPECT_TRUE(y.is_pending());
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0, 1, 0, 0, 2, 0));
  // Negative dim and start; clamped end.
  Tensor z = slice_scatter(zeros({2, 3}), f32({1, 2, 3, 4}, {2, 2}), -1, -2, 100);
  EXPECT_THAT(z.to_vector<float>(), ElementsAre(0, 1, 2, 0, 3, 4));
  // Defaults cover the whole first dim.
  EXPECT_THAT(slice_scatter(zeros({2}), f32({5, 6}, {2})).to_vector<float>(), ElementsAre(5, 6));
}

TEST(SliceScatter, EmptySliceCastAndOtherDtypes) {
  EXPECT_THAT(slice_scatter(iota({3}), zeros({0}), 0, 2, 1).to_vector<float>(),
              ElementsAre(0, 1, 2));
  // src is converted to the input's dtype, as torch.slice_scatter.
  Tensor c = slice_scatter(zeros({3}), idx({7}, {1}), 0, 1, 2);
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_THAT(c.to_vector<float>(), ElementsAre(0, 7, 0));
  Tensor b = from_vector(std::vector<bool>{false, false, false, false}, {4});
  EXPECT_THAT(slice_scatter(b, from_vector(std::vector<bool>{true, true}, {2}), 0, 0, 4, 2)
                  .to_vector<bool>(),
              ElementsAre(true, false, true, false));
  EXPECT_THAT(
      slice_scatter(iota({2, 2}, DType::i64), idx({8, 9}, {1, 2}), 0, 1).to_vector<int64_t>(),
      ElementsAre(0, 1, 8, 9));
}

TEST(SliceScatter, NonContiguousInputAndSrc) {
  Tensor x = transpose(iota({2, 3}), 0, 1);                     // [[0, 3], [1, 4], [2, 5]]
  Tensor src = transpose(f32({10, 20, 30, 40}, {2, 2}), 0, 1);  // [[10, 30], [20, 40]]
  EXPECT_THAT(slice_scatter(x, src, 0, 1).to_vector<float>(), ElementsAre(0, 3, 10, 30, 20, 40));
  // Round trip: writing a slice back leaves the tensor unchanged.
  Tensor t = iota({4, 5});
  EXPECT_EQ(slice_scatter(t, slice(t, 1, 1, 5, 2), 1, 1, 5, 2).to_vector<float>(),
            t.to_vector<float>());
}

TEST(SliceScatterErrors, ShapeMismatch) {
  std::string msg = error_of([] { slice_scatter(zeros({4, 3}), zeros({4, 2}), 1, 0, 3); });
  EXPECT_THAT(msg, HasSubstr("mstep::slice_scatter"));
  EXPECT_THAT(msg, HasSubstr("src has shape [4, 2] but the slice [0:3:1] of dim 1 has shape "
                             "[4, 3]"));
}

TEST(SliceScatterErrors, ScalarInput) {
  std::string msg = error_of([] { slice_scatter(Tensor::scalar(1.0), Tensor::scalar(1.0)); });
  EXPECT_THAT(msg, HasSubstr("cannot slice a 0-d tensor"));
}

TEST(SliceScatterErrors, NonPositiveStep) {
  std::string msg = error_of([] { slice_scatter(zeros({4}), zeros({2}), 0, 0, 4, 0); });
  EXPECT_THAT(msg, HasSubstr("step must be positive, got 0"));
}

TEST(SliceScatterErrors, DimOutOfRange) {
  std::string msg = error_of([] { slice_scatter(zeros({4}), zeros({4}), 2); });
  EXPECT_THAT(msg, HasSubstr("dim 2 is out of range [-1, 0]"));
}

TEST(SliceScatterErrors, UndefinedSrc) {
  std::string msg = error_of([] { slice_scatter(zeros({4}), Tensor()); });
  EXPECT_THAT(msg, HasSubstr("the src is undefined"));
}

}  // namespace
}  // namespace mstep
