// Unit tests for the creation ops: zeros/ones/full (dtype inference from
// the scalar), *_like, arange (int, float, negative and empty ranges),
// rand/randn (range, dtypes, seeding), from_vector for every element type
// and dtype conversion, from_buffer, and one test per error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "mstep/core/HalfTypes.h"
#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::FloatNear;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Lt;
using ::testing::Pointwise;

double mean_of(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

// ---- zeros / ones / full --------------------------------------------------

TEST(Creation, ZerosAndOnes) {
  Tensor z = zeros({2, 3});
  EXPECT_TRUE(z.is_pending());  // a node, not a buffer
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_THAT(z.to_vector<float>(), Each(0.0f));
  Tensor o = ones({4}, DType::i32);
  EXPECT_EQ(o.dtype(), DType::i32);
  EXPECT_THAT(o.to_vector<int32_t>(), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(ones({2}, DType::boolean).to_vector<bool>(), ElementsAre(true, true));
  EXPECT_THAT(zeros({2}, DType::bf16).to_vector<float>(), ElementsAre(0, 0));
  EXPECT_EQ(ones({}).shape(), Shape{});  // 0-d
  EXPECT_EQ(ones({}).item(), 1);
  EXPECT_EQ(zeros({3, 0}).numel(), 0);
  EXPECT_TRUE(zeros({3, 0}).to_vector<float>().empty());
}

TEST(Creation, FullInfersDtypeFromTheScalar) {
  Tensor f = full({2}, 1.5);
  EXPECT_EQ(f.dtype(), DType::f32);  // floating -> f32, not f64
  EXPECT_THAT(f.to_vector<float>(), ElementsAre(1.5, 1.5));
  EXPECT_EQ(full({2}, 2.5f).dtype(), DType::f32);
  Tensor i = full({3}, 7);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_THAT(i.to_vector<int64_t>(), ElementsAre(7, 7, 7));
  Tensor big = full({1}, int64_t{1} << 40);
  EXPECT_EQ(big.dtype(), DType::i64);
  EXPECT_EQ(big.to_vector<int64_t>()[0], int64_t{1} << 40);
  Tensor b = full({2, 1}, true);
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_THAT(b.to_vector<bool>(), ElementsAre(true, true));
}

TEST(Creation, FullWithExplicitDtypeConverts) {
  EXPECT_THAT(full({2}, 1.7, DType::i32).to_vector<int32_t>(), ElementsAre(1, 1));
  EXPECT_THAT(full({2}, -1.7, DType::i64).to_vector<int64_t>(), ElementsAre(-1, -1));
  EXPECT_THAT(full({1}, 0.5, DType::boolean).to_vector<bool>(), ElementsAre(true));
  EXPECT_THAT(full({1}, 3, DType::f64).to_vector<double>(), ElementsAre(3));
  // 1/3 rounds once to bf16.
  EXPECT_THAT(full({1}, 1.0 / 3, DType::bf16).to_vector<float>(), ElementsAre(0.333984375f));
}

TEST(Creation, LikeOpsKeepShapeAndDtype) {
  Tensor x = from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor z = zeros_like(x);
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_EQ(z.dtype(), DType::i64);
  EXPECT_THAT(z.to_vector<int64_t>(), Each(0));
  Tensor o = ones_like(from_vector(std::vector<bool>{false, false}, {2}));
  EXPECT_EQ(o.dtype(), DType::boolean);
  EXPECT_THAT(o.to_vector<bool>(), ElementsAre(true, true));
  Tensor h = full_like(zeros({2}, DType::f16), 2.5);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_THAT(h.to_vector<float>(), ElementsAre(2.5, 2.5));
  // The value converts to the tensor's dtype (as torch.full_like).
  EXPECT_THAT(full_like(x, 2.7).to_vector<int64_t>(), Each(2));
  EXPECT_EQ(zeros_like(Tensor::scalar(3)).shape(), Shape{});
  // A non-contiguous (transposed) input.
  EXPECT_EQ(ones_like(transpose(zeros({2, 3}), 0, 1)).shape(), (Shape{3, 2}));
}

// ---- arange -----------------------------------------------------------------

TEST(Creation, ArangeIntegers) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), DType::i64);
  EXPECT_EQ(a.shape(), Shape{5});
  EXPECT_THAT(a.to_vector<int64_t>(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(arange(2, 11, 3).to_vector<int64_t>(), ElementsAre(2, 5, 8));
  EXPECT_THAT(arange(-3, 0).to_vector<int64_t>(), ElementsAre(-3, -2, -1));
  EXPECT_THAT(arange(5, 0, -2).to_vector<int64_t>(), ElementsAre(5, 3, 1));
  Tensor i = arange(3, DType::i32);
  EXPECT_EQ(i.dtype(), DType::i32);
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(0, 1, 2));
  EXPECT_EQ(arange(4, DType::f32).dtype(), DType::f32);
}

