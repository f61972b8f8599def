// Lowering.h: elementwise chains (a fusion body), single ops and 2-d matmul
// lowered to tile programs and run on the simulator, against plain host
// math; shapes the lowering cannot tile are refused with a reason (the
// backend then falls back), never computed wrong.
#include <cmath>
#include <random>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

/// fusion(x, y) = max(exp(x + y) * 0.5, neg(x)), one result.
GraphNode chain_fusion(const TensorType& t) {
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {t, t};
  body->nodes.push_back(param(0, t));                    // %0 x
  body->nodes.push_back(param(1, t));                    // %1 y
  body->nodes.push_back(op(OpKind::add, {0, 1}, t));     // %2
  body->nodes.push_back(op(OpKind::exp, {2}, t));        // %3
  body->nodes.push_back(scalar_constant(0.5, t.dtype));  // %4
  body->nodes.push_back(op(OpKind::mul, {3, 4}, t));     // %5
  body->nodes.push_back(op(OpKind::neg, {0}, t));        // %6
  body->nodes.push_back(op(OpKind::maximum, {5, 6}, t)); // %7
  body->outputs = {ValueRef{7, 0}};
  GraphNode f = op(OpKind::fusion, {0, 1}, t);
  f.body = body;
  return f;
}

void check_chain(DType dtype, Shape shape) {
  const TensorType t{shape, dtype};
  const int64_t n = t.numel();
  auto x = buffer(t, random_values(n, -2, 2, 1));
  auto y = buffer(t, random_values(n, -2, 2, 2));
  auto got = run_node(chain_fusion(t), {x, y});
  ASSERT_TRUE(got);
  // bf16 rounds after each of the 4 ops: allow 4 half-ulps (2^-8 relative each).
  const double rel = dtype == DType::bf16 ? 4 * std::ldexp(1.0, -8) : 4 * std::ldexp(1.0, -24);
  for (int64_t i = 0; i < n; ++i) {
    const double xv = at(*x, i), yv = at(*y, i);
    const double want = std::max(std::exp(xv + yv) * 0.5, -xv);
    ASSERT_NEAR(at(*got, i), want, rel * std::abs(want) + 1e-30) << "element " << i;
  }
}

TEST(NeuronLowering, ElementwiseChainF32) { check_chain(DType::f32, Shape({256, 70})); }
TEST(NeuronLowering, ElementwiseChainBf16) { check_chain(DType::bf16, Shape({64, 96})); }
// 128 x 10000 elements: the free dim is cut into chunks that reuse the two
// SBUF slots (the double buffer's semaphores are exercised).
TEST(NeuronLowering, ElementwiseChainManyChunks) { check_chain(DType::f32, Shape({128, 10000})); }

// 385 = 3 x 128 + 1 elements: [128, 3] and a one-element tail; 3 elements:
// only the tail piece.
TEST(NeuronLowering, ElementwiseChainWithTail) { check_chain(DType::f32, Shape({5, 77})); }
TEST(NeuronLowering, ElementwiseChainTailOnly) { check_chain(DType::bf16, Shape({3})); }

TEST(NeuronLowering, SingleBinaryOp) {
  const TensorType t{Shape({512}), DType::f32};
  auto a = buffer(t, random_values(512, -3, 3, 3));
  auto b = buffer(t, random_values(512, 0.5, 3, 4));
  auto got = run_node(op(OpKind::div, {0, 1}, t), {a, b});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < 512; ++i) EXPECT_FLOAT_EQ(at(*got, i), at(*a, i) / at(*b, i));
}

void check_matmul(DType dtype, int64_t m, int64_t k, int64_t n) {
  const TensorType ta{Shape({m, k}), dtype}, tb{Shape({k, n}), dtype}, tc{Shape({m, n}), dtype};
  auto a = buffer(ta, random_values(m * k, -1, 1, 5));
  auto b = buffer(tb, random_values(k * n, -1, 1, 6));
  auto got = run_node(op(OpKind::matmul, {0, 1}, tc), {a, b});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod = double(at(*a, i * k + p)) * at(*b, p * n + j);
        want += prod;
        mag += std::abs(prod);
      }
      // fp32 accumulation over K, plus the output's rounding for bf16.
      const double tol = k * std::ldexp(1.0, -24) * mag +
                         (dtype == DType::bf16 ? std::ldexp(1.0, -8) * std::abs(want) : 0);
      ASSERT_NEAR(at(*got, i * n + j), want, tol + 1e-30) << i << "," << j;
    }
}

// Ragged M, K and N tiles (200 = 128 + 72, 300 = 2x128 + 44, 600 = 512 + 88).
TEST(NeuronLowering, MatmulF32) { check_matmul(DType::f32, 200, 300, 600); }
TEST(NeuronLowering, MatmulBf16) { check_matmul(DType::bf16, 130, 256, 70); }

TEST(NeuronLowering, RefusesWhatItCannotTile) {
  const TensorType empty{Shape({0, 4}), DType::f32};
  absl::StatusOr<LoweredOp> r = lower_node(op(OpKind::add, {0, 1}, empty), {empty, empty});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("add not tiled"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("has no elements"));

  const TensorType v{Shape({128}), DType::f32};
  r = lower_node(op(OpKind::log, {0}, v), {v});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no engine lowering"));

  // A middle-axis broadcast is neither a row nor a per-row one.
  const TensorType t{Shape({2, 3, 4}), DType::f32}, mid{Shape({3, 1}), DType::f32};
  r = lower_node(op(OpKind::mul, {0, 1}, t), {t, mid});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a row or per-row broadcast"));

  const TensorType i32{Shape({128}), DType::i32};
  r = lower_node(op(OpKind::add, {0, 1}, i32), {i32, i32});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("only f32/bf16"));

  // A vector operand (the API records matmul at rank >= 2; a graph from
  // elsewhere may not).
  const TensorType row{Shape({128}), DType::f32}, mat{Shape({128, 128}), DType::f32};
  r = lower_node(op(OpKind::matmul, {0, 1}, row), {row, mat});
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("operands of rank 2 or more"));

  // K = 20000 f32: A^T and B blocks do not fit SBUF; the validator refuses it.
  const TensorType a{Shape({128, 20000}), DType::f32}, b{Shape({20000, 512}), DType::f32},
      c{Shape({128, 512}), DType::f32};
  r = lower_node(op(OpKind::matmul, {0, 1}, c), {a, b});
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("capacity"));
}

} // namespace
} // namespace mstep::neuron
