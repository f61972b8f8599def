// arange by GpSimd iota and rand by philox_uniform (CreationLowering.h),
// against the definitions: arange's start + i * step, and rand's
// Philox::uniform at counter state offset + node offset + i (ref's numbers);
// int64 results as int32 pairs; the refusals.
#include "LoweringTestUtil.h"
#include "mstep/core/Philox.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

GraphNode arange_node(double start, double step, int64_t n, DType dt) {
  GraphNode a{OpKind::arange, {}, {}, {TensorType{Shape({n}), dt}}, nullptr};
  a.attrs.push_back({AttrName::start, AttrValue(start)});
  a.attrs.push_back({AttrName::step, AttrValue(step)});
  return a;
}

// 300 elements: a [128, 2] view and a 44-element tail; negative values
// need the high word -1.
TEST(NeuronCreationLowering, ArangeInt64) {
  auto got = run_node(arange_node(-40, 3, 300, DType::i64), {});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < 300; ++i) ASSERT_EQ(got->data<int64_t>()[i], -40 + 3 * i) << i;
}

TEST(NeuronCreationLowering, ArangeF32AndInt32Descending) {
  auto f = run_node(arange_node(1000, -7, 200, DType::f32), {});
  auto i = run_node(arange_node(1000, -7, 200, DType::i32), {});
  ASSERT_TRUE(f && i);
  for (int64_t k = 0; k < 200; ++k) {
    ASSERT_EQ(f->data<float>()[k], static_cast<float>(1000 - 7 * k)) << k;
    ASSERT_EQ(i->data<int32_t>()[k], 1000 - 7 * k) << k;
  }
}

// bf16 keeps 8 bits: 257 rounds to 256 (to even), as ref's cast.
TEST(NeuronCreationLowering, ArangeBf16Rounds) {
  auto got = run_node(arange_node(250, 1, 20, DType::bf16), {});
  ASSERT_TRUE(got);
  for (int64_t k = 0; k < 20; ++k)
    ASSERT_EQ(at(*got, k), static_cast<float>(BFloat16(static_cast<float>(250 + k)))) << k;
}

TEST(NeuronCreationLowering, ArangeRefusals) {
  EXPECT_THAT(refusal(arange_node(0.5, 0.3, 10, DType::f32), {}),
              HasSubstr("arange not tiled: start 0.5, step 0.3 over 10 elements"));
  EXPECT_THAT(refusal(arange_node(0, 1 << 20, 100, DType::i64), {}),
              HasSubstr("exact for whole values within 2^24"));
  EXPECT_THAT(refusal(arange_node(0, 1, 10, DType::f64), {}), HasSubstr("only f32, bf16, i32"));
}

GraphNode random_node(OpKind kind, int64_t n, DType dt, int64_t offset) {
  GraphNode r = op(kind, {0}, {Shape({n}), dt});
  r.attrs.push_back({AttrName::offset, AttrValue(offset)});
  return r;
}

// Ref's numbers: u = Philox::uniform(seed, state offset + node offset, i).
TEST(NeuronCreationLowering, RandF32IsRefsPhilox) {
  const int64_t n = 128 * 9 + 5;
  auto state = std::make_shared<host::HostBuffer>(TensorType{Shape({2}), DType::i64});
  state->data<int64_t>()[0] = 0x123456789abcdefLL; // seed: both words matter
  state->data<int64_t>()[1] = 77;
  auto got = run_node(random_node(OpKind::rand, n, DType::f32, 1000), {state});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got->data<float>()[i], Philox::uniform(0x123456789abcdefULL, 77 + 1000, i)) << i;
}

// Box-Muller in fp32 step by step, as Philox::normal: ref's bits.
TEST(NeuronCreationLowering, RandnF32IsRefsPhilox) {
  const int64_t n = 128 * 5 + 9;
  auto state = std::make_shared<host::HostBuffer>(TensorType{Shape({2}), DType::i64});
  state->data<int64_t>()[0] = 42;
  state->data<int64_t>()[1] = 3;
  auto got = run_node(random_node(OpKind::randn, n, DType::f32, 10), {state});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got->data<float>()[i], Philox::normal(42, 3 + 10, i)) << i;
}

TEST(NeuronCreationLowering, RandRefusals) {
  const std::vector<TensorType> state{{Shape({2}), DType::i64}};
  EXPECT_THAT(refusal(random_node(OpKind::rand, 10, DType::bf16, 0), state), HasSubstr("only f32"));
  EXPECT_THAT(refusal(random_node(OpKind::randn, 10, DType::bf16, 0), state),
              HasSubstr("only f32"));
}

} // namespace
} // namespace mstep::neuron
