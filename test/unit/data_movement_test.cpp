// Unit tests for the data-movement ops: slice, cat, stack, chunk, pad,
// triu/tril. Hand-checked values and edge cases (Python slice clamping,
// negative dims, size-0 dims, non-contiguous inputs, dtype promotion,
// integer and bool dtypes) and one test per error message. The indexing
// ops are in indexing_test.cpp.
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

// ---- slice ------------------------------------------------------------

TEST(DataMovementSlice, StartEndStep) {
  Tensor x = iota({10}, DType::i64);
  Tensor y = slice(x, 0, 2, 8, 3);
  EXPECT_TRUE(y.is_pending());  // recorded, not computed
  EXPECT_THAT(y.to_vector<int64_t>(), ElementsAre(2, 5));
  EXPECT_THAT(slice(x, 0, 7).to_vector<int64_t>(), ElementsAre(7, 8, 9));
  EXPECT_THAT(slice(x, 0, 1, 3).to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_EQ(slice(x, 0).impl(), x.impl());  // the whole dim: no node
}

TEST(DataMovementSlice, PythonClampingAndNegativeBounds) {
  Tensor x = iota({10}, DType::i64);
  EXPECT_THAT(slice(x, 0, -3).to_vector<int64_t>(), ElementsAre(7, 8, 9));
  EXPECT_THAT(slice(x, -1, -4, -1).to_vector<int64_t>(), ElementsAre(6, 7, 8));
  EXPECT_THAT(slice(x, 0, -100, 100, 4).to_vector<int64_t>(),
              ElementsAre(0, 4, 8));
  EXPECT_EQ(slice(x, 0, 7, 3).shape(), (Shape{0}));    // end < start
  EXPECT_EQ(slice(x, 0, 20, 30).shape(), (Shape{0}));  // past the end
  EXPECT_EQ(slice(x, 0, -20, -15).shape(), (Shape{0}));
  EXPECT_THAT(slice(x, 0, 8, kSliceEnd, 5).to_vector<int64_t>(),
              ElementsAre(8));
  EXPECT_THAT(slice(x, 0, 3, kSliceEnd, kSliceEnd).to_vector<int64_t>(),
              ElementsAre(3));
}

TEST(DataMovementSlice, InnerDimNegativeDimAndSizeZero) {
  Tensor m = iota({3, 4});
  Tensor y = slice(m, -1, 1, 3);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, 2, 5, 6, 9, 10));
  EXPECT_THAT(slice(m, 0, 1, kSliceEnd, 2).to_vector<float>(),
              ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(slice(zeros({0, 3}), 1, 1).shape(), (Shape{0, 2}));
  EXPECT_EQ(slice(zeros({4, 3}), 0, 2, 2).shape(), (Shape{0, 3}));
}

TEST(DataMovementSlice, NonContiguousBoolAndBf16) {
  Tensor t = transpose(iota({3, 4}), 0, 1);  // t[i][j] = 4j + i
  EXPECT_THAT(slice(t, 0, 1, 4, 2).to_vector<float>(),
              ElementsAre(1, 5, 9, 3, 7, 11));
  Tensor b = from_vector(std::vector<bool>{true, false, true, true}, {4});
  EXPECT_THAT(slice(b, 0, 1, kSliceEnd, 2).to_vector<bool>(),
              ElementsAre(false, true));
  Tensor h = from_vector(std::vector<float>{0.5, 1.5, 2.5}, {3}, DType::bf16);
  Tensor hs = slice(h, 0, 1);
  EXPECT_EQ(hs.dtype(), DType::bf16);
  EXPECT_THAT(hs.to_vector<float>(), ElementsAre(1.5, 2.5));
}

TEST(DataMovementSliceErrors, ZeroStep) {
  std::string msg = error_of([] { slice(iota({4}), 0, 0, 4, 0); });
  EXPECT_THAT(msg, HasSubstr("mstep::slice"));
  EXPECT_THAT(msg, HasSubstr("step must be positive, got 0"));
  EXPECT_THAT(msg, HasSubstr("f32[4]"));
}

