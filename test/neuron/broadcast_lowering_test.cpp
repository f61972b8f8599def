// LowerBroadcast.cpp: elementwise ops and fusions with row broadcasts
// ([N] against [M, N]), per-row scalars ([M, 1]), 1-element tensors,
// filled constants and f32<->bf16 casts, lowered to tile programs and run
// on the simulator, against host math; ragged row tiles, chunked long rows,
// refusals.
#include <cmath>

#include "LoweringTestUtil.h"

namespace mstep::neuron {
namespace {

using ::testing::HasSubstr;
using namespace mstep::neuron::testing;

/// fusion(x [M,N], row [N], col [M,1], s [1]) =
///   cast_out(exp(x * row) - col + (2 - s)), in f32, cast to `out`.
GraphNode broadcast_fusion(int64_t m, int64_t n, DType out) {
  const TensorType full{Shape({m, n}), DType::f32}, row{Shape({n}), DType::f32},
      col{Shape({m, 1}), DType::f32}, one{Shape({1}), DType::f32};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {full, row, col, one};
  for (int64_t i = 0; i < 4; ++i) body->nodes.push_back(param(i, body->input_types[i]));
  body->nodes.push_back(op(OpKind::mul, {0, 1}, full));            // %4 x * row
  body->nodes.push_back(op(OpKind::exp, {4}, full));               // %5
  body->nodes.push_back(op(OpKind::sub, {5, 2}, full));            // %6 - col
  body->nodes.push_back(scalar_constant(2.0, DType::f32));         // %7
  body->nodes.push_back(op(OpKind::sub, {7, 3}, one));             // %8 2 - s
  body->nodes.push_back(op(OpKind::add, {6, 8}, full));            // %9
  body->nodes.push_back(op(OpKind::cast, {9}, {full.shape, out})); // %10
  body->outputs = {ValueRef{10, 0}};
  GraphNode f = op(OpKind::fusion, {0, 1, 2, 3}, {full.shape, out});
  f.body = body;
  return f;
}

void check_broadcast_fusion(int64_t m, int64_t n, DType out) {
  const TensorType full{Shape({m, n}), DType::f32};
  auto x = buffer(full, random_values(m * n, -1, 1, 41));
  auto row = buffer({Shape({n}), DType::f32}, random_values(n, -1, 1, 42));
  auto col = buffer({Shape({m, 1}), DType::f32}, random_values(m, -1, 1, 43));
  auto s = buffer({Shape({1}), DType::f32}, {0.75f});
  auto got = run_node(broadcast_fusion(m, n, out), {x, row, col, s});
  ASSERT_TRUE(got);
  // Five fp32 ops (a few ulps each), then the cast's rounding.
  const double rel = 8 * std::ldexp(1.0, -24) + (out == DType::bf16 ? std::ldexp(1.0, -8) : 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double want =
          std::exp(double(at(*x, i * n + j)) * at(*row, j)) - at(*col, i) + (2 - 0.75);
      ASSERT_NEAR(at(*got, i * n + j), want, rel * (std::abs(want) + 2)) << i << "," << j;
    }
}

// 300 rows: tiles of 128, 128 and 44; the row loaded once for all tiles.
TEST(NeuronBroadcastLowering, RowColumnAndScalarF32) {
  check_broadcast_fusion(300, 40, DType::f32);
}
TEST(NeuronBroadcastLowering, CastToBf16InAFusion) { check_broadcast_fusion(130, 64, DType::bf16); }
// 9000 columns: three chunks; the row is reloaded per chunk.
TEST(NeuronBroadcastLowering, LongRowsAreChunked) { check_broadcast_fusion(129, 9000, DType::f32); }

// A single op with a row operand (no fusion): [M, N] + [N].
TEST(NeuronBroadcastLowering, SingleOpRowBroadcast) {
  const TensorType t{Shape({3, 70, 20}), DType::bf16}, row{Shape({1, 20}), DType::bf16};
  auto x = buffer(t, random_values(t.numel(), -4, 4, 44));
  auto r = buffer(row, random_values(20, -4, 4, 45));
  auto got = run_node(op(OpKind::add, {0, 1}, t), {x, r});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double want = double(at(*x, i)) + at(*r, i % 20);
    ASSERT_NEAR(at(*got, i), want, std::ldexp(1.0, -8) * std::abs(want)) << i;
  }
}

// cast alone, both ways: f32 -> bf16 rounds to nearest even; back is exact.
TEST(NeuronBroadcastLowering, CastAlone) {
  const TensorType f{Shape({200, 33}), DType::f32}, b{Shape({200, 33}), DType::bf16};
  std::vector<float> v = random_values(f.numel(), -100, 100, 46);
  v[0] = 1.00390625f; // halfway between bf16 1 and 1.0078125: rounds to even (1)
  auto x = buffer(f, v);
  auto down = run_node(op(OpKind::cast, {0}, b), {x});
  ASSERT_TRUE(down);
  EXPECT_EQ(at(*down, 0), 1.0f);
  for (int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(at(*down, i), float(BFloat16(v[i]))) << i;
  auto up = run_node(op(OpKind::cast, {0}, f), {down});
  ASSERT_TRUE(up);
  for (int64_t i = 0; i < f.numel(); ++i) ASSERT_EQ(at(*up, i), at(*down, i)) << i;
}

// full(c) read as a scalar, and an output that is a per-row value
// broadcast by expand: y = expand(col * 3) + full(0.5).
TEST(NeuronBroadcastLowering, FullAndExpandedColumnOutput) {
  const TensorType full{Shape({150, 8}), DType::f32}, col{Shape({150, 1}), DType::f32};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {col};
  body->nodes.push_back(param(0, col));                    // %0
  body->nodes.push_back(scalar_constant(3.0, DType::f32)); // %1
  body->nodes.push_back(op(OpKind::mul, {0, 1}, col));     // %2
  body->nodes.push_back(op(OpKind::expand, {2}, full));    // %3
  body->nodes.push_back(scalar_constant(0.5, DType::f32)); // %4
  body->nodes.push_back(op(OpKind::full, {4}, full));      // %5
  body->nodes.push_back(op(OpKind::add, {3, 5}, full));    // %6 a per-row value
  body->outputs = {ValueRef{6, 0}};
  GraphNode f = op(OpKind::fusion, {0}, full);
  f.body = body;
  auto c = buffer(col, random_values(150, -1, 1, 47));
  auto got = run_node(f, {c});
  ASSERT_TRUE(got);
  for (int64_t i = 0; i < 150; ++i)
    for (int64_t j = 0; j < 8; ++j)
      ASSERT_FLOAT_EQ(at(*got, i * 8 + j), at(*c, i) * 3.0f + 0.5f) << i << "," << j;
}

/// layer_norm's backward as the fuser forms it: r = rsqrt(var + eps) per
/// row next to wide values, outputs of both shapes
/// (r [B, T, 1], g * w, xhat * r, (g * w) * (xhat * r), g * (xhat * r)).
void check_layer_norm_backward_fusion(int64_t b, int64_t t, int64_t d) {
  const TensorType col{Shape({b, t, 1}), DType::f32}, full{Shape({b, t, d}), DType::f32},
      row{Shape({d}), DType::f32};
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {col, full, row, full};
  for (int64_t i = 0; i < 4; ++i) body->nodes.push_back(param(i, body->input_types[i]));
  body->nodes.push_back(scalar_constant(1e-5, DType::f32)); // %4
  body->nodes.push_back(op(OpKind::add, {0, 4}, col));      // %5
  body->nodes.push_back(op(OpKind::rsqrt, {5}, col));       // %6 r
  body->nodes.push_back(op(OpKind::mul, {1, 2}, full));     // %7 g * w
  body->nodes.push_back(op(OpKind::mul, {3, 6}, full));     // %8 xhat * r
  body->nodes.push_back(op(OpKind::mul, {7, 8}, full));     // %9
  body->nodes.push_back(op(OpKind::mul, {1, 8}, full));     // %10
  body->outputs = {ValueRef{6, 0}, ValueRef{7, 0}, ValueRef{8, 0}, ValueRef{9, 0}, ValueRef{10, 0}};
  GraphNode f = op(OpKind::fusion, {0, 1, 2, 3}, col);
  f.results = {col, full, full, full, full};
  f.body = body;
  const int64_t rows = b * t;
  Buffers in = {buffer(col, random_values(rows, 0.1f, 2, 51)),
                buffer(full, random_values(rows * d, -1, 1, 52)),
                buffer(row, random_values(d, 0.5f, 1.5f, 53)),
                buffer(full, random_values(rows * d, -2, 2, 54))};
  absl::StatusOr<Buffers> got = run_lowered_all(f, in);
  ASSERT_TRUE(got.ok()) << got.status();
  const double rel = 8 * std::ldexp(1.0, -24);
  for (int64_t i = 0; i < rows; ++i) {
    const double r = 1 / std::sqrt(double(at(*in[0], i)) + 1e-5);
    ASSERT_NEAR(at(*(*got)[0], i), r, rel * r) << i;
    for (int64_t j = 0; j < d; ++j) {
      const int64_t e = i * d + j;
      const double g = at(*in[1], e), gw = g * at(*in[2], j), xr = at(*in[3], e) * r;
      ASSERT_NEAR(at(*(*got)[1], e), gw, rel * std::abs(gw)) << i << "," << j;
      ASSERT_NEAR(at(*(*got)[2], e), xr, rel * std::abs(xr)) << i << "," << j;
      ASSERT_NEAR(at(*(*got)[3], e), gw * xr, rel * std::abs(gw * xr)) << i << "," << j;
      ASSERT_NEAR(at(*(*got)[4], e), g * xr, rel * std::abs(g * xr)) << i << "," << j;
    }
  }
}

// [16, 64, 64] as in gpt_train; 300 rows of 9000 (ragged row tiles, the
// per-row output stored once per row tile across three chunks).
TEST(NeuronBroadcastLowering, LayerNormBackwardFusionWithAPerRowOutput) {
  check_layer_norm_backward_fusion(16, 64, 64);
  check_layer_norm_backward_fusion(3, 100, 9000);
}

TEST(NeuronBroadcastLowering, RefusesOtherBroadcasts) {
  const TensorType t{Shape({2, 3, 4}), DType::f32}, mid{Shape({3, 1}), DType::f32};
  EXPECT_THAT(refusal(op(OpKind::mul, {0, 1}, t), {t, mid}),
              HasSubstr("mul not tiled: broadcast of f32[3, 1] against [2, 3, 4] is not a row or "
                        "per-row broadcast"));
  const TensorType i{Shape({2, 3}), DType::i32}, f{Shape({2, 3}), DType::f32};
  // Ints cast to floats exactly (IntegerValues.h); floats to ints convert
  // unlike ref's truncation, f64 has no tile dtype.
  EXPECT_THAT(refusal(op(OpKind::cast, {0}, i), {f}), HasSubstr("float-to-int conversion"));
  const TensorType d{Shape({2, 3}), DType::f64};
  EXPECT_THAT(refusal(op(OpKind::cast, {0}, f), {d}), HasSubstr("only f32/bf16, bool or ints"));
  // A result of a middle-axis shape is neither the wide shape nor per row.
  auto body = std::make_shared<TraceGraph>();
  body->input_types = {t, mid};
  body->nodes = {param(0, t), param(1, mid), op(OpKind::exp, {1}, mid), op(OpKind::exp, {0}, t)};
  body->outputs = {ValueRef{3, 0}, ValueRef{2, 0}};
  GraphNode two = op(OpKind::fusion, {0, 1}, t);
  two.results = {t, mid};
  two.body = body;
  EXPECT_THAT(refusal(two, {t, mid}),
              HasSubstr("fusion not tiled: result f32[3, 1] is neither [2, 3, 4] nor one value "
                        "per row"));
}

} // namespace
} // namespace mstep::neuron