TEST(Creation, ArangeFloats) {
  Tensor a = arange(0.0, 1.0, 0.25);
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_THAT(a.to_vector<float>(), ElementsAre(0, 0.25, 0.5, 0.75));
  // ceil((1 - 0) / 0.3) = 4 elements; ceil(0.3 / 0.1) = 3 despite rounding.
  EXPECT_THAT(arange(0, 1, 0.3).to_vector<float>(),
              Pointwise(FloatNear(1e-7), {0.0f, 0.3f, 0.6f, 0.9f}));
  EXPECT_EQ(arange(0.0, 0.3, 0.1).numel(), 3);
  EXPECT_THAT(arange(0, -1, -0.5).to_vector<float>(), ElementsAre(0, -0.5));
  Tensor e = arange(2.5);  // a float end alone makes it f32
  EXPECT_EQ(e.dtype(), DType::f32);
  EXPECT_THAT(e.to_vector<float>(), ElementsAre(0, 1, 2));
  EXPECT_THAT(arange(0.5, 3, 1, DType::f64).to_vector<double>(), ElementsAre(0.5, 1.5, 2.5));
}

TEST(Creation, ArangeEmptyRange) {
  Tensor e = arange(5, 5);
  EXPECT_EQ(e.shape(), Shape{0});
  EXPECT_EQ(e.dtype(), DType::i64);
  EXPECT_TRUE(e.to_vector<int64_t>().empty());
  EXPECT_EQ(arange(0).shape(), Shape{0});
  EXPECT_EQ(arange(1.5, 1.5, -0.5).shape(), Shape{0});
}

// ---- rand / randn -------------------------------------------------------------

TEST(CreationRandom, RandIsUniformInZeroOne) {
  manual_seed(1);
  Tensor r = rand({100, 100});
  EXPECT_TRUE(r.is_pending());
  EXPECT_EQ(r.dtype(), DType::f32);
  EXPECT_EQ(r.shape(), (Shape{100, 100}));
  std::vector<float> v = r.to_vector<float>();
  EXPECT_THAT(v, Each(Ge(0.0f)));
  EXPECT_THAT(v, Each(Lt(1.0f)));
  EXPECT_NEAR(mean_of(v), 0.5, 0.01);  // std error 0.003
  const auto below = std::count_if(v.begin(), v.end(), [](float x) { return x < 0.25f; });
  EXPECT_NEAR(below / 1e4, 0.25, 0.02);
}

TEST(CreationRandom, RandStaysBelowOneInEveryFloatDtype) {
  // Rounding a value just below 1 to bf16 or f16 would give 1.
  manual_seed(2);
  for (DType d : {DType::bf16, DType::f16, DType::f64}) {
    Tensor r = rand({20000}, d);
    EXPECT_EQ(r.dtype(), d);
    std::vector<float> v = r.to_vector<float>();
    EXPECT_THAT(v, Each(Lt(1.0f))) << dtype_name(d);
    EXPECT_THAT(v, Each(Ge(0.0f))) << dtype_name(d);
    EXPECT_NEAR(mean_of(v), 0.5, 0.01) << dtype_name(d);
  }
}