TEST(DataMovementSliceErrors, NegativeStep) {
  std::string msg = error_of([] { slice(iota({4}), 0, 3, 0, -1); });
  EXPECT_THAT(msg, HasSubstr("step must be positive, got -1"));
}

TEST(DataMovementSliceErrors, ZeroDimInput) {
  std::string msg = error_of([] { slice(Tensor::scalar(1.0), 0); });
  EXPECT_THAT(msg, HasSubstr("cannot slice a 0-d tensor"));
}

TEST(DataMovementSliceErrors, DimOutOfRange) {
  std::string msg = error_of([] { slice(iota({2, 3}), -3, 0, 1); });
  EXPECT_THAT(msg, HasSubstr("dim -3 is out of range [-2, 1]"));
}

// ---- cat / stack / chunk ---------------------------------------------

TEST(DataMovementCat, AlongEachDim) {
  Tensor a = iota({2, 2});
  Tensor b = from_vector(std::vector<float>{10, 11}, {2, 1});
  Tensor y = cat({a, b}, 1);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(0, 1, 10, 2, 3, 11));
  EXPECT_THAT(cat({a, b}, -1).to_vector<float>(),
              ElementsAre(0, 1, 10, 2, 3, 11));
  EXPECT_THAT(cat({a, a}, 0).to_vector<float>(),
              ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));
  EXPECT_EQ(cat({a}, 1).impl(), a.impl());
}

TEST(DataMovementCat, SizeZeroPiecesAndNonContiguous) {
  Tensor a = iota({2, 2});
  Tensor b = from_vector(std::vector<float>{10, 11}, {2, 1});
  EXPECT_THAT(cat({zeros({2, 0}), a, zeros({2, 0}), b}, 1).to_vector<float>(),
              ElementsAre(0, 1, 10, 2, 3, 11));
  EXPECT_EQ(cat({zeros({0, 3}), zeros({0, 3})}, 0).shape(), (Shape{0, 3}));
  EXPECT_THAT(cat({transpose(a, 0, 1), a}, 0).to_vector<float>(),
              ElementsAre(0, 2, 1, 3, 0, 1, 2, 3));
  Tensor e = expand(from_vector(std::vector<int64_t>{4}, {1, 1}), {2, 2});
  EXPECT_THAT(cat({e, iota({2, 1}, DType::i64)}, 1).to_vector<int64_t>(),
              ElementsAre(4, 4, 0, 4, 4, 1));
}

TEST(DataMovementCat, PromotesDtypes) {
  Tensor b = from_vector(std::vector<bool>{true, false}, {2});
  Tensor i = from_vector(std::vector<int32_t>{3, 4}, {2});
  Tensor y = cat({b, i});
  EXPECT_EQ(y.dtype(), DType::i32);
  EXPECT_THAT(y.to_vector<int32_t>(), ElementsAre(1, 0, 3, 4));
  Tensor h = from_vector(std::vector<float>{0.5}, {1}, DType::f16);
  Tensor g = from_vector(std::vector<float>{1.5}, {1}, DType::bf16);
  Tensor f = cat({h, g});
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_THAT(f.to_vector<float>(), ElementsAre(0.5, 1.5));
  EXPECT_EQ(cat({b, b}).dtype(), DType::boolean);
}

TEST(DataMovementCatErrors, EmptyList) {
  std::string msg = error_of([] { cat(std::vector<Tensor>{}); });
  EXPECT_THAT(msg, HasSubstr("mstep::cat"));
  EXPECT_THAT(msg, HasSubstr("non-empty list"));
}

TEST(DataMovementCatErrors, UndefinedTensor) {
  std::string msg = error_of([] { cat({iota({2}), Tensor()}); });
  EXPECT_THAT(msg, HasSubstr("tensor 1 of the list is undefined"));
}

