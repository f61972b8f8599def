// The functional simulator against host math: a tiled bf16 matmul against
// a double-precision matmul, the Vector/Scalar ops against fp32 host
// arithmetic, bf16 storage rounding, NaN for reads before writes.
#include <cmath>
#include <random>

#include "lib/backends/neuron/TiledMatmulProgram.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::bytes_of;
using testing::values_of;

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<BFloat16> to_bf16(const std::vector<float>& v) {
  std::vector<BFloat16> out;
  for (float x : v) out.emplace_back(x);
  return out;
}

/// C [M, N] in `c_bytes` (f32 or bf16) against a double-precision A B.
/// The inputs are exact bf16 values, so the error is fp32 accumulation
/// (at most K ulps of the absolute sum) plus, for a bf16 C, its rounding
/// (half a bf16 ulp: 8 significant bits, so up to 2^-8 relative).
void expect_product(const std::vector<BFloat16>& a, const std::vector<BFloat16>& bm,
                    const std::vector<std::byte>& c_bytes, DType output, int64_t m, int64_t k,
                    int64_t n) {
  std::vector<float> c(m * n);
  if (output == DType::bf16) {
    const std::vector<BFloat16> cb = values_of<BFloat16>(c_bytes);
    for (size_t i = 0; i < c.size(); ++i) c[i] = float(cb[i]);
  } else {
    c = values_of<float>(c_bytes);
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0, abs_sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double prod = double(float(a[i * k + p])) * double(float(bm[p * n + j]));
        ref += prod;
        abs_sum += std::fabs(prod);
      }
      double tol = k * std::ldexp(1.0, -24) * abs_sum;
      if (output == DType::bf16) tol += std::ldexp(1.0, -8) * std::fabs(ref);
      if (!(std::fabs(c[i * n + j] - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << c[i * n + j] << ", want " << ref
                      << " +- " << tol;
    }
  EXPECT_EQ(bad, 0);
}

/// [m, 384] x [384, 640]: two 512-wide column blocks of B; A^T is loaded
/// `a_loads` times (once when B stays resident, once per column block
/// when B streams).
void check_tiled_matmul(DType output, int64_t m, int64_t a_loads) {
  const int64_t k = 384, n = 640;
  const std::vector<BFloat16> a = to_bf16(random_values(m * k, 1));  // A [M, K]
  const std::vector<BFloat16> bm = to_bf16(random_values(k * n, 2)); // B [K, N]
  std::vector<BFloat16> at(k * m);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) at[j * m + i] = a[i * k + j];
  const TileProgram program = tiled_matmul_program({m, k, n, DType::bf16, output});
  HbmContents hbm = {bytes_of(at), bytes_of(bm),
                     std::vector<std::byte>(m * n * element_size(output))};
  Simulator sim;
  absl::StatusOr<SimulationStats> stats = sim.run(program, hbm);
  ASSERT_TRUE(stats.ok()) << stats.status();
  // Multiply-adds, plus the elements the DMAs and the PSUM copy move.
  EXPECT_EQ(stats->element_ops, m * k * n + a_loads * k * m + k * n + 2 * m * n);

  expect_product(a, bm, hbm[2], output, m, k, n);
}

// M = 768 >= N: B's two column blocks (3 x 512 bf16 per partition each)
// stay resident, A^T is loaded once.
TEST(NeuronSimulator, TiledMatmulBf16IntoF32) { check_tiled_matmul(DType::f32, 768, 1); }
TEST(NeuronSimulator, TiledMatmulBf16IntoBf16) { check_tiled_matmul(DType::bf16, 768, 1); }
// M = 256 < N: A is the smaller operand, B streams, A^T stays resident
// (loaded once, not once per column block).
TEST(NeuronSimulator, TiledMatmulStreamsBWhenAIsSmaller) {
  check_tiled_matmul(DType::f32, 256, 1);
}

// A given row-major ([M, K]: A^T made on chip) and/or B given as B^T
// ([N, K]: B made on chip), ragged M, K (a K tile of 44 rows) and N (two
// column blocks, a ragged 128-row chunk): the transposes against the
// identity are exact, so C is the same product as from A^T and B.
void check_on_chip_transposes(bool a_row_major, bool b_transposed) {
  const int64_t m = 200, k = 300, n = 600;
  const std::vector<BFloat16> a = to_bf16(random_values(m * k, 5));  // A [M, K]
  const std::vector<BFloat16> bm = to_bf16(random_values(k * n, 6)); // B [K, N]
  std::vector<BFloat16> at(k * m), btr(n * k);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < k; ++j) at[j * m + i] = a[i * k + j];
  for (int64_t j = 0; j < k; ++j)
    for (int64_t c = 0; c < n; ++c) btr[c * k + j] = bm[j * n + c];
  TiledMatmulShape s{m, k, n, DType::bf16, DType::bf16};
  s.a_row_major = a_row_major;
  s.b_transposed = b_transposed;
  const TileProgram program = tiled_matmul_program(s);
  HbmContents hbm = {bytes_of(a_row_major ? a : at), bytes_of(b_transposed ? btr : bm),
                     std::vector<std::byte>(m * n * 2)};
  Simulator sim;
  absl::StatusOr<SimulationStats> stats = sim.run(program, hbm);
  ASSERT_TRUE(stats.ok()) << stats.status();
  expect_product(a, bm, hbm[2], DType::bf16, m, k, n);
}