TEST(CreationRandom, RandnIsStandardNormal) {
  manual_seed(3);
  std::vector<float> v = randn({10000}).to_vector<float>();
  const double m = mean_of(v);
  double var = 0;
  for (float x : v) var += (x - m) * (x - m);
  var /= v.size() - 1;
  EXPECT_NEAR(m, 0, 0.05);
  EXPECT_NEAR(var, 1, 0.05);
  for (DType d : {DType::f64, DType::bf16, DType::f16}) {
    Tensor r = randn({2, 3}, d);
    EXPECT_EQ(r.dtype(), d);
    EXPECT_EQ(r.shape(), (Shape{2, 3}));
  }
}

TEST(CreationRandom, ManualSeedReproducesAndEachCallDiffers) {
  manual_seed(42);
  std::vector<float> a1 = rand({8}).to_vector<float>();
  std::vector<float> a2 = rand({8}).to_vector<float>();
  std::vector<float> n1 = randn({8}).to_vector<float>();
  EXPECT_NE(a1, a2);  // each call draws fresh numbers
  manual_seed(42);
  EXPECT_EQ(rand({8}).to_vector<float>(), a1);
  EXPECT_EQ(rand({8}).to_vector<float>(), a2);
  EXPECT_EQ(randn({8}).to_vector<float>(), n1);
  // Across steps of one compiled graph too.
  manual_seed(7);
  std::vector<std::vector<float>> steps;
  for (int i = 0; i < 2; ++i) {
    Tensor r = rand({4});
    mark_step();
    steps.push_back(r.to_vector<float>());
  }
  EXPECT_NE(steps[0], steps[1]);
  manual_seed(8);
  EXPECT_NE(rand({8}).to_vector<float>(), a1);
}

TEST(CreationRandom, EmptyShape) {
  EXPECT_EQ(rand({0, 4}).numel(), 0);
  EXPECT_TRUE(randn({3, 0}).to_vector<float>().empty());
}

// ---- from_vector / from_buffer ----------------------------------------------

TEST(CreationHost, FromVectorEveryElementType) {
  Tensor f = from_vector(std::vector<float>{1.5f, -2}, {2});
  EXPECT_FALSE(f.is_pending());  // materialized at once
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_THAT(f.to_vector<float>(), ElementsAre(1.5, -2));
  Tensor d = from_vector(std::vector<double>{0.1, 3}, {2, 1});
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.shape(), (Shape{2, 1}));
  EXPECT_THAT(d.to_vector<double>(), ElementsAre(0.1, 3));  // no f32 rounding
  Tensor i = from_vector(std::vector<int32_t>{-7, 2147483647}, {2});
  EXPECT_EQ(i.dtype(), DType::i32);
  EXPECT_THAT(i.to_vector<int32_t>(), ElementsAre(-7, 2147483647));
  Tensor l = from_vector(std::vector<int64_t>{-1, int64_t{1} << 40}, {2});
  EXPECT_EQ(l.dtype(), DType::i64);
  EXPECT_THAT(l.to_vector<int64_t>(), ElementsAre(-1, int64_t{1} << 40));
  Tensor b = from_vector(std::vector<bool>{true, false, true}, {3});
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_THAT(b.to_vector<bool>(), ElementsAre(true, false, true));
  Tensor s = from_vector(std::vector<float>{4}, {});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.item(), 4);
  EXPECT_EQ(from_vector(std::vector<float>{}, {0, 2}).shape(), (Shape{0, 2}));
}

TEST(CreationHost, FromVectorKeepsInt64Exact) {
  // 2^53 + 1 is not a double: converting through double would drop the 1.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor a = from_vector(std::vector<int64_t>{big}, {1});
  Tensor b = from_vector(std::vector<int64_t>{big - 1}, {1});
  EXPECT_EQ(sub(a, b).item(), 1);
  EXPECT_EQ(sub(a, 1).item(), std::pow(2.0, 53));
}

