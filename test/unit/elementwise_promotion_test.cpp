// Unit tests for the elementwise ops: broadcasting (size-1, size-0 and
// 0-d operands), non-contiguous inputs (transpose/permute/expand/slice
// results), type promotion as torch.result_type (0-d tensors and host
// scalars weigh less) and one test per error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::error_of;
using testing::f32;
using ::testing::HasSubstr;
using testing::i64;
using testing::iota;

Tensor boolean(std::vector<bool> v, Shape s) { return from_vector(v, s); }
std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// ---- broadcasting ---------------------------------------------------------

TEST(ElementwiseBroadcast, ThreeDimsWithTwoDims) {
  // a[i][0][k] = 100 i + k, b[j][0] = 10 j: (a + b)[i][j][k] = 100 i + 10 j + k.
  Tensor a = f32({0, 1, 2, 100, 101, 102}, {2, 1, 3});
  Tensor b = f32({0, 10, 20, 30}, {4, 1});
  Tensor s = add(a, b);
  EXPECT_EQ(s.shape(), (Shape{2, 4, 3}));
  std::vector<float> expect;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) expect.push_back(100 * i + 10 * j + k);
  EXPECT_THAT(floats(s), ElementsAreArray(expect));
  EXPECT_EQ(mul(b, a).shape(), (Shape{2, 4, 3}));  // symmetric
  EXPECT_EQ(lt(a, b).shape(), (Shape{2, 4, 3}));
}

TEST(ElementwiseBroadcast, ZeroDimOperands) {
  Tensor x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = Tensor::scalar(10);
  Tensor y = x * s;
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_THAT(floats(y), ElementsAre(10, 20, 30, 40, 50, 60));
  EXPECT_THAT(floats(sub(s, x)), ElementsAre(9, 8, 7, 6, 5, 4));
  Tensor z = add(s, Tensor::scalar(0.5));
  EXPECT_EQ(z.shape(), Shape{});
  EXPECT_EQ(z.item(), 10.5);
  EXPECT_EQ(exp(Tensor::scalar(0)).shape(), Shape{});
  EXPECT_EQ(neg(s).item(), -10);
}

TEST(ElementwiseBroadcast, SizeOneDims) {
  Tensor r = sub(f32({1, 2, 3}, {3, 1}), f32({10}, {1, 1}));
  EXPECT_EQ(r.shape(), (Shape{3, 1}));
  EXPECT_THAT(floats(r), ElementsAre(-9, -8, -7));
  Tensor o = maximum(f32({5}, {1}), f32({1, 7, 3}, {3}));
  EXPECT_EQ(o.shape(), Shape{3});
  EXPECT_THAT(floats(o), ElementsAre(5, 7, 5));
  Tensor outer = mul(f32({1, 2}, {2, 1}), f32({1, 10, 100}, {1, 3}));
  EXPECT_THAT(floats(outer), ElementsAre(1, 10, 100, 2, 20, 200));
}

