// Unit tests for the reshape family: reshape/view/flatten, permute/
// transpose, expand, squeeze/unsqueeze. Hand-checked values, edge cases
// (negative dims, size-0 and size-1 dims, non-contiguous inputs, integer
// and bool dtypes) and one test per error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;
using testing::iota;

TEST(ShapeReshape, InfersMinusOneAndKeepsOrder) {
  Tensor x = iota({2, 3});
  Tensor y = reshape(x, {-1, 2});
  EXPECT_TRUE(y.is_pending());  // recorded, not computed
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_EQ(reshape(x, {6, -1}).shape(), (Shape{6, 1}));
  EXPECT_EQ(reshape(x, {-1}).shape(), (Shape{6}));
}

TEST(ShapeReshape, ScalarAndSizeZero) {
  Tensor s = reshape(Tensor::scalar(4.0), {1, 1});
  EXPECT_EQ(s.shape(), (Shape{1, 1}));
  EXPECT_EQ(reshape(s, {}).item(), 4.0);
  Tensor e = reshape(zeros({0, 3}), {3, 0, 5});
  EXPECT_EQ(e.shape(), (Shape{3, 0, 5}));
  EXPECT_TRUE(e.to_vector<float>().empty());
  EXPECT_EQ(reshape(zeros({2, 0}), {-1, 4}).shape(), (Shape{0, 4}));
}

