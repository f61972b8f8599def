// Unit tests for the indexing ops: gather, index_select, embedding.
// Hand-checked values, edge cases (negative dims, 0-d and empty indices,
// non-contiguous inputs, i32 indices, bool and bf16 inputs), one test per
// call-time error, and the run-time index-range errors, after which the
// runtime must keep working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using testing::expect_step_error;
using ::testing::HasSubstr;
using testing::idx;
using testing::iota;

// ---- gather -----------------------------------------------------------

TEST(DataMovementGather, AlongEachDim) {
  Tensor x = iota({2, 3});  // [[0, 1, 2], [3, 4, 5]]
  Tensor y = gather(x, 1, idx({2, 0, 1, 1}, {2, 2}));
  EXPECT_TRUE(y.is_pending());
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 0, 4, 4));
  EXPECT_THAT(gather(x, -1, idx({2, 0, 1, 1}, {2, 2})).to_vector<float>(),
              ElementsAre(2, 0, 4, 4));
  EXPECT_THAT(gather(x, 0, idx({1, 0, 1}, {1, 3})).to_vector<float>(),
              ElementsAre(3, 1, 5));
  Tensor i32 = from_vector(std::vector<int32_t>{1, 0}, {1, 2});
  EXPECT_THAT(gather(x, 0, i32).to_vector<float>(), ElementsAre(3, 1));
}