TEST(CreationHost, FromVectorConvertsToTheGivenDtype) {
  Tensor bf = from_vector(std::vector<float>{1.00390625f, 1.01171875f}, {2}, DType::bf16);
  EXPECT_EQ(bf.dtype(), DType::bf16);
  EXPECT_THAT(bf.to_vector<float>(), ElementsAre(1.0, 1.015625));  // ties to even
  Tensor h = from_vector(std::vector<double>{0.1}, {1}, DType::f16);
  EXPECT_EQ(h.to_vector<float>()[0], 0.0999755859375f);
  EXPECT_THAT(from_vector(std::vector<float>{1.7f, -1.7f}, {2}, DType::i32).to_vector<int32_t>(),
              ElementsAre(1, -1));  // truncation toward zero
  EXPECT_THAT(from_vector(std::vector<double>{0.5, 0}, {2}, DType::boolean).to_vector<bool>(),
              ElementsAre(true, false));
  EXPECT_THAT(from_vector(std::vector<int32_t>{3, -4}, {2}, DType::f32).to_vector<float>(),
              ElementsAre(3, -4));
  EXPECT_THAT(from_vector(std::vector<int64_t>{5, 0}, {2}, DType::boolean).to_vector<bool>(),
              ElementsAre(true, false));
  EXPECT_THAT(from_vector(std::vector<int64_t>{-9}, {1}, DType::i32).to_vector<int32_t>(),
              ElementsAre(-9));
  Tensor f = from_vector(std::vector<double>{1.0 + 1e-12}, {1}, DType::f32);
  EXPECT_EQ(f.dtype(), DType::f32);
  EXPECT_EQ(f.to_vector<double>()[0], 1.0);
}

TEST(CreationHost, FromBuffer) {
  const float f[] = {1, 2, 3, 4, 5, 6};
  Tensor t = from_buffer(f, TensorType{Shape{2, 3}, DType::f32});
  EXPECT_FALSE(t.is_pending());
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_THAT(t.to_vector<float>(), ElementsAre(1, 2, 3, 4, 5, 6));
  const int64_t l[] = {-5, int64_t{1} << 60};
  EXPECT_THAT(from_buffer(l, TensorType{Shape{2}, DType::i64}).to_vector<int64_t>(),
              ElementsAre(-5, int64_t{1} << 60));
  const BFloat16 h[] = {BFloat16(1.5f), BFloat16(-0.25f)};  // raw bf16 bits
  EXPECT_THAT(from_buffer(h, TensorType{Shape{2}, DType::bf16}).to_vector<float>(),
              ElementsAre(1.5, -0.25));
  const bool b[] = {true, false};
  EXPECT_THAT(from_buffer(b, TensorType{Shape{2}, DType::boolean}).to_vector<bool>(),
              ElementsAre(true, false));
  // The data is copied: later writes to the host memory do not show.
  float g[] = {7};
  Tensor c = from_buffer(g, TensorType{Shape{}, DType::f32});
  g[0] = 8;
  EXPECT_EQ(c.item(), 7);
  // No bytes: a null pointer is fine.
  EXPECT_EQ(from_buffer(nullptr, TensorType{Shape{0, 3}, DType::f32}).shape(), (Shape{0, 3}));
}

// ---- errors -------------------------------------------------------------------

TEST(CreationErrors, NegativeDimInShape) {
  std::string msg = error_of([] { zeros({2, -1}); });
  EXPECT_THAT(msg, HasSubstr("mstep::zeros: negative dimension -1 at index 1"));
  EXPECT_THAT(msg, HasSubstr("Got shape [2, -1]"));
  EXPECT_THAT(msg, HasSubstr("Every dim must be >= 0."));
  EXPECT_THAT(error_of([] { ones({-2}, DType::i32); }),
              HasSubstr("mstep::ones: negative dimension"));
  EXPECT_THAT(error_of([] { full({-2}, 1.5); }), HasSubstr("mstep::full: negative dimension"));
  EXPECT_THAT(error_of([] { rand({-3}); }), HasSubstr("mstep::rand: negative dimension -3"));
  EXPECT_THAT(error_of([] { randn({1, -2}); }), HasSubstr("mstep::randn: negative dimension"));
  EXPECT_THAT(error_of([] { from_vector(std::vector<float>{}, {-1}); }),
              HasSubstr("mstep::from_vector: negative dimension -1 at index 0"));
  EXPECT_THAT(error_of([] {
                from_buffer(nullptr, TensorType{Shape{-4}, DType::f32});
              }),
              HasSubstr("mstep::from_buffer: negative dimension -4 at index 0"));
}

