// gelu (the erf and the tanh forms) and erf as Scalar-engine activations
// (nl.gelu, nl.gelu_apprx_tanh, nl.erf), lowered and run on the simulator,
// against the functions in double precision. The model evaluates ref's
// formulas in fp32 with libm's erff/tanhf (TileInstruction.h), so the
// tolerance is that evaluation's error bound, not a measured one: with u
// = 2^-24, the argument's rounding moves erf or tanh by at most 0.5 u
// (|t f'(t)| < 0.5 for both), erff/tanhf are within 2 ulp (2 u), 1 + erf
// rounds by u, and the two products by u each relative: |err| <= 2^-22
// (|x| + |y|). A bf16 result adds its own rounding, 2^-8 |y|.
#include <cmath>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using namespace mstep::neuron::testing;

double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

void check_unary(OpKind kind, int64_t approximate, DType dt, double (*f)(double)) {
  const int64_t n = 128 * 40 + 77; // a [128, 40] view and a tail partition
  const TensorType t{Shape({n}), dt};
  GraphNode node = op(kind, {0}, t);
  if (kind == OpKind::gelu) node.attrs.push_back({AttrName::approximate, AttrValue(approximate)});
  auto x = buffer(t, random_values(n, -6, 6, 7));
  auto got = run_node(node, {x});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < n; ++i) {
    const double xi = at(*x, i), want = f(xi);
    const double tol = std::ldexp(std::abs(xi) + std::abs(want), -22) +
                       (dt == DType::bf16 ? std::ldexp(std::abs(want), -8) : 0);
    ASSERT_NEAR(at(*got, i), want, tol) << "x = " << xi;
  }
}

TEST(NeuronGeluLowering, ErfFormF32) { check_unary(OpKind::gelu, 0, DType::f32, gelu_erf); }
TEST(NeuronGeluLowering, TanhFormF32) { check_unary(OpKind::gelu, 1, DType::f32, gelu_tanh); }
TEST(NeuronGeluLowering, ErfFormBf16) { check_unary(OpKind::gelu, 0, DType::bf16, gelu_erf); }
TEST(NeuronGeluLowering, TanhFormBf16) { check_unary(OpKind::gelu, 1, DType::bf16, gelu_tanh); }
TEST(NeuronGeluLowering, Erf) {
  check_unary(OpKind::erf, 0, DType::f32, [](double x) { return std::erf(x); });
}

// The program runs one activation per chunk on the Scalar engine.
TEST(NeuronGeluLowering, RunsOnTheScalarEngine) {
  const TensorType t{Shape({256, 64}), DType::f32};
  GraphNode node = op(OpKind::gelu, {0}, t);
  node.attrs.push_back({AttrName::approximate, AttrValue(int64_t{1})});
  absl::StatusOr<LoweredOp> low = lower_node(node, std::vector<TensorType>{t});
  ASSERT_TRUE(low.ok()) << low.status();
  int gelus = 0;
  for (const Instruction& i : low->program.instructions)
    gelus += i.opcode == Opcode::activation && i.function == ActivationFunction::gelu_tanh &&
             i.engine == Engine::scalar;
  EXPECT_GE(gelus, 1);
}

/// fusion(x [B, T, D], pos [1, T, D]) = x + pos: the position embedding's
/// broadcast over the batch.
void check_block_broadcast(int64_t b, int64_t t, int64_t d) {
  const TensorType full{Shape({b, t, d}), DType::f32}, block{Shape({1, t, d}), DType::f32};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {full, block};
  body->nodes.push_back(param(0, full));
  body->nodes.push_back(param(1, block));
  body->nodes.push_back(op(OpKind::add, {0, 1}, full));
  body->outputs = {ValueRef{2, 0}};
  GraphNode f = op(OpKind::fusion, {0, 1}, full);
  f.body = body;
  auto x = buffer(full, random_values(b * t * d, -1, 1, 3));
  auto pos = buffer(block, random_values(t * d, -1, 1, 4));
  auto got = run_node(f, {x, pos});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < b * t * d; ++i) // one fp32 add: exact as the host's
    ASSERT_EQ(at(*got, i), at(*x, i) + at(*pos, i % (t * d))) << i;
}

// T 64: 128-row tiles, each loading the block twice (partitions 0 and 64).
TEST(NeuronBlockBroadcast, PeriodOf64Rows) { check_block_broadcast(5, 64, 48); }
// T 50: tiles restart at every period (50 rows each).
TEST(NeuronBlockBroadcast, PeriodThatDoesNotDivide128) { check_block_broadcast(3, 50, 33); }
// T 256: 128-row tiles never cross a period.
TEST(NeuronBlockBroadcast, PeriodOf256Rows) { check_block_broadcast(2, 256, 16); }
// T 200: tiles of 128 and 72 per period.
TEST(NeuronBlockBroadcast, PeriodOf200Rows) { check_block_broadcast(2, 200, 8); }

} // namespace
} // namespace mstep::neuron