TEST(NeuronSimulator, TiledMatmulTransposesARowsOnChip) { check_on_chip_transposes(true, false); }
TEST(NeuronSimulator, TiledMatmulTransposesBtOnChip) { check_on_chip_transposes(false, true); }
TEST(NeuronSimulator, TiledMatmulTransposesBothOnChip) { check_on_chip_transposes(true, true); }

/// One Vector/Scalar instruction on [128, 64] f32 tiles loaded from HBM
/// "a" and "b", its result stored to HBM "out": returns out.
struct Elementwise {
  TileBuilder b{"elementwise"};
  int32_t ha, hb, hout, ta, tb, tout, col;
  std::vector<float> a = random_values(128 * 64, 3), bv = random_values(128 * 64, 4, 0.5f, 2.0f);

  Elementwise() {
    ha = b.hbm_tensor("a", DType::f32, 128 * 64);
    hb = b.hbm_tensor("b", DType::f32, 128 * 64);
    hout = b.hbm_tensor("out", DType::f32, 128 * 64);
    ta = b.allocate(BufferKind::sbuf, 256, "a");
    tb = b.allocate(BufferKind::sbuf, 256, "b");
    tout = b.allocate(BufferKind::sbuf, 256, "out");
    col = b.allocate(BufferKind::sbuf, 4, "col");
    b.dma_copy(tile(ta), hbm_rows(ha, DType::f32, 64, 0, 128, 0, 64));
    b.dma_copy(tile(tb), hbm_rows(hb, DType::f32, 64, 0, 128, 0, 64));
  }
  AccessPattern tile(int32_t t) const {
    return tile_pattern(BufferKind::sbuf, t, DType::f32, 0, 128, 0, {{64, 1}});
  }
  AccessPattern column() const {
    return tile_pattern(BufferKind::sbuf, col, DType::f32, 0, 128, 0, {{1, 1}});
  }
  /// Runs the program with `op` (already emitted), storing `result` (default the out tile).
  std::vector<float> run(std::optional<AccessPattern> result = std::nullopt) {
    const AccessPattern r = result.value_or(tile(tout));
    const int64_t store =
        b.dma_copy(hbm_rows(hout, DType::f32, r.free_elements(), 0, 128, 0, r.free_elements()), r);
    // These tests check arithmetic, not timing: one chain of semaphores
    // orders everything (the two loads, then each op, then the store), so
    // no two engines touch a tile unordered (the validator's rule race).
    const int32_t loaded = b.semaphore(), done = b.semaphore();
    b.signal(0, loaded);
    b.signal(1, loaded);
    for (int64_t i = 2; i < store; ++i) {
      b.wait(i, loaded, 2);
      if (i > 2) b.wait(i, done, static_cast<int32_t>(i - 2));
      b.signal(i, done);
    }
    b.wait(store, done, static_cast<int32_t>(store - 2));
    HbmContents hbm = {bytes_of(a), bytes_of(bv), std::vector<std::byte>(128 * 64 * 4)};
    Simulator sim;
    absl::StatusOr<SimulationStats> st = sim.run(b.program(), hbm);
    EXPECT_TRUE(st.ok()) << st.status();
    return values_of<float>(hbm[2]);
  }
};