TEST(CreationErrors, FromVectorWrongDataSize) {
  std::string msg = error_of([] { from_vector(std::vector<float>{1, 2, 3}, {2, 2}); });
  EXPECT_THAT(msg, HasSubstr("mstep::from_vector: the data has 3 elements but the shape "
                             "needs 4"));
  EXPECT_THAT(msg, HasSubstr("Got shape [2, 2] for f32"));
  EXPECT_THAT(msg, HasSubstr("Pass as many values as the shape holds."));
  EXPECT_THAT(error_of([] {
                from_vector(std::vector<int64_t>{1, 2}, {3}, DType::bf16);
              }),
              HasSubstr("the data has 2 elements but the shape needs 3. Got shape [3] for bf16"));
  EXPECT_THAT(error_of([] { from_vector(std::vector<bool>{true}, {0}); }),
              HasSubstr("the data has 1 elements but the shape needs 0. Got shape [0] for bool"));
}

TEST(CreationErrors, FromBufferNull) {
  std::string msg = error_of([] { from_buffer(nullptr, TensorType{Shape{2}, DType::i32}); });
  EXPECT_THAT(msg, HasSubstr("mstep::from_buffer: data is null"));
  EXPECT_THAT(msg, HasSubstr("Got i32[2]"));
  EXPECT_THAT(msg, HasSubstr("Pass a pointer to type.bytes() bytes of host memory."));
}

TEST(CreationErrors, RandomWithNonFloatingDtype) {
  std::string msg = error_of([] { rand({2, 3}, DType::i64); });
  EXPECT_THAT(msg, HasSubstr("mstep::rand: cannot fill i64 with random values"));
  EXPECT_THAT(msg, HasSubstr("Got i64[2, 3]"));
  EXPECT_THAT(msg, HasSubstr("Use a floating dtype (f32, f64, bf16, f16)."));
  EXPECT_THAT(error_of([] { randn({4}, DType::boolean); }),
              HasSubstr("mstep::randn: cannot fill bool with random values. Got bool[4]"));
}

TEST(CreationErrors, ArangeZeroStep) {
  std::string msg = error_of([] { arange(0, 5, 0); });
  EXPECT_THAT(msg, HasSubstr("mstep::arange: step must be nonzero"));
  EXPECT_THAT(msg, HasSubstr("Got start 0, end 5, step 0"));
  EXPECT_THAT(msg, HasSubstr("Use a positive step to count up"));
}

TEST(CreationErrors, ArangeWrongDirection) {
  std::string msg = error_of([] { arange(5, 0, 1); });
  EXPECT_THAT(msg, HasSubstr("mstep::arange: end lies behind start in the direction of step"));
  EXPECT_THAT(msg, HasSubstr("Got start 5, end 0, step 1"));
  EXPECT_THAT(msg, HasSubstr("Use end >= start for a positive step"));
  EXPECT_THAT(error_of([] { arange(0, 3, -1); }), HasSubstr("Got start 0, end 3, step -1"));
  // Less than one step behind is still an error (as PyTorch), not empty.
  EXPECT_THAT(error_of([] { arange(5, 4.5, 1); }), HasSubstr("end lies behind start"));
  EXPECT_THAT(error_of([] { arange(-1); }), HasSubstr("Got start 0, end -1, step 1"));
}

TEST(CreationErrors, ArangeNotFinite) {
  std::string msg = error_of([] { arange(0, INFINITY, 1); });
  EXPECT_THAT(msg, HasSubstr("mstep::arange: start, end and step must be finite"));
  EXPECT_THAT(msg, HasSubstr("Got start 0, end inf, step 1"));
  EXPECT_THAT(msg, HasSubstr("Pass finite bounds and step."));
}

TEST(CreationErrors, LikeOfUndefined) {
  for (auto [name, fn] : std::vector<std::pair<std::string, void (*)()>>{
           {"zeros_like", [] { zeros_like(Tensor()); }},
           {"ones_like", [] { ones_like(Tensor()); }},
           {"full_like", [] { full_like(Tensor(), 1); }}}) {
    std::string msg = error_of(fn);
    EXPECT_THAT(msg, HasSubstr("mstep::" + name + ": the input is undefined. Got undefined."));
    EXPECT_THAT(msg, HasSubstr("Pass a defined tensor"));
  }
}

}  // namespace
}  // namespace mstep
