// Bool and integer values on the engines (IntegerValues.h): the
// cross-entropy backward's fusions (a keep mask from int64 targets, the
// one-hot gradient by eq / logical_and / where), int64 results as int32
// pairs (negative values: the high word -1), integer sums, and the range
// check that guards fp32's exactness. Expected values are computed here
// from the definitions (PyTorch's nll_loss gradient), not by the code under
// test.
#include <cmath>
#include <limits>

#include "LoweringTestUtil.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

template <typename T> std::shared_ptr<host::HostBuffer> ints(const TensorType& t,
                                                             const std::vector<T>& v) {
  auto b = std::make_shared<host::HostBuffer>(t);
  for (size_t i = 0; i < v.size(); ++i) b->data<T>()[i] = v[i];
  return b;
}

/// fusion(classes i64[C], target i64[N, 1], keep bool[N, 1], count i64[]) =
/// where(eq(classes, target) & keep, -1 / f32(count), 0): nll_loss's mean
/// gradient as the GPT step's graph has it.
GraphNode one_hot_fusion(int64_t n, int64_t c) {
  const TensorType classes{Shape({c}), DType::i64}, target{Shape({n, 1}), DType::i64},
      keep{Shape({n, 1}), DType::boolean}, count{Shape({}), DType::i64},
      hit{Shape({n, c}), DType::boolean}, f{Shape({}), DType::f32}, out{Shape({n, c}), DType::f32};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {classes, target, keep, count};
  for (int64_t i = 0; i < 4; ++i) body->nodes.push_back(param(i, body->input_types[i]));
  body->nodes.push_back(scalar_constant(1, DType::f32));        // %4
  body->nodes.push_back(scalar_constant(0, DType::f32));        // %5
  body->nodes.push_back(op(OpKind::eq, {0, 1}, hit));           // %6
  body->nodes.push_back(op(OpKind::logical_and, {6, 2}, hit));  // %7
  GraphNode full = op(OpKind::full, {4}, f);                    // %8
  full.attrs.push_back({AttrName::shape, AttrValue(IntList{})});
  body->nodes.push_back(full);
  body->nodes.push_back(op(OpKind::neg, {8}, f));               // %9
  GraphNode cast = op(OpKind::cast, {3}, f);                    // %10
  cast.attrs.push_back({AttrName::dtype, AttrValue(int64_t(DType::f32))});
  body->nodes.push_back(cast);
  body->nodes.push_back(op(OpKind::div, {9, 10}, f));           // %11
  GraphNode expand = op(OpKind::expand, {11}, out);             // %12
  expand.attrs.push_back({AttrName::shape, AttrValue(IntList{n, c})});
  body->nodes.push_back(expand);
  GraphNode zero = op(OpKind::full, {5}, f);                    // %13
  zero.attrs.push_back({AttrName::shape, AttrValue(IntList{})});
  body->nodes.push_back(zero);
  body->nodes.push_back(op(OpKind::where, {7, 12, 13}, out));   // %14
  body->outputs = {ValueRef{14, 0}};
  GraphNode fusion = op(OpKind::fusion, {0, 1, 2, 3}, out);
  fusion.body = body;
  return fusion;
}

void check_one_hot(int64_t n, int64_t c, int64_t ignored_every) {
  std::vector<int64_t> classes(c), target(n);
  std::vector<uint8_t> keep(n);
  int64_t count = 0;
  for (int64_t j = 0; j < c; ++j) classes[j] = j;
  for (int64_t i = 0; i < n; ++i) {
    target[i] = ignored_every > 0 && i % ignored_every == 0 ? -100 : (i * 7) % c;
    keep[i] = target[i] != -100;
    count += keep[i];
  }
  const GraphNode node = one_hot_fusion(n, c);
  auto got = run_node(node, {ints<int64_t>({Shape({c}), DType::i64}, classes),
                             ints<int64_t>({Shape({n, 1}), DType::i64}, target),
                             ints<uint8_t>({Shape({n, 1}), DType::boolean}, keep),
                             ints<int64_t>({Shape({}), DType::i64}, {count})});
  ASSERT_TRUE(got);
  const float g = -1.0f / static_cast<float>(count); // -inf when nothing is kept
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const float want = keep[i] && target[i] == j ? g : 0.0f;
      ASSERT_EQ(at(*got, i * c + j), want) << i << "," << j; // bit for bit, no NaN
    }
}

// 1024 rows of 56 classes (gpt_train's): eight 128-row tiles.
TEST(NeuronIntegerValues, CrossEntropyOneHotGradient) { check_one_hot(1024, 56, 5); }
// Every target ignored: count 0, -1/0 = -inf, which the select keeps out
// (a multiply by the 0/1 mask would give NaN).
TEST(NeuronIntegerValues, EveryTargetIgnoredGivesZerosNotNaN) { check_one_hot(200, 9, 1); }