TEST(ShapeReshape, NonContiguousInputReadsLogicalOrder) {
  // transpose then reshape: the values follow the transposed order.
  Tensor y = reshape(transpose(iota({2, 3}, DType::i64), 0, 1), {6});
  EXPECT_THAT(y.to_vector<int64_t>(), ElementsAre(0, 3, 1, 4, 2, 5));
  Tensor v = view(transpose(iota({2, 3}), -1, -2), {3, 2});
  EXPECT_THAT(v.to_vector<float>(), ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(ShapeReshape, FlattenRanges) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(flatten(x).shape(), (Shape{24}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(flatten(x, 0, -2).shape(), (Shape{6, 4}));
  EXPECT_EQ(flatten(x, -1, -1).shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(flatten(Tensor::scalar(1.0)).shape(), (Shape{1}));
  EXPECT_EQ(flatten(zeros({2, 0, 3}), 1).shape(), (Shape{2, 0}));
  EXPECT_EQ(flatten(x, 1).to_vector<float>()[13], 13.0f);
}

TEST(ShapePermute, ValuesAndNegativeDims) {
  Tensor x = iota({2, 3, 2}, DType::i32);
  Tensor y = permute(x, {2, 0, -2});  // [2, 2, 3]
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  // y[a][b][c] = x[b][c][a] = 6b + 2c + a
  EXPECT_THAT(y.to_vector<int32_t>(),
              ElementsAre(0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11));
  EXPECT_EQ(permute(x, {0, 1, 2}).impl(), x.impl());  // identity: no node
}

TEST(ShapePermute, TransposeBoolAndSizeOne) {
  Tensor b = from_vector(
      std::vector<bool>{true, false, false, true, true, false}, {2, 3});
  Tensor t = transpose(b, 0, -1);
  EXPECT_EQ(t.dtype(), DType::boolean);
  EXPECT_THAT(t.to_vector<bool>(),
              ElementsAre(true, true, false, true, false, false));
  EXPECT_EQ(transpose(iota({1, 4}), 0, 1).shape(), (Shape{4, 1}));
  Tensor s = Tensor::scalar(2.0);
  EXPECT_EQ(transpose(s, 0, -1).impl(), s.impl());
  // Transposing twice is the identity on values.
  EXPECT_THAT(transpose(transpose(iota({2, 2}), 0, 1), 1, 0).to_vector<float>(),
              ElementsAre(0, 1, 2, 3));
}

TEST(ShapeExpand, BroadcastsSizeOneAndNewLeadingDims) {
  Tensor x = from_vector(std::vector<int64_t>{7, 8, 9}, {3, 1});
  Tensor y = expand(x, {2, -1, 2});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_THAT(y.to_vector<int64_t>(),
              ElementsAre(7, 7, 8, 8, 9, 9, 7, 7, 8, 8, 9, 9));
  EXPECT_EQ(expand(x, {3, 1}).impl(), x.impl());
  EXPECT_EQ(expand(iota({1, 2}), {0, 2}).shape(), (Shape{0, 2}));
  EXPECT_EQ(expand(Tensor::scalar(3.0), {2, 2}).to_vector<float>(),
            (std::vector<float>{3, 3, 3, 3}));
}

TEST(ShapeExpand, OfTransposedInput) {
  Tensor t = transpose(iota({3, 1}), 0, 1);  // [1, 3]: 0 1 2
  EXPECT_THAT(expand(t, {2, 3}).to_vector<float>(),
              ElementsAre(0, 1, 2, 0, 1, 2));
}

TEST(ShapeSqueeze, AllOrOneDim) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(squeeze(x).shape(), (Shape{3, 2}));
  EXPECT_EQ(squeeze(x, 0).shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(squeeze(x, -2).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(squeeze(x, 1).impl(), x.impl());  // size 3: a no-op, as PyTorch
  EXPECT_EQ(squeeze(zeros({0, 1})).shape(), (Shape{0}));
  EXPECT_EQ(squeeze(Tensor::scalar(1.0), 0).shape(), (Shape{}));
  EXPECT_THAT(squeeze(x).to_vector<float>(), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(ShapeUnsqueeze, PositionsIncludingNegative) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(unsqueeze(x, 0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(unsqueeze(x, 2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(unsqueeze(x, -3).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(unsqueeze(Tensor::scalar(5.0), 0).shape(), (Shape{1}));
  EXPECT_EQ(x.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3}));
}

// ---- Error messages --------------------------------------------------

TEST(ShapeErrors, ReshapeTwoInferredDims) {
  std::string msg = error_of([] { reshape(iota({2, 3}), {-1, -1}); });
  EXPECT_THAT(msg, HasSubstr("mstep::reshape"));
  EXPECT_THAT(msg, HasSubstr("only one dim may be -1"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3]"));
}

TEST(ShapeErrors, ReshapeNegativeSize) {
  std::string msg = error_of([] { reshape(iota({2, 3}), {-2, 3}); });
  EXPECT_THAT(msg, HasSubstr("invalid size -2"));
}

TEST(ShapeErrors, ReshapeCannotInfer) {
  std::string msg = error_of([] { reshape(iota({2, 3}), {4, -1}); });
  EXPECT_THAT(msg, HasSubstr("cannot infer the -1 dim"));
  EXPECT_THAT(msg, HasSubstr("6 elements"));
}

TEST(ShapeErrors, ReshapeElementCount) {
  std::string msg = error_of([] { view(iota({2, 3}), {4, 2}); });
  EXPECT_THAT(msg, HasSubstr("holds 8 elements, the input has 6"));
}

TEST(ShapeErrors, FlattenStartAfterEnd) {
  std::string msg = error_of([] { flatten(iota({2, 3, 4}), 2, 1); });
  EXPECT_THAT(msg, HasSubstr("mstep::flatten"));
  EXPECT_THAT(msg, HasSubstr("start_dim 2 comes after end_dim 1"));
}

TEST(ShapeErrors, PermuteWrongLength) {
  std::string msg = error_of([] { permute(iota({2, 3}), {0}); });
  EXPECT_THAT(msg, HasSubstr("has 1 dims, the input has 2"));
}

TEST(ShapeErrors, PermuteRepeatedDim) {
  std::string msg = error_of([] { permute(iota({2, 3}), {1, -1}); });
  EXPECT_THAT(msg, HasSubstr("appears twice"));
}

TEST(ShapeErrors, TransposeDimOutOfRange) {
  std::string msg = error_of([] { transpose(iota({2, 3}), 0, 2); });
  EXPECT_THAT(msg, HasSubstr("mstep::transpose"));
  EXPECT_THAT(msg, HasSubstr("dim 2 is out of range [-2, 1]"));
}

TEST(ShapeErrors, ExpandFewerDims) {
  std::string msg = error_of([] { expand(iota({2, 3}), {3}); });
  EXPECT_THAT(msg, HasSubstr("fewer dims than the input"));
}

TEST(ShapeErrors, ExpandNonSingletonDim) {
  std::string msg = error_of([] { expand(iota({2, 3}), {4, 3}); });
  EXPECT_THAT(msg, HasSubstr("dim 0 has size 2 and cannot become 4"));
}

TEST(ShapeErrors, ExpandNewDimMinusOne) {
  std::string msg = error_of([] { expand(iota({3}), {-1, 3}); });
  EXPECT_THAT(msg, HasSubstr("new leading dim needs a size >= 0, got -1"));
}

TEST(ShapeErrors, SqueezeDimOutOfRange) {
  std::string msg = error_of([] { squeeze(iota({1, 3}), 2); });
  EXPECT_THAT(msg, HasSubstr("mstep::squeeze"));
  EXPECT_THAT(msg, HasSubstr("out of range"));
}

TEST(ShapeErrors, UnsqueezeDimOutOfRange) {
  std::string msg = error_of([] { unsqueeze(iota({2, 3}), 4); });
  EXPECT_THAT(msg, HasSubstr("mstep::unsqueeze"));
  EXPECT_THAT(msg, HasSubstr("dim 4 is out of range [-3, 2]"));
}

TEST(ShapeErrors, UndefinedInput) {
  std::string msg = error_of([] { reshape(Tensor(), {1}); });
  EXPECT_THAT(msg, HasSubstr("the input is undefined"));
}

}  // namespace
}  // namespace mstep

namespace mstep {
namespace {

TEST(ShapeErrors, ExpandRejectsNegativeSizesOtherThanMinusOne) {
  try {
    expand(zeros({1}), {-5});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("invalid size -5"));
  }
  try {
    expand(zeros({2}), {-3, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("needs a size >= 0, got -3"));
  }
}

TEST(ShapeErrors, ZeroDimTensorsStillCheckDims) {
  Tensor s = Tensor::scalar(1.0);
  EXPECT_THROW(squeeze(s, 7), Error);
  EXPECT_THROW(transpose(s, 0, 3), Error);
  EXPECT_EQ(squeeze(s, -1).dim(), 0);
  EXPECT_EQ(transpose(s, 0, -1).dim(), 0);
}

}  // namespace
}  // namespace mstep