TEST(DataMovementCatErrors, RankMismatch) {
  std::string msg = error_of([] { cat({iota({2, 2}), iota({2})}); });
  EXPECT_THAT(msg, HasSubstr("tensor 1 has 1 dims but tensor 0 has 2"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 2], f32[2]"));
}

TEST(DataMovementCatErrors, ZeroDimTensor) {
  std::string msg = error_of([] { cat({Tensor::scalar(1.0)}); });
  EXPECT_THAT(msg, HasSubstr("tensor 0 is 0-d"));
  EXPECT_THAT(msg, HasSubstr("stack()"));
}

TEST(DataMovementCatErrors, SizeMismatch) {
  std::string msg = error_of([] { cat({iota({2, 3}), iota({2, 4})}, 0); });
  EXPECT_THAT(msg, HasSubstr("sizes must match except in dim 0"));
  EXPECT_THAT(msg, HasSubstr("tensor 1 has size 4 in dim 1"));
}

TEST(DataMovementCatErrors, DimOutOfRange) {
  std::string msg = error_of([] { cat({iota({2}), iota({2})}, 1); });
  EXPECT_THAT(msg, HasSubstr("dim 1 is out of range [-1, 0]"));
}

TEST(DataMovementStack, NewDimAnywhere) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor b = from_vector(std::vector<float>{4, 5, 6}, {3});
  Tensor y = stack({a, b});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(stack({a, b}, 1).to_vector<float>(),
              ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_EQ(stack({a, b}, -1).shape(), (Shape{3, 2}));
  EXPECT_EQ(stack({iota({2, 0}), iota({2, 0})}, 1).shape(), (Shape{2, 2, 0}));
}

TEST(DataMovementStack, ScalarsAndPromotion) {
  Tensor y = stack({Tensor::scalar(1, DType::i64), Tensor::scalar(2.5)});
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(1, 2.5));
}

TEST(DataMovementStackErrors, ShapeMismatch) {
  std::string msg = error_of([] { stack({iota({2}), iota({3})}); });
  EXPECT_THAT(msg, HasSubstr("mstep::stack"));
  EXPECT_THAT(msg, HasSubstr("tensor 1 is [3] and tensor 0 is [2]"));
}

TEST(DataMovementStackErrors, EmptyList) {
  std::string msg = error_of([] { stack(std::vector<Tensor>{}); });
  EXPECT_THAT(msg, HasSubstr("mstep::stack: expects a non-empty list"));
}

TEST(DataMovementStackErrors, DimOutOfRange) {
  std::string msg = error_of([] { stack({iota({2}), iota({2})}, 2); });
  EXPECT_THAT(msg, HasSubstr("dim 2 is out of range [-2, 1]"));
}

TEST(DataMovementChunk, TorchChunkSizes) {
  std::vector<Tensor> p = chunk(iota({5}, DType::i64), 4);
  ASSERT_EQ(p.size(), 3u);  // ceil(5 / 4) = 2 per piece
  EXPECT_THAT(p[0].to_vector<int64_t>(), ElementsAre(0, 1));
  EXPECT_THAT(p[1].to_vector<int64_t>(), ElementsAre(2, 3));
  EXPECT_THAT(p[2].to_vector<int64_t>(), ElementsAre(4));
  EXPECT_EQ(chunk(iota({6}), 4).size(), 3u);
  EXPECT_EQ(chunk(iota({3}), 5).size(), 3u);
  std::vector<Tensor> one = chunk(iota({6}), 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].shape(), (Shape{6}));
}

TEST(DataMovementChunk, NegativeDimAndEmptyDim) {
  std::vector<Tensor> p = chunk(iota({2, 5}), 2, -1);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].shape(), (Shape{2, 3}));
  EXPECT_THAT(p[0].to_vector<float>(), ElementsAre(0, 1, 2, 5, 6, 7));
  EXPECT_THAT(p[1].to_vector<float>(), ElementsAre(3, 4, 8, 9));
  std::vector<Tensor> e = chunk(zeros({0, 2}), 3);
  ASSERT_EQ(e.size(), 3u);  // as torch.chunk: `chunks` empty pieces
  for (const Tensor& t : e) EXPECT_EQ(t.shape(), (Shape{0, 2}));
}