TEST(NeuronSimulator, TensorTensorOps) {
  struct Case {
    AluOp op;
    float (*f)(float, float);
  };
  for (Case c : {Case{AluOp::add, [](float x, float y) { return x + y; }},
                 Case{AluOp::subtract, [](float x, float y) { return x - y; }},
                 Case{AluOp::multiply, [](float x, float y) { return x * y; }},
                 Case{AluOp::divide, [](float x, float y) { return x / y; }},
                 Case{AluOp::max, [](float x, float y) { return std::max(x, y); }},
                 Case{AluOp::min, [](float x, float y) { return std::min(x, y); }},
                 Case{AluOp::is_ge, [](float x, float y) { return x >= y ? 1.0f : 0.0f; }}}) {
    Elementwise e;
    e.b.tensor_tensor(Engine::vector, e.tile(e.tout), e.tile(e.ta), e.tile(e.tb), c.op);
    const std::vector<float> out = e.run();
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_EQ(out[i], c.f(e.a[i], e.bv[i])) << alu_op_name(c.op) << " at " << i;
  }
}

TEST(NeuronSimulator, TensorScalarWithTwoOps) {
  Elementwise e;
  const int64_t i =
      e.b.tensor_scalar(Engine::vector, e.tile(e.tout), e.tile(e.ta), AluOp::multiply, 3.0f);
  e.b.at(i).alu2 = AluOp::add;
  e.b.at(i).scalar2 = -0.5f;
  const std::vector<float> out = e.run();
  for (size_t k = 0; k < out.size(); ++k) ASSERT_EQ(out[k], e.a[k] * 3.0f + -0.5f) << k;
}

TEST(NeuronSimulator, ActivationWithScaleAndPerPartitionBias) {
  Elementwise e;
  // bias per partition: column 0 of b's tile.
  const int64_t i = e.b.activation(e.tile(e.tout), e.tile(e.ta), ActivationFunction::exp, 0.5f);
  e.b.at(i).bias = tile_pattern(BufferKind::sbuf, e.tb, DType::f32, 0, 128, 0, {{1, 1}});
  const std::vector<float> out = e.run();
  for (int64_t p = 0; p < 128; ++p)
    for (int64_t j = 0; j < 64; ++j) {
      const double want = std::exp(double(e.a[p * 64 + j]) * 0.5 + double(e.bv[p * 64]));
      ASSERT_NEAR(out[p * 64 + j], want, 4e-7 * want) << p << "," << j;
    }
}

// log (log_softmax's log s): of b in [0.5, 2), scaled by 2.
TEST(NeuronSimulator, ActivationLog) {
  Elementwise e;
  e.b.activation(e.tile(e.tout), e.tile(e.tb), ActivationFunction::log, 2.0f);
  const std::vector<float> out = e.run();
  for (int64_t i = 0; i < 128 * 64; ++i) ASSERT_NEAR(out[i], std::log(2.0 * e.bv[i]), 2e-7) << i;
}

// sqrt (the optimizers'): correctly rounded, as std::sqrt in fp32.
TEST(NeuronSimulator, ActivationSqrt) {
  Elementwise e;
  e.b.activation(e.tile(e.tout), e.tile(e.tb), ActivationFunction::sqrt);
  const std::vector<float> out = e.run();
  for (int64_t i = 0; i < 128 * 64; ++i) ASSERT_EQ(out[i], std::sqrt(e.bv[i])) << i;
}

// A free stride of 0 reads one element across the row: a [P, 1] column
// broadcast along the free axis (the per-row scalar of the norm lowerings).
TEST(NeuronSimulator, StrideZeroReadBroadcastsAColumn) {
  Elementwise e;
  e.b.tensor_tensor(Engine::vector, e.tile(e.tout), e.tile(e.ta),
                    tile_pattern(BufferKind::sbuf, e.tb, DType::f32, 0, 128, 5, {{64, 0}}),
                    AluOp::multiply);
  const std::vector<float> out = e.run();
  for (int64_t p = 0; p < 128; ++p)
    for (int64_t j = 0; j < 64; ++j)
      ASSERT_EQ(out[p * 64 + j], e.a[p * 64 + j] * e.bv[p * 64 + 5]) << p << "," << j;
}

