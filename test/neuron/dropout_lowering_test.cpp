// DropoutLowering.cpp: dropout on the simulated NeuronCore against ref's
// kernel: the same keep mask (the same Philox numbers, the same p
// comparison), values within one rounding of ref's, chunked and ragged
// sizes, bf16, and refusals.
#include <cmath>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

GraphNode dropout_node(const TensorType& t, double p, int64_t offset) {
  GraphNode n = op(OpKind::dropout, {0, 1}, t);
  n.attrs.push_back({AttrName::p, AttrValue(p)});
  n.attrs.push_back({AttrName::offset, AttrValue(offset)});
  return n;
}

std::shared_ptr<host::HostBuffer> rng_state(int64_t seed, int64_t offset) {
  auto b = std::make_shared<host::HostBuffer>(TensorType{Shape({2}), DType::i64});
  b->data<int64_t>()[0] = seed;
  b->data<int64_t>()[1] = offset;
  return b;
}

void check_dropout(const TensorType& t, double p, int64_t seed, int64_t state_offset,
                   int64_t node_offset) {
  SCOPED_TRACE(t.to_string() + " p " + std::to_string(p));
  const GraphNode node = dropout_node(t, p, node_offset);
  // No zeros in x, so a zero in the result is a dropped element.
  std::vector<float> x = random_values(t.numel(), 0.5f, 2.0f, 21);
  for (size_t i = 0; i < x.size(); i += 2) x[i] = -x[i];
  const Buffers in = {buffer(t, x), rng_state(seed, state_offset)};
  absl::StatusOr<Buffers> got = run_lowered_all(node, in), want = run_ref(node, in);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  const double ulp = std::ldexp(1.0, t.dtype == DType::bf16 ? -8 : -24);
  int64_t dropped = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double g = at(*(*got)[0], i), w = at(*(*want)[0], i);
    ASSERT_EQ(g == 0, w == 0) << "mask differs at " << i;
    dropped += w == 0;
    // x * float(1/(1-p)) rounded once vs the double product rounded once.
    ASSERT_NEAR(g, w, 2 * ulp * std::abs(w)) << i;
  }
  const double rate = double(dropped) / double(t.numel());
  if (t.numel() > 10000) EXPECT_NEAR(rate, p, 0.01); // the mask is a real draw
}

TEST(NeuronDropoutLowering, F32SameMaskAsRef) {
  check_dropout(TensorType{Shape({1000}), DType::f32}, 0.1, 42, 7, 0);
}
// 128 * 5000 + 77 elements: [128, 5000] in two chunks plus a 77-element tail;
// a seed and offsets using both 32-bit halves.
TEST(NeuronDropoutLowering, ChunkedWithTailAndLargeCounters) {
  check_dropout(TensorType{Shape({128 * 5000 + 77}), DType::f32}, 0.3, int64_t{0x7123456789abcdef},
                (int64_t{3} << 32) + 5, 123456789);
}
TEST(NeuronDropoutLowering, Bf16) {
  check_dropout(TensorType{Shape({3, 333}), DType::bf16}, 0.5, 1, 0, 1000);
}
TEST(NeuronDropoutLowering, PZeroKeepsEverything) {
  check_dropout(TensorType{Shape({300}), DType::f32}, 0.0, 3, 0, 0);
}

TEST(NeuronDropoutLowering, NanStaysNanWhereDropped) {
  const TensorType t{Shape({256}), DType::f32};
  const GraphNode node = dropout_node(t, 0.5, 0);
  const Buffers in = {buffer(t, std::vector<float>(256, std::nanf(""))), rng_state(5, 0)};
  absl::StatusOr<Buffers> got = run_lowered_all(node, in);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t i = 0; i < 256; ++i) ASSERT_TRUE(std::isnan(at(*(*got)[0], i))) << i;
}

TEST(NeuronDropoutLowering, Refusals) {
  const TensorType state{Shape({2}), DType::i64};
  const TensorType f64{Shape({8}), DType::f64};
  EXPECT_THAT(refusal(dropout_node(f64, 0.5, 0), {f64, state}), HasSubstr("only f32/bf16"));
  const TensorType x{Shape({8}), DType::f32};
  EXPECT_THAT(refusal(dropout_node(x, 0.5, 0), {x, TensorType{Shape({3}), DType::i64}}),
              HasSubstr("is not i64 [2]"));
  EXPECT_THAT(refusal(dropout_node(x, 1.0, 0), {x, state}), HasSubstr("is not in [0, 1)"));
}

} // namespace
} // namespace mstep::neuron