TEST(DataMovementChunkErrors, NonPositiveChunks) {
  std::string msg = error_of([] { chunk(iota({4}), 0); });
  EXPECT_THAT(msg, HasSubstr("mstep::chunk"));
  EXPECT_THAT(msg, HasSubstr("chunks must be positive, got 0"));
}

TEST(DataMovementChunkErrors, ZeroDimInput) {
  std::string msg = error_of([] { chunk(Tensor::scalar(1.0), 1); });
  EXPECT_THAT(msg, HasSubstr("expects at least a 1-d tensor"));
}

// ---- pad --------------------------------------------------------------

TEST(DataMovementPad, ConstantBeforeAndAfter) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor y = pad(x, {1, 2}, 9);
  EXPECT_TRUE(y.is_pending());
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(9, 1, 2, 3, 9, 9));
  // Last dim: (1, 0); dim 0: (0, 1).
  Tensor m = pad(iota({2, 2}), {1, 0, 0, 1});
  EXPECT_EQ(m.shape(), (Shape{3, 3}));
  EXPECT_THAT(m.to_vector<float>(), ElementsAre(0, 0, 1, 0, 2, 3, 0, 0, 0));
  EXPECT_EQ(pad(x, {0, 0}).impl(), x.impl());
  EXPECT_EQ(pad(x, {}).impl(), x.impl());
}

TEST(DataMovementPad, NegativePadsCrop) {
  Tensor x = iota({5}, DType::i64);
  EXPECT_THAT(pad(x, {-1, -2}).to_vector<int64_t>(), ElementsAre(1, 2));
  EXPECT_THAT(pad(x, {-2, 1}, -1).to_vector<int64_t>(),
              ElementsAre(2, 3, 4, -1));
  EXPECT_EQ(pad(x, {-2, -3}).shape(), (Shape{0}));
  Tensor m = pad(iota({3, 3}), {-1, 1, 1, -2}, 7);  // [2, 3]
  EXPECT_THAT(m.to_vector<float>(), ElementsAre(7, 7, 7, 1, 2, 7));
}

TEST(DataMovementPad, IntegerBoolSizeZeroNonContiguous) {
  // As F.pad, the value converts to the tensor's dtype (1.7 -> 1).
  Tensor i = from_vector(std::vector<int32_t>{5, 6}, {2});
  EXPECT_THAT(pad(i, {1, 1}, 1.7).to_vector<int32_t>(),
              ElementsAre(1, 5, 6, 1));
  Tensor b = from_vector(std::vector<bool>{true}, {1});
  EXPECT_THAT(pad(b, {0, 2}).to_vector<bool>(),
              ElementsAre(true, false, false));
  EXPECT_THAT(pad(b, {1, 0}, 1).to_vector<bool>(), ElementsAre(true, true));
  EXPECT_EQ(pad(zeros({0, 2}), {1, 1}).shape(), (Shape{0, 4}));
  EXPECT_THAT(pad(zeros({2, 0}), {1, 0}, 5).to_vector<float>(),
              ElementsAre(5, 5));
  Tensor t = transpose(iota({2, 2}), 0, 1);  // [[0, 2], [1, 3]]
  EXPECT_THAT(pad(t, {0, 1}).to_vector<float>(), ElementsAre(0, 2, 0, 1, 3, 0));
}

TEST(DataMovementPad, ValueIsAHostConstant) {
  // Same structure, another value: the cache reports a constants-only
  // recompile instead of treating it as a new graph. Fresh values on each
  // run keep the test valid under --gtest_repeat.
  static double fresh = 100;
  fresh += 2;
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor a = pad(x, {1, 0}, fresh);
  mark_step();
  reset_metrics();
  Tensor b = pad(x, {1, 0}, fresh + 1);
  mark_step();
  EXPECT_EQ(metrics().cache_misses, 1);
  EXPECT_EQ(metrics().constant_recompiles, 1);
  EXPECT_THAT(a.to_vector<float>(), ElementsAre(fresh, 1, 2));
  EXPECT_THAT(b.to_vector<float>(), ElementsAre(fresh + 1, 1, 2));
}