// A [P, 1] scale pattern: one multiplier per partition (column 3 of b).
TEST(NeuronSimulator, ActivationWithPerPartitionScale) {
  Elementwise e;
  const int64_t i =
      e.b.activation(e.tile(e.tout), e.tile(e.ta), ActivationFunction::identity, 7.0f, 0.25f);
  e.b.at(i).scale_column = tile_pattern(BufferKind::sbuf, e.tb, DType::f32, 0, 128, 3, {{1, 1}});
  const std::vector<float> out = e.run();
  for (int64_t p = 0; p < 128; ++p)
    for (int64_t j = 0; j < 64; ++j)
      ASSERT_FLOAT_EQ(out[p * 64 + j], e.a[p * 64 + j] * e.bv[p * 64 + 3] + 0.25f) << p << "," << j;
}

TEST(NeuronSimulator, ActivationAddReduceSumsTheRow) {
  Elementwise e;
  const int64_t i =
      e.b.activation(e.tile(e.tout), e.tile(e.ta), ActivationFunction::square, 2.0f, 1.0f);
  e.b.at(i).accum = e.column();
  const std::vector<float> out = e.run(e.column());
  for (int64_t p = 0; p < 128; ++p) {
    double want = 0;
    for (int64_t j = 0; j < 64; ++j) want += std::pow(double(e.a[p * 64 + j]) * 2 + 1, 2);
    EXPECT_NEAR(out[p], want, 1e-5 * want) << p;
  }
}

TEST(NeuronSimulator, TensorReduceAddAndMax) {
  for (AluOp op : {AluOp::add, AluOp::max}) {
    Elementwise e;
    e.b.tensor_reduce(Engine::vector, e.column(), e.tile(e.ta), op);
    const std::vector<float> out = e.run(e.column());
    for (int64_t p = 0; p < 128; ++p) {
      double want = op == AluOp::add ? 0 : -1e30;
      for (int64_t j = 0; j < 64; ++j)
        want = op == AluOp::add ? want + e.a[p * 64 + j] : std::max<double>(want, e.a[p * 64 + j]);
      EXPECT_NEAR(out[p], want, 1e-4) << alu_op_name(op) << " row " << p;
    }
  }
}

// bn_stats over two halves of each row (32 + 32), bn_aggr of the two
// records: the row's mean and biased variance (vs double two-pass).
TEST(NeuronSimulator, BnStatsAndAggrGiveMeanAndVariance) {
  Elementwise e;
  const int32_t mv = e.b.allocate(BufferKind::sbuf, 8, "mean_var");
  auto rec = [&](int64_t i) {
    return tile_pattern(BufferKind::sbuf, e.tout, DType::f32, 0, 128, 3 * i, {{3, 1}});
  };
  for (int64_t h = 0; h < 2; ++h)
    e.b.bn_stats(rec(h),
                 tile_pattern(BufferKind::sbuf, e.ta, DType::f32, 0, 128, 32 * h, {{32, 1}}));
  e.b.bn_aggr(tile_pattern(BufferKind::sbuf, mv, DType::f32, 0, 128, 0, {{2, 1}}),
              tile_pattern(BufferKind::sbuf, e.tout, DType::f32, 0, 128, 0, {{6, 1}}));
  const std::vector<float> out =
      e.run(tile_pattern(BufferKind::sbuf, mv, DType::f32, 0, 128, 0, {{2, 1}}));
  for (int64_t p = 0; p < 128; ++p) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < 64; ++j) mean += e.a[p * 64 + j] / 64.0;
    for (int64_t j = 0; j < 64; ++j) var += std::pow(e.a[p * 64 + j] - mean, 2) / 64.0;
    EXPECT_NEAR(out[p * 2], mean, 1e-6) << p;
    EXPECT_NEAR(out[p * 2 + 1], var, 1e-6 * (1 + var)) << p;
  }
}

TEST(NeuronSimulator, TensorReduceInnermostDimOfTwo) {
  // src [128, (4, 16)]: four sums of 16 per partition.
  Elementwise e;
  e.b.tensor_reduce(
      Engine::vector, tile_pattern(BufferKind::sbuf, e.tout, DType::f32, 0, 128, 0, {{4, 1}}),
      tile_pattern(BufferKind::sbuf, e.ta, DType::f32, 0, 128, 0, {{4, 16}, {16, 1}}), AluOp::add);
  const std::vector<float> out =
      e.run(tile_pattern(BufferKind::sbuf, e.tout, DType::f32, 0, 128, 0, {{4, 1}}));
  for (int64_t p = 0; p < 128; ++p)
    for (int64_t g = 0; g < 4; ++g) {
      double want = 0;
      for (int64_t j = 0; j < 16; ++j) want += e.a[p * 64 + g * 16 + j];
      EXPECT_NEAR(out[p * 4 + g], want, 1e-5) << p << "," << g;
    }
}