TEST(DataMovementGather, NonContiguousBoolScalarAndEmpty) {
  Tensor t = transpose(iota({2, 3}), 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  EXPECT_THAT(gather(t, 0, idx({2, 1}, {1, 2})).to_vector<float>(),
              ElementsAre(2, 4));
  Tensor e = expand(from_vector(std::vector<int64_t>{7, 8}, {2, 1}), {2, 3});
  EXPECT_THAT(gather(e, 1, idx({0, 2, 1, 0}, {2, 2})).to_vector<int64_t>(),
              ElementsAre(7, 7, 8, 8));
  Tensor b = from_vector(std::vector<bool>{true, false, false}, {3});
  EXPECT_THAT(gather(b, 0, idx({1, 0, 0, 2}, {4})).to_vector<bool>(),
              ElementsAre(false, true, true, false));
  Tensor s = gather(Tensor::scalar(5.0), 0, idx({0}, {}));
  EXPECT_EQ(s.shape(), (Shape{}));
  EXPECT_EQ(s.item(), 5.0);
  // An empty index skips the size check, as PyTorch.
  EXPECT_EQ(gather(iota({2, 3}), 1, idx({}, {3, 0})).shape(), (Shape{3, 0}));
}

TEST(DataMovementGatherErrors, FloatIndex) {
  std::string msg = error_of([] { gather(iota({3}), 0, iota({2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::gather"));
  EXPECT_THAT(msg, HasSubstr("must be an integer tensor, got f32"));
}

TEST(DataMovementGatherErrors, RankMismatch) {
  std::string msg = error_of([] { gather(iota({2, 3}), 1, idx({0, 1}, {2})); });
  EXPECT_THAT(msg, HasSubstr("the index has 1 dims but the input has 2"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3] and index i64[2]"));
}

TEST(DataMovementGatherErrors, IndexLargerOutsideDim) {
  std::string msg = error_of([] {
    gather(iota({2, 3}), 0, idx({0, 0, 0, 0}, {1, 4}));
  });
  EXPECT_THAT(msg, HasSubstr("index size 4 exceeds the input size 3 in dim 1"));
}

TEST(DataMovementGatherErrors, DimOutOfRange) {
  std::string msg = error_of([] { gather(iota({3}), 1, idx({0}, {1})); });
  EXPECT_THAT(msg, HasSubstr("dim 1 is out of range [-1, 0]"));
}

TEST(DataMovementGatherErrors, IndexOutOfRangeAtRunTime) {
  expect_step_error(
      [] {
        return gather(iota({2, 3}), 1, idx({0, 3}, {2, 1}));
      },
      {"mstep::gather", "index 3", "out of range [0, 3)", "dim 1"});
}

TEST(DataMovementGatherErrors, NegativeIndexAtRunTime) {
  expect_step_error(
      [] {
        return gather(iota({4}), 0, idx({1, -1}, {2}));
      },
      {"mstep::gather", "index -1", "[0, 4)",
       "negative indices are not wrapped"});
}

// ---- index_select -----------------------------------------------------

TEST(DataMovementIndexSelect, RowsColumnsAndRepeats) {
  Tensor x = iota({3, 2}, DType::i64);  // [[0, 1], [2, 3], [4, 5]]
  Tensor y = index_select(x, 0, idx({2, 0, 2}, {3}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_THAT(y.to_vector<int64_t>(), ElementsAre(4, 5, 0, 1, 4, 5));
  EXPECT_THAT(index_select(x, 1, idx({1}, {1})).to_vector<int64_t>(),
              ElementsAre(1, 3, 5));
  Tensor i32 = from_vector(std::vector<int32_t>{1, 1, 0}, {3});
  EXPECT_THAT(index_select(x, -1, i32).to_vector<int64_t>(),
              ElementsAre(1, 1, 0, 3, 3, 2, 5, 5, 4));
}

TEST(DataMovementIndexSelect, ScalarIndexEmptyIndexAndScalarInput) {
  Tensor x = iota({3, 2});
  Tensor y = index_select(x, 0, idx({1}, {}));  // a 0-d index keeps the dim
  EXPECT_EQ(y.shape(), (Shape{1, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 3));
  EXPECT_EQ(index_select(x, 1, idx({}, {0})).shape(), (Shape{3, 0}));
  Tensor s = index_select(Tensor::scalar(5.0), 0, idx({0}, {1}));
  EXPECT_EQ(s.shape(), (Shape{}));
  EXPECT_EQ(s.item(), 5.0);
}

TEST(DataMovementIndexSelect, NonContiguousAndBool) {
  Tensor t = transpose(iota({3, 2}), 0, 1);  // [[0, 2, 4], [1, 3, 5]]
  EXPECT_THAT(index_select(t, 1, idx({0, 2}, {2})).to_vector<float>(),
              ElementsAre(0, 4, 1, 5));
  Tensor b = from_vector(std::vector<bool>{true, false}, {2, 1});
  EXPECT_THAT(index_select(b, 0, idx({1, 1, 0}, {3})).to_vector<bool>(),
              ElementsAre(false, false, true));
}

TEST(DataMovementIndexSelectErrors, MatrixIndex) {
  std::string msg = error_of([] {
    index_select(iota({3}), 0, idx({0, 1}, {1, 2}));
  });
  EXPECT_THAT(msg, HasSubstr("mstep::index_select"));
  EXPECT_THAT(msg, HasSubstr("must be 1-d (or 0-d), it has 2 dims"));
}

TEST(DataMovementIndexSelectErrors, BoolIndex) {
  std::string msg = error_of([] {
    index_select(iota({3}), 0, from_vector(std::vector<bool>{true}, {1}));
  });
  EXPECT_THAT(msg, HasSubstr("must be an integer tensor, got bool"));
}

TEST(DataMovementIndexSelectErrors, ScalarInputManyIndices) {
  std::string msg = error_of([] {
    index_select(Tensor::scalar(1.0), 0, idx({0, 0}, {2}));
  });
  EXPECT_THAT(msg, HasSubstr("a 0-d input takes exactly one index"));
}

TEST(DataMovementIndexSelectErrors, IndexOutOfRangeAtRunTime) {
  expect_step_error(
      [] {
        return index_select(iota({3, 2}), 0, idx({0, 7, 1}, {3}));
      },
      {"mstep::index_select", "index 7", "element 1", "[0, 3)"});
}

TEST(DataMovementIndexSelectErrors, NegativeIndexAtRunTime) {
  expect_step_error(
      [] {
        return index_select(iota({3, 2}), 1, idx({-2}, {1}));
      },
      {"mstep::index_select", "index -2", "[0, 2)"});
}

// ---- embedding --------------------------------------------------------

TEST(DataMovementEmbedding, RowsForAnyIndexShape) {
  Tensor w = iota({4, 3});
  Tensor y = embedding(idx({3, 0, 1, 1}, {2, 2}), w);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_THAT(y.to_vector<float>(),
              ElementsAre(9, 10, 11, 0, 1, 2, 3, 4, 5, 3, 4, 5));
  Tensor s = embedding(idx({2}, {}), w);
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_THAT(s.to_vector<float>(), ElementsAre(6, 7, 8));
  Tensor i32 = from_vector(std::vector<int32_t>{1}, {1});
  Tensor h = embedding(i32, iota({4, 3}, DType::bf16));
  EXPECT_EQ(h.dtype(), DType::bf16);
  EXPECT_THAT(h.to_vector<float>(), ElementsAre(3, 4, 5));
  EXPECT_EQ(embedding(idx({}, {0, 5}), w).shape(), (Shape{0, 5, 3}));
}

TEST(DataMovementEmbeddingErrors, WeightNotMatrix) {
  std::string msg = error_of([] { embedding(idx({0}, {1}), iota({4})); });
  EXPECT_THAT(msg, HasSubstr("mstep::embedding"));
  EXPECT_THAT(msg, HasSubstr("weight must be 2-d"));
}

TEST(DataMovementEmbeddingErrors, FloatIndices) {
  std::string msg = error_of([] { embedding(iota({2}), iota({4, 3})); });
  EXPECT_THAT(msg, HasSubstr("the indices must be an integer tensor"));
}

TEST(DataMovementEmbeddingErrors, TokenOutOfRangeAtRunTime) {
  expect_step_error(
      [] {
        return embedding(idx({1, 4}, {1, 2}), iota({4, 3}));
      },
      {"index_select", "index 4", "[0, 4)", "embedding"});
}

}  // namespace
}  // namespace mstep