TEST(DataMovementPadErrors, OddNumberOfPads) {
  std::string msg = error_of([] { pad(iota({3}), {1}); });
  EXPECT_THAT(msg, HasSubstr("mstep::pad"));
  EXPECT_THAT(msg, HasSubstr("(before, after) pairs"));
  EXPECT_THAT(msg, HasSubstr("f32[3] with pads [1]"));
}

TEST(DataMovementPadErrors, TooManyPads) {
  std::string msg = error_of([] { pad(iota({3}), {1, 1, 1, 1}); });
  EXPECT_THAT(msg, HasSubstr("pads covers 2 dims but the input has only 1"));
}

TEST(DataMovementPadErrors, NegativeResultSize) {
  std::string msg = error_of([] { pad(iota({2, 3}), {-2, -2}); });
  EXPECT_THAT(msg, HasSubstr("dim 1 of size 3 padded by (-2, -2) would have "
                             "negative size -1"));
}

// ---- triu / tril ------------------------------------------------------

TEST(DataMovementTriangle, DiagonalOffsets) {
  Tensor m = iota({3, 3});
  EXPECT_THAT(triu(m).to_vector<float>(),
              ElementsAre(0, 1, 2, 0, 4, 5, 0, 0, 8));
  EXPECT_THAT(triu(m, 1).to_vector<float>(),
              ElementsAre(0, 1, 2, 0, 0, 5, 0, 0, 0));
  EXPECT_THAT(triu(m, -1).to_vector<float>(),
              ElementsAre(0, 1, 2, 3, 4, 5, 0, 7, 8));
  EXPECT_THAT(tril(m).to_vector<float>(),
              ElementsAre(0, 0, 0, 3, 4, 0, 6, 7, 8));
  EXPECT_THAT(tril(m, -1).to_vector<float>(),
              ElementsAre(0, 0, 0, 3, 0, 0, 6, 7, 0));
  EXPECT_THAT(tril(m, 5).to_vector<float>(),
              ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8));
  EXPECT_THAT(triu(m, 3).to_vector<float>(), ::testing::Each(0.0f));
}

TEST(DataMovementTriangle, BatchedNonSquareAndDtypes) {
  EXPECT_THAT(triu(iota({2, 3}, DType::i64)).to_vector<int64_t>(),
              ElementsAre(0, 1, 2, 0, 4, 5));
  EXPECT_THAT(tril(iota({2, 3}, DType::i32)).to_vector<int32_t>(),
              ElementsAre(0, 0, 0, 3, 4, 0));
  EXPECT_THAT(tril(iota({2, 2, 2})).to_vector<float>(),
              ElementsAre(0, 0, 2, 3, 4, 0, 6, 7));
  Tensor b = from_vector(std::vector<bool>{true, true, true, true}, {2, 2});
  EXPECT_THAT(triu(b).to_vector<bool>(), ElementsAre(true, true, false, true));
  EXPECT_EQ(tril(zeros({2, 0, 3})).shape(), (Shape{2, 0, 3}));
  Tensor t = transpose(iota({2, 2}, DType::bf16), 0, 1);  // [[0, 2], [1, 3]]
  EXPECT_THAT(triu(t).to_vector<float>(), ElementsAre(0, 2, 0, 3));
}

TEST(DataMovementTriangleErrors, VectorInput) {
  std::string msg = error_of([] { triu(iota({3})); });
  EXPECT_THAT(msg, HasSubstr("mstep::triu"));
  EXPECT_THAT(msg, HasSubstr("at least 2 dims"));
  EXPECT_THAT(msg, HasSubstr("f32[3]"));
}

TEST(DataMovementTriangleErrors, ScalarInput) {
  std::string msg = error_of([] { tril(Tensor::scalar(1.0)); });
  EXPECT_THAT(msg, HasSubstr("mstep::tril"));
  EXPECT_THAT(msg, HasSubstr("at least 2 dims"));
}

}  // namespace
}  // namespace mstep