TEST(NeuronSimulator, Bf16StorageRoundsToNearestEven) {
  // f32 -> bf16 (tensor_copy) -> f32: ties go to the even mantissa.
  Elementwise e;
  const float one = 1.0f, tie_down = 1.0f + std::ldexp(1.0f, -8),
              tie_up = 1.0f + 3 * std::ldexp(1.0f, -8),
              above = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -12);
  for (int64_t p = 0; p < 128; ++p) {
    e.a[p * 64 + 0] = one;
    e.a[p * 64 + 1] = tie_down;
    e.a[p * 64 + 2] = tie_up;
    e.a[p * 64 + 3] = above;
  }
  const int32_t half = e.b.allocate(BufferKind::sbuf, 128, "half");
  const AccessPattern h = tile_pattern(BufferKind::sbuf, half, DType::bf16, 0, 128, 0, {{64, 1}});
  e.b.tensor_copy(Engine::vector, h, e.tile(e.ta));
  e.b.tensor_copy(Engine::scalar, e.tile(e.tout), h);
  const std::vector<float> out = e.run();
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);                        // 1 + 2^-8: tie, to even (down)
  EXPECT_EQ(out[2], 1.0f + std::ldexp(1.0f, -6)); // 1 + 3*2^-8: tie, to even (up)
  EXPECT_EQ(out[3], 1.0f + std::ldexp(1.0f, -7)); // above the tie: up
}

TEST(NeuronSimulator, ReadBeforeWriteIsNaN) {
  for (BufferKind kind : {BufferKind::sbuf, BufferKind::psum}) {
    Elementwise e;
    const int32_t fresh = e.b.allocate(kind, 256, "fresh");
    e.b.tensor_copy(Engine::vector, e.tile(e.tout),
                    tile_pattern(kind, fresh, DType::f32, 0, 128, 0, {{64, 1}}));
    const std::vector<float> out = e.run();
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_TRUE(std::isnan(out[i])) << buffer_kind_name(kind) << " " << i;
  }
}

TEST(NeuronSimulator, ReusedAllocationIsNaNFilledAgain) {
  Elementwise e;
  e.b.tensor_copy(Engine::vector, e.tile(e.tout), e.tile(e.ta)); // out holds a
  e.b.release(e.tout);
  const int32_t again = e.b.allocate(BufferKind::sbuf, 256, "again"); // first fit: out's old place
  ASSERT_EQ(e.b.program().allocations[again].byte_offset,
            e.b.program().allocations[e.tout].byte_offset);
  const std::vector<float> out = e.run(e.tile(again));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_TRUE(std::isnan(out[i])) << i;
}

TEST(NeuronSimulator, RejectsAnInvalidProgramWithoutRunningIt) {
  testing::BaseProgram p;
  p.inst(p.act).engine = Engine::vector;
  HbmContents hbm = {std::vector<std::byte>(128 * 64 * 4, std::byte{0}),
                     std::vector<std::byte>(128 * 64 * 4, std::byte{7})};
  Simulator sim;
  absl::StatusOr<SimulationStats> st = sim.run(p.b.program(), hbm);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.status().message()), ::testing::HasSubstr("rule engine_opcode"));
  EXPECT_EQ(hbm[1][0], std::byte{7}); // nothing ran
}

TEST(NeuronSimulator, RejectsHbmOfTheWrongSize) {
  testing::BaseProgram p;
  HbmContents hbm = {std::vector<std::byte>(128 * 64 * 4), std::vector<std::byte>(100)};
  Simulator sim;
  absl::StatusOr<SimulationStats> st = sim.run(p.b.program(), hbm);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.status().message()),
              ::testing::HasSubstr("HBM tensor 'y' needs 32768 bytes, got 100"));
  HbmContents one = {std::vector<std::byte>(128 * 64 * 4)};
  EXPECT_THAT(std::string(sim.run(p.b.program(), one).status().message()),
              ::testing::HasSubstr("has 2 HBM tensors, the simulator was given 1"));
}

} // namespace
} // namespace mstep::neuron