TEST(ElementwiseBroadcast, SizeZeroDims) {
  Tensor e = add(zeros({0, 3}), f32({1, 2, 3}, {3}));
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_TRUE(floats(e).empty());
  EXPECT_EQ(mul(zeros({0}), f32({2}, {1})).shape(), Shape{0});  // 1 broadcasts to 0
  EXPECT_EQ(div(zeros({2, 0}), ones({2, 1})).shape(), (Shape{2, 0}));
  Tensor c = eq(zeros({0, 2}), zeros({2}));
  EXPECT_EQ(c.shape(), (Shape{0, 2}));
  EXPECT_EQ(c.dtype(), DType::boolean);
  EXPECT_EQ(exp(zeros({3, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ(to(zeros({0}), DType::i32).shape(), Shape{0});
  EXPECT_EQ(where(boolean({}, {0}), zeros({1}), 1.0).shape(), Shape{0});
}

TEST(ElementwiseBroadcast, WhereBroadcastsAllThree) {
  Tensor c = boolean({true, false, true}, {3, 1});
  Tensor a = f32({1, 2, 3, 4}, {1, 4});
  Tensor w = where(c, a, Tensor::scalar(-1));
  EXPECT_EQ(w.shape(), (Shape{3, 4}));
  EXPECT_THAT(floats(w), ElementsAre(1, 2, 3, 4, -1, -1, -1, -1, 1, 2, 3, 4));
  Tensor l = logical_and(boolean({true, false}, {2, 1}), boolean({true, true, false}, {3}));
  EXPECT_EQ(l.shape(), (Shape{2, 3}));
  EXPECT_THAT(l.to_vector<bool>(), ElementsAre(true, true, false, false, false, false));
}

// ---- non-contiguous inputs ------------------------------------------------

TEST(ElementwiseLayout, TransposedAndPermutedInputs) {
  Tensor x = iota({2, 3});       // [[0, 1, 2], [3, 4, 5]]
  Tensor t = transpose(x, 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  Tensor y = add(t, f32({10, 20, 30, 40, 50, 60}, {3, 2}));
  EXPECT_THAT(floats(y), ElementsAre(10, 23, 31, 44, 52, 65));
  EXPECT_THAT(floats(neg(t)), ElementsAre(-0, -3, -1, -4, -2, -5));
  EXPECT_THAT(to(t, DType::i64).to_vector<int64_t>(), ElementsAre(0, 3, 1, 4, 2, 5));
  // Both operands transposed, and a transposed condition.
  EXPECT_THAT(floats(sub(t, t)), ElementsAre(0, 0, 0, 0, 0, 0));
  Tensor cond = transpose(gt(x, 2.5), 0, 1);  // [[F, T], [F, T], [F, T]]
  EXPECT_THAT(floats(where(cond, t, 0.0)), ElementsAre(0, 3, 0, 4, 0, 5));
  Tensor p = permute(iota({2, 3, 4}), {2, 0, 1});  // p[k][i][j] = 12 i + 4 j + k
  Tensor m = maximum(p, f32({12}, {1}));
  EXPECT_EQ(m.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(floats(m).front(), 12);     // p[0][0][0] = 0
  EXPECT_EQ(floats(m).back(), 23);      // p[3][1][2] = 12 + 8 + 3
  EXPECT_EQ(floats(mul(p, 1.0))[1], 4);  // p[0][0][1] = 4
}

TEST(ElementwiseLayout, ExpandedAndSlicedInputs) {
  Tensor e = expand(f32({1, 2}, {2, 1}), {2, 3});  // [[1, 1, 1], [2, 2, 2]]
  Tensor y = mul(e, iota({2, 3}));
  EXPECT_THAT(floats(y), ElementsAre(0, 1, 2, 6, 8, 10));
  EXPECT_THAT(eq(e, 2).to_vector<bool>(), ElementsAre(false, false, false, true, true, true));
  Tensor s = slice(iota({6}), 0, 1, 6, 2);  // [1, 3, 5]
  EXPECT_THAT(floats(pow(s, 2)), ElementsAre(1, 9, 25));
  EXPECT_THAT(floats(sub(10, s)), ElementsAre(9, 7, 5));
}

// ---- type promotion -------------------------------------------------------

TEST(ElementwisePromotion, ZeroDimTensorsWeighLess) {
  Tensor h = to(f32({1, 2}, {2}), DType::f16);
  Tensor r = add(h, Tensor::scalar(0.5, DType::f32));  // f16 + f32 0-d -> f16
  EXPECT_EQ(r.dtype(), DType::f16);
  EXPECT_THAT(floats(r), ElementsAre(1.5, 2.5));
  Tensor i = from_vector(std::vector<int32_t>{1, 2}, {2});
  EXPECT_EQ(add(i, Tensor::scalar(5, DType::i64)).dtype(), DType::i32);
  // A higher category still wins: int + float 0-d is the 0-d's dtype.
  Tensor f = add(i64({1, 2}, {2}), Tensor::scalar(0.25, DType::f64));
  EXPECT_EQ(f.dtype(), DType::f64);
  EXPECT_THAT(floats(f), ElementsAre(1.25, 2.25));
  EXPECT_EQ(add(i, Tensor::scalar(1, DType::f16)).dtype(), DType::f16);
  EXPECT_EQ(add(boolean({true}, {1}), Tensor::scalar(2, DType::i32)).dtype(), DType::i32);
  // Two 0-d tensors promote normally.
  EXPECT_EQ(add(Tensor::scalar(1, DType::f32), Tensor::scalar(1, DType::f64)).dtype(), DType::f64);
}

TEST(ElementwisePromotion, HostScalarsWeighLeast) {
  Tensor l = add(i64({1, 2}, {2}), 2.5);  // i64 + float -> f32 (not f64)
  EXPECT_EQ(l.dtype(), DType::f32);
  EXPECT_THAT(floats(l), ElementsAre(3.5, 4.5));
  Tensor b = add(boolean({true, false}, {2}), 2);  // bool + int -> i64
  EXPECT_EQ(b.dtype(), DType::i64);
  EXPECT_THAT(b.to_vector<int64_t>(), ElementsAre(3, 2));
  Tensor i = from_vector(std::vector<int32_t>{7}, {1});
  EXPECT_EQ(mul(i, 3).dtype(), DType::i32);  // int scalar keeps i32
  EXPECT_EQ(add(to(i, DType::f16), 2.5).dtype(), DType::f16);
  EXPECT_EQ(add(from_vector(std::vector<double>{1}, {1}), 2.5).dtype(), DType::f64);
  EXPECT_EQ(add(Tensor::scalar(1, DType::i32), 2.5).dtype(), DType::f32);  // 0-d + float
  EXPECT_EQ(div(i, 2).dtype(), DType::f32);
  EXPECT_EQ(sub(2.5, i).dtype(), DType::f32);
  EXPECT_EQ(add(boolean({true}, {1}), true).dtype(), DType::boolean);
}

TEST(ElementwisePromotion, DimensionedTensorsPromote) {
  Tensor a = from_vector(std::vector<int32_t>{1, 2}, {2});
  Tensor s = add(a, i64({10, 20}, {2}));
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_THAT(s.to_vector<int64_t>(), ElementsAre(11, 22));
  Tensor bf = ones({2}, DType::bf16);
  EXPECT_EQ(add(bf, ones({2}, DType::f16)).dtype(), DType::f32);  // as PyTorch
  EXPECT_EQ(mul(bf, f32({1, 1}, {2})).dtype(), DType::f32);
  EXPECT_EQ(mul(boolean({true}, {1}), i64({3}, {1})).dtype(), DType::i64);
  EXPECT_EQ(div(a, i64({2, 2}, {2})).dtype(), DType::f32);
  EXPECT_EQ(maximum(i64({1, 5}, {2}), f32({2.5f, 2.5f}, {2})).dtype(), DType::f32);
  EXPECT_EQ(pow(a, f32({2, 2}, {2})).dtype(), DType::f32);
  // Comparisons promote the operands but always give bool.
  Tensor c = lt(i64({1, 3}, {2}), f32({1.5f, 2.5f}, {2}));
  EXPECT_EQ(c.dtype(), DType::boolean);
  EXPECT_THAT(c.to_vector<bool>(), ElementsAre(true, false));
}

// ---- errors ---------------------------------------------------------------

TEST(ElementwiseErrors, UndefinedUnaryInput) {
  for (auto [name, fn] : std::vector<std::pair<std::string, std::function<void()>>>{
           {"exp", [] { exp(Tensor()); }},
           {"relu", [] { relu(Tensor()); }},
           {"isnan", [] { isnan(Tensor()); }},
           {"logical_not", [] { logical_not(Tensor()); }},
           {"to", [] { to(Tensor(), DType::f16); }}}) {
    std::string msg = error_of(fn);
    EXPECT_THAT(msg, HasSubstr("mstep::" + name + ": the input is undefined. Got undefined."));
    EXPECT_THAT(msg, HasSubstr("Pass a defined tensor"));
  }
}

TEST(ElementwiseErrors, UndefinedBinaryOperand) {
  std::string msg = error_of([] { add(Tensor(), f32({1}, {1})); });
  EXPECT_THAT(msg, HasSubstr("mstep::add: an operand is undefined"));
  EXPECT_THAT(msg, HasSubstr("Got undefined and f32[1]"));
  EXPECT_THAT(msg, HasSubstr("Pass a defined tensor"));
  msg = error_of([] { div(Tensor(), 2.5); });
  EXPECT_THAT(msg, HasSubstr("mstep::div: the tensor operand is undefined"));
  EXPECT_THAT(msg, HasSubstr("Got undefined and float scalar 2.5"));
  EXPECT_THAT(msg, HasSubstr("Pass a defined tensor"));
  msg = error_of([] { logical_or(f32({1}, {1}), Tensor()); });
  EXPECT_THAT(msg, HasSubstr("mstep::logical_or: an operand is undefined"));
  EXPECT_THAT(msg, HasSubstr("Got f32[1] and undefined"));
}

TEST(ElementwiseErrors, UndefinedWhereOperand) {
  Tensor c = boolean({true}, {1});
  std::string msg = error_of([&] { where(c, Tensor(), f32({1}, {1})); });
  EXPECT_THAT(msg, HasSubstr("mstep::where: an operand is undefined"));
  EXPECT_THAT(msg, HasSubstr("Got condition bool[1], values undefined and f32[1]"));
  EXPECT_THAT(msg, HasSubstr("Pass a defined tensor"));
  EXPECT_THAT(error_of([&] { where(c, Tensor(), 1); }),
              HasSubstr("Got condition bool[1], values undefined and int scalar 1"));
  EXPECT_THAT(error_of([&] { where(c, true, Tensor()); }),
              HasSubstr("Got condition bool[1], values bool scalar true and undefined"));
}

TEST(ElementwiseErrors, ShapesDoNotBroadcast) {
  std::string msg = error_of([] { add(iota({2, 3}), iota({4})); });
  EXPECT_THAT(msg, HasSubstr("mstep::add: shapes [2, 3] and [4] cannot be broadcast: "
                             "dim -1 has sizes 3 and 4"));
  EXPECT_THAT(msg, HasSubstr("Got f32[2, 3] and f32[4]"));
  EXPECT_THAT(msg, HasSubstr("use unsqueeze() or reshape()"));
  msg = error_of([] { eq(zeros({0}), zeros({2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::eq: shapes [0] and [2] cannot be broadcast"));
  msg = error_of([] { logical_and(zeros({2, 3}), zeros({3, 3})); });
  EXPECT_THAT(msg, HasSubstr("mstep::logical_and: shapes [2, 3] and [3, 3] cannot be "
                             "broadcast: dim -2 has sizes 2 and 3"));
}

TEST(ElementwiseErrors, NegAbsReluOfBool) {
  Tensor b = boolean({true, false}, {2});
  for (const char* op : {"neg", "abs", "relu"}) {
    std::string msg = error_of([&] {
      if (op == std::string("neg")) neg(b);
      if (op == std::string("abs")) abs(b);
      if (op == std::string("relu")) relu(b);
    });
    EXPECT_THAT(msg, HasSubstr(std::string("mstep::") + op +
                               ": is not defined for bool tensors. Got bool[2]."));
  }
  EXPECT_THAT(error_of([&] { -b; }), HasSubstr("Use logical_not() instead."));
  EXPECT_THAT(error_of([&] { relu(b); }), HasSubstr("Convert to a numeric dtype first."));
}

TEST(ElementwiseErrors, SubOfTwoBools) {
  Tensor b = boolean({true, false}, {2});
  std::string msg = error_of([&] { sub(b, b); });
  EXPECT_THAT(msg, HasSubstr("mstep::sub: is not defined for two bool operands"));
  EXPECT_THAT(msg, HasSubstr("Got bool[2] and bool[2]"));
  EXPECT_THAT(msg, HasSubstr("Use ne(a, b) (logical xor) instead."));
  EXPECT_THAT(error_of([&] { b - true; }),
              HasSubstr("two bool operands. Got bool[2] and bool scalar true"));
}

TEST(ElementwiseErrors, SubWithABoolOperand) {
  // PyTorch rejects these even though the result type would be numeric.
  Tensor b = boolean({true, false}, {2});
  std::string msg = error_of([&] { sub(i64({1, 2}, {2}), b); });
  EXPECT_THAT(msg, HasSubstr("mstep::sub: is not defined for a bool operand"));
  EXPECT_THAT(msg, HasSubstr("Got i64[2] and bool[2]"));
  EXPECT_THAT(msg, HasSubstr("To invert a mask use logical_not()"));
  EXPECT_THAT(error_of([&] { b - 1; }), HasSubstr("Got bool[2] and int scalar 1"));
  EXPECT_THAT(error_of([&] { 1 - b; }), HasSubstr("Got int scalar 1 and bool[2]"));
  EXPECT_THAT(error_of([] { sub(zeros({2}), true); }),
              HasSubstr("a bool operand. Got f32[2] and bool scalar true"));
}

TEST(ElementwiseErrors, PowOfBools) {
  Tensor b = boolean({true, false}, {2});
  std::string msg = error_of([&] { pow(b, b); });
  EXPECT_THAT(msg, HasSubstr("mstep::pow: is not defined for bool operands"));
  EXPECT_THAT(msg, HasSubstr("Got bool[2] and bool[2]"));
  EXPECT_THAT(msg, HasSubstr("Convert an operand to a numeric dtype first"));
  EXPECT_THAT(error_of([&] { pow(b, true); }), HasSubstr("Got bool[2] and bool scalar true"));
  EXPECT_THAT(error_of([&] { pow(true, b); }), HasSubstr("Got bool scalar true and bool[2]"));
}

TEST(ElementwiseErrors, PowIntegerToNegativeIntegerScalar) {
  std::string msg = error_of([] { pow(i64({1, 2}, {2}), -1); });
  EXPECT_THAT(msg, HasSubstr("mstep::pow: integers to negative integer powers are not allowed"));
  EXPECT_THAT(msg, HasSubstr("Got i64[2] and int scalar -1"));
  EXPECT_THAT(msg, HasSubstr("Use a floating exponent (e.g. -1.0)"));
  EXPECT_THAT(error_of([] { pow(Tensor::scalar(3, DType::i32), -2); }),
              HasSubstr("Got i32[] and int scalar -2"));
}

TEST(ElementwiseErrors, GeluUnknownApproximate) {
  std::string msg = error_of([] { gelu(zeros({2, 2}), "sigmoid"); });
  EXPECT_THAT(msg, HasSubstr("mstep::gelu: unknown approximate='sigmoid'"));
  EXPECT_THAT(msg, HasSubstr("Got f32[2, 2]"));
  EXPECT_THAT(msg, HasSubstr("Use \"none\" (erf form) or \"tanh\"."));
}

TEST(ElementwiseErrors, WhereConditionNotBool) {
  std::string msg = error_of([] { where(i64({1, 0}, {2}), zeros({2}), ones({2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::where: the condition must be bool"));
  EXPECT_THAT(msg, HasSubstr("Got condition i64[2]"));
  EXPECT_THAT(msg, HasSubstr("convert with .to(DType::boolean)"));
  EXPECT_THAT(error_of([] { where(zeros({2}), zeros({2}), 1.0); }),
              HasSubstr("the condition must be bool. Got condition f32[2]"));
}

TEST(ElementwiseErrors, WhereValuesDoNotBroadcast) {
  Tensor c = boolean({true, false}, {2});
  std::string msg = error_of([&] { where(c, zeros({2}), zeros({3})); });
  EXPECT_THAT(msg, HasSubstr("mstep::where: shapes [2] and [3] cannot be broadcast"));
  EXPECT_THAT(msg, HasSubstr("Got f32[2] and f32[3]"));
  EXPECT_THAT(msg, HasSubstr("Trailing dims must be equal or 1"));
}

TEST(ElementwiseErrors, WhereConditionDoesNotBroadcast) {
  Tensor c = boolean({true, false, true}, {3});
  std::string msg = error_of([&] { where(c, zeros({2}), 0.0); });
  EXPECT_THAT(msg, HasSubstr("mstep::where: shapes [3] and [2] cannot be broadcast"));
  EXPECT_THAT(msg, HasSubstr("Got condition bool[3], values f32[2] and f32[]"));
  EXPECT_THAT(msg, HasSubstr("The condition must broadcast with both values."));
}

}  // namespace
}  // namespace mstep