/// fusion(t i64[N]) = (ne(t, -100) as bool, cast to i64): the keep mask.
TEST(NeuronIntegerValues, KeepMaskAsBoolAndInt64) {
  const int64_t n = 300;
  const TensorType t{Shape({n}), DType::i64}, b{Shape({n}), DType::boolean};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {t};
  body->nodes.push_back(param(0, t));
  body->nodes.push_back(scalar_constant(-100, DType::i64));
  body->nodes.push_back(op(OpKind::ne, {0, 1}, b));
  GraphNode cast = op(OpKind::cast, {2}, t);
  cast.attrs.push_back({AttrName::dtype, AttrValue(int64_t(DType::i64))});
  body->nodes.push_back(cast);
  body->outputs = {ValueRef{2, 0}, ValueRef{3, 0}};
  GraphNode f = op(OpKind::fusion, {0}, b);
  f.results = {b, t};
  f.body = body;
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 3 == 0 ? -100 : i - 150;
  absl::StatusOr<Buffers> got = run_lowered_all(f, {ints<int64_t>(t, v)});
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ((*got)[0]->data<uint8_t>()[i], v[i] != -100 ? 1 : 0) << i;
    ASSERT_EQ((*got)[1]->data<int64_t>()[i], v[i] != -100 ? 1 : 0) << i;
  }
}

/// where(mask, x, -7) over int64: negative results, written as int32 pairs
/// (the high word -1), and logical_not.
TEST(NeuronIntegerValues, Int64WhereWithNegativeValues) {
  const int64_t n = 1000;
  const TensorType t{Shape({n}), DType::i64}, b{Shape({n}), DType::boolean};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {b, t};
  body->nodes.push_back(param(0, b));
  body->nodes.push_back(param(1, t));
  body->nodes.push_back(op(OpKind::logical_not, {0}, b));
  body->nodes.push_back(scalar_constant(-7, DType::i64));
  body->nodes.push_back(op(OpKind::where, {2, 1, 3}, t));
  body->outputs = {ValueRef{4, 0}};
  GraphNode f = op(OpKind::fusion, {0, 1}, t);
  f.body = body;
  std::vector<uint8_t> m(n);
  std::vector<int64_t> x(n);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = i % 4 == 0;
    x[i] = (i * 37) % 2001 - 1000;
  }
  auto got = run_node(f, {ints<uint8_t>(b, m), ints<int64_t>(t, x)});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got->data<int64_t>()[i], m[i] ? -7 : x[i]) << i;
}

/// An int64 value beyond 2^24 is an error naming the op (fp32 would not
/// hold it), not a wrong answer.
TEST(NeuronIntegerValues, Int64BeyondTwoTo24IsAnError) {
  const int64_t n = 10;
  const TensorType t{Shape({n}), DType::i64}, b{Shape({n}), DType::boolean};
  GraphNode ne = op(OpKind::ne, {0, 1}, b);
  std::vector<int64_t> x(n, 3), y(n, 3);
  x[4] = (int64_t{1} << 32) + 3; // its low word is 3
  absl::StatusOr<Buffers> got = run_lowered_all(ne, {ints<int64_t>(t, x), ints<int64_t>(t, y)});
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("neuron: ne operand 0"));
  EXPECT_THAT(got.status().message(), HasSubstr("4294967299 at element 4"));
}

GraphNode sum_all(const TensorType& in) {
  GraphNode s = op(OpKind::sum, {0}, {Shape({}), DType::i64});
  s.attrs.push_back({AttrName::dims, AttrValue(IntList{0})});
  return s;
}

TEST(NeuronIntegerValues, SumOfInt64AndOfBool) {
  const int64_t n = 1024;
  const TensorType t{Shape({n}), DType::i64}, b{Shape({n}), DType::boolean};
  std::vector<int64_t> x(n);
  std::vector<uint8_t> m(n);
  int64_t want_x = 0, want_m = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = (i * 13) % 101 - 60;
    m[i] = i % 3 != 0;
    want_x += x[i];
    want_m += m[i];
  }
  auto sx = run_node(sum_all(t), {ints<int64_t>(t, x)});
  auto sm = run_node(sum_all(b), {ints<uint8_t>(b, m)});
  ASSERT_TRUE(sx && sm);
  EXPECT_EQ(sx->data<int64_t>()[0], want_x); // negative: both words
  EXPECT_EQ(sm->data<int64_t>()[0], want_m);
}

// A row sum could leave fp32's exact range: the values are checked against
// 2^24 / (row length).
TEST(NeuronIntegerValues, SumRangeIsChecked) {
  const int64_t n = 1024;
  const TensorType t{Shape({n}), DType::i64};
  std::vector<int64_t> x(n, 1);
  x[9] = 20000; // 20000 * 1024 > 2^24
  absl::StatusOr<Buffers> got = run_lowered_all(sum_all(t), {ints<int64_t>(t, x)});
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("neuron: sum operand 0"));
}

// select: dst = pred ? a : b, and its shapes must agree.
TEST(NeuronIntegerValues, SelectShapesAreValidated) {
  TileBuilder b("select");
  const int32_t s = b.allocate(BufferKind::sbuf, 4096, "s");
  auto at_ = [&](int64_t off, int64_t w) {
    return tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, off, {{w, 1}});
  };
  Instruction sel;
  sel.engine = Engine::vector;
  sel.opcode = Opcode::select;
  sel.dst = at_(0, 64);
  sel.srcs = {at_(64, 64), at_(128, 64), at_(192, 32)};
  b.emit(sel);
  expect_breach(b.program(), "shape", "#0 Vector select", "on_false [128, 32]");
}

} // namespace
} // namespace mstep::neuron
