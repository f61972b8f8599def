// LowerFill.cpp: constant fills (zeros / full(c) fusions, full of a
// runtime 0-d value) lowered to tile programs and run on the simulator.
// Fresh SBUF is NaN-filled and the output buffers start as NaN here, so an
// element the program does not write shows.
#include <cmath>
#include <cstring>
#include <limits>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

/// fusion() -> one output per value: full(constant) of `shape`, dtype dt.
GraphNode fill_fusion(const Shape& shape, DType dt, const std::vector<double>& values) {
  auto body = std::make_shared<TraceGraph>();
  GraphNode f{OpKind::fusion, {}, {}, {}, nullptr};
  for (double v : values) {
    const uint32_t c = static_cast<uint32_t>(body->nodes.size());
    body->nodes.push_back(scalar_constant(v, dt));
    body->nodes.push_back(op(OpKind::full, {c}, TensorType{shape, dt}));
    body->outputs.push_back(ValueRef{c + 1, 0});
    f.results.push_back(TensorType{shape, dt});
  }
  f.body = body;
  return f;
}

/// Runs `node` lowered; its results, NaN before the run.
std::vector<std::shared_ptr<host::HostBuffer>>
run_all(const GraphNode& node, const std::vector<std::shared_ptr<host::HostBuffer>>& in) {
  std::vector<TensorType> types;
  std::vector<const host::HostBuffer*> ptrs;
  for (const auto& b : in) {
    types.push_back(b->type());
    ptrs.push_back(b.get());
  }
  absl::StatusOr<LoweredOp> low = lower_node(node, types);
  EXPECT_TRUE(low.ok()) << low.status();
  if (!low.ok()) return {};
  EXPECT_GT(low->cost.total_ns, 0);
  std::vector<std::shared_ptr<host::HostBuffer>> out;
  std::vector<host::HostBuffer*> outs;
  for (const TensorType& t : node.results) {
    out.push_back(std::make_shared<host::HostBuffer>(t));
    std::memset(out.back()->bytes(), 0xFF, t.bytes());
    outs.push_back(out.back().get());
  }
  Simulator sim;
  const absl::Status s = run_lowered(*low, sim, ptrs, outs);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void expect_all(const host::HostBuffer& b, float want) {
  for (int64_t i = 0; i < b.type().numel(); ++i) {
    ASSERT_EQ(at(b, i), want) << b.type().to_string() << " element " << i;
    ASSERT_EQ(std::signbit(at(b, i)), std::signbit(want)) << "element " << i;
  }
}

// The gradient accumulators' zeros: [16, 64, 192] is 1024 rows, eight
// 128-row stores of one filled tile.
TEST(NeuronFillLowering, ZerosFusion) {
  const auto got = run_all(fill_fusion(Shape({16, 64, 192}), DType::f32, {0.0}), {});
  ASSERT_EQ(got.size(), 1u);
  expect_all(*got[0], 0.0f);
}

// Two outputs, a non-integer value (not an iota integer) and a negative
// zero (0 + -0 would be +0); bf16 stores 0.1 rounded.
TEST(NeuronFillLowering, SeveralValuesAndBf16) {
  const auto got = run_all(fill_fusion(Shape({300, 7}), DType::f32, {0.1, -0.0}), {});
  ASSERT_EQ(got.size(), 2u);
  expect_all(*got[0], 0.1f);
  expect_all(*got[1], -0.0f);
  const auto b = run_all(fill_fusion(Shape({56, 64}), DType::bf16, {0.1}), {});
  ASSERT_EQ(b.size(), 1u);
  expect_all(*b[0], static_cast<float>(BFloat16(0.1f)));
}

// 1-d: 1024 elements as [128, 8]; 1000 (not a multiple of 128) as one row.
TEST(NeuronFillLowering, OneDimensional) {
  expect_all(*run_all(fill_fusion(Shape({1024}), DType::f32, {-3.0}), {})[0], -3.0f);
  expect_all(*run_all(fill_fusion(Shape({1000}), DType::f32, {7.5}), {})[0], 7.5f);
}

// full of a runtime 0-d value: DMA'd onto every partition, spread along
// the row; ragged rows (130) and infinity.
TEST(NeuronFillLowering, FullOfARuntimeValue) {
  const TensorType scalar{Shape({}), DType::f32};
  for (float v : {2.5f, -std::numeric_limits<float>::infinity()}) {
    GraphNode full = op(OpKind::full, {0}, TensorType{Shape({130, 33}), DType::f32});
    const auto got = run_all(full, {buffer(scalar, {v})});
    ASSERT_EQ(got.size(), 1u);
    expect_all(*got[0], v);
  }
}

// What the fill lowering does not take falls back with the reason.
TEST(NeuronFillLowering, Refusals) {
  const GraphNode ints = fill_fusion(Shape({4, 4}), DType::i64, {1.0});
  EXPECT_THAT(refusal(ints, {}), HasSubstr("fusion not tiled"));
  GraphNode mixed = op(OpKind::full, {0}, TensorType{Shape({4}), DType::bf16});
  EXPECT_THAT(refusal(mixed, {TensorType{Shape({}), DType::f32}}),
              HasSubstr("full not tiled: expects one 1-element operand of the result's dtype"));
}

} // namespace
} // namespace mstep::neuron
