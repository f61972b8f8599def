// The cost model's arithmetic on tiny programs, against cycles worked out
// by hand from the issue's table and its ~60-cycle fixed access cost,
// composed as max(formula, 60 + streamed cycles) (CostParams' defaults;
// ns = cycles / GHz).
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "lib/backends/neuron/TiledMatmulProgram.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

AccessPattern sbuf(int32_t alloc, int64_t n, DType dtype = DType::f32, int64_t stride = 1) {
  return tile_pattern(BufferKind::sbuf, alloc, dtype, 0, 128, 0, {{n, stride}});
}

TEST(NeuronCost, InstructionCyclesFollowTheTable) {
  TileBuilder b("cycles");
  const int32_t s = b.allocate(BufferKind::sbuf, 64 * 1024, "s");
  const int32_t ps = b.allocate(BufferKind::psum, 2048, "ps");
  const CostParams p;
  // activation / tensor_scalar / tensor_copy: max(64, N) with the access
  // cost: max(64, 60 + N); a tiny one costs the 64-cycle floor.
  EXPECT_EQ(instruction_cycles(
                b.at(b.activation(sbuf(s, 1000), sbuf(s, 1000), ActivationFunction::exp)), p),
            1060);
  EXPECT_EQ(instruction_cycles(b.at(b.tensor_copy(Engine::vector, sbuf(s, 10), sbuf(s, 10))), p),
            70);
  EXPECT_EQ(instruction_cycles(b.at(b.tensor_copy(Engine::vector, sbuf(s, 1), sbuf(s, 1))), p), 64);
  // tensor_tensor: N from SBUF, 2N with an input in PSUM; its three access
  // patterns are walked together: one access cost, as a two-operand op.
  EXPECT_EQ(instruction_cycles(b.at(b.tensor_tensor(Engine::vector, sbuf(s, 300), sbuf(s, 300),
                                                    sbuf(s, 300), AluOp::add)),
                               p),
            360);
  EXPECT_EQ(
      instruction_cycles(
          b.at(b.tensor_scalar(Engine::vector, sbuf(s, 300), sbuf(s, 300), AluOp::add, 1.0f)), p),
      360);
  const AccessPattern pin = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{300, 1}});
  EXPECT_EQ(
      instruction_cycles(
          b.at(b.tensor_tensor(Engine::vector, sbuf(s, 300), pin, sbuf(s, 300), AluOp::add)), p),
      660);
  // bn_stats: max(64, 60 + N); bn_aggr: max(64, 60 + 13N/3).
  EXPECT_EQ(instruction_cycles(b.at(b.bn_stats(sbuf(s, 3), sbuf(s, 512))), p), 572);
  EXPECT_EQ(instruction_cycles(b.at(b.bn_aggr(sbuf(s, 2), sbuf(s, 12))), p), 60 + 52);
  // tensor_reduce: 60 + N, 60 + N/2 for bf16 add.
  EXPECT_EQ(instruction_cycles(
                b.at(b.tensor_reduce(Engine::vector, sbuf(s, 1), sbuf(s, 512), AluOp::add)), p),
            572);
  EXPECT_EQ(instruction_cycles(b.at(b.tensor_reduce(Engine::vector, sbuf(s, 1, DType::bf16),
                                                    sbuf(s, 512, DType::bf16), AluOp::add)),
                               p),
            316);
  // A most-minor stride over 16 B doubles N: 8 f32 = 32 B.
  EXPECT_EQ(
      instruction_cycles(
          b.at(b.tensor_copy(Engine::vector, sbuf(s, 1000), sbuf(s, 1000, DType::f32, 8))), p),
      2060);
  // nc_matmul: max(min(64, M), N, 60 + N) + overhead; x4 for fp32.
  const AccessPattern out = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{512, 1}});
  EXPECT_EQ(
      instruction_cycles(
          b.at(b.matmul(out, sbuf(s, 128, DType::bf16), sbuf(s, 512, DType::bf16), false)), p),
      572 + p.matmul_overhead_cycles);
  EXPECT_EQ(instruction_cycles(
                b.at(b.matmul(tile_pattern(BufferKind::psum, ps, DType::f32, 0, 32, 0, {{16, 1}}),
                              sbuf(s, 32, DType::bf16), sbuf(s, 16, DType::bf16), false)),
                p),
            76 + p.matmul_overhead_cycles);
  EXPECT_EQ(instruction_cycles(b.at(b.matmul(out, sbuf(s, 128), sbuf(s, 512), false)), p),
            60 + 4 * 512 + p.matmul_overhead_cycles);
}

TEST(NeuronCost, EnginesOverlapUnlessASemaphoreOrdersThem) {
  // Vector: 60 + 1060 cycles at 1.12 GHz = 1000 ns; Scalar: 60 + 1340
  // cycles at 1.4 GHz = 1000 ns.
  TileBuilder b("overlap");
  const int32_t s = b.allocate(BufferKind::sbuf, 8192, "s");
  const int32_t t = b.allocate(BufferKind::sbuf, 8192, "t");
  const int64_t v = b.tensor_scalar(Engine::vector, sbuf(s, 1060), sbuf(s, 1060), AluOp::add, 1.0f);
  const int64_t a = b.activation(sbuf(t, 1340), sbuf(t, 1340), ActivationFunction::exp);
  absl::StatusOr<CostReport> free_run = estimate_cost(b.program());
  ASSERT_TRUE(free_run.ok()) << free_run.status();
  EXPECT_DOUBLE_EQ(free_run->total_ns, 1000);
  EXPECT_DOUBLE_EQ(free_run->busy_fraction(Engine::vector), 1.0);
  EXPECT_DOUBLE_EQ(free_run->busy_fraction(Engine::scalar), 1.0);

  const int32_t sem = b.semaphore();
  b.signal(v, sem);
  b.wait(a, sem, 1);
  absl::StatusOr<CostReport> ordered = estimate_cost(b.program());
  ASSERT_TRUE(ordered.ok());
  EXPECT_DOUBLE_EQ(ordered->total_ns, 2000);
  EXPECT_DOUBLE_EQ(ordered->busy_fraction(Engine::scalar), 0.5);
  EXPECT_EQ(ordered->critical_path, (std::vector<int64_t>{v, a}));
}

TEST(NeuronCost, DependentTinyInstructionsPayTheEnginesLatency) {
  // Ten 1-element instructions, each reading the previous one's result:
  // 100 cycles apart on Vector (1.12 GHz), 264 apart on Scalar (1.4 GHz),
  // then the last one's own 64 cycles.
  TileBuilder vb("vector_chain");
  const int32_t s = vb.allocate(BufferKind::sbuf, 64, "s");
  for (int i = 0; i < 10; ++i)
    vb.tensor_scalar(Engine::vector, sbuf(s, 1), sbuf(s, 1), AluOp::add, 1.0f);
  absl::StatusOr<CostReport> vec = estimate_cost(vb.program());
  ASSERT_TRUE(vec.ok()) << vec.status();
  EXPECT_NEAR(vec->total_ns, (9 * 100 + 64) / 1.12, 1e-9);

  TileBuilder sb("scalar_chain");
  const int32_t u = sb.allocate(BufferKind::sbuf, 64, "u");
  for (int i = 0; i < 10; ++i) sb.activation(sbuf(u, 1), sbuf(u, 1), ActivationFunction::exp);
  absl::StatusOr<CostReport> sca = estimate_cost(sb.program());
  ASSERT_TRUE(sca.ok()) << sca.status();
  EXPECT_NEAR(sca->total_ns, (9 * 264 + 64) / 1.4, 1e-9);

  // Independent ones (each reads s, writes t): 64 cycles each.
  TileBuilder ib("independent");
  const int32_t s2 = ib.allocate(BufferKind::sbuf, 64, "s");
  const int32_t t2 = ib.allocate(BufferKind::sbuf, 64, "t");
  for (int i = 0; i < 10; ++i)
    ib.tensor_scalar(Engine::vector, sbuf(t2, 1), sbuf(s2, 1), AluOp::add, 1.0f);
  absl::StatusOr<CostReport> ind = estimate_cost(ib.program());
  ASSERT_TRUE(ind.ok()) << ind.status();
  EXPECT_NEAR(ind->total_ns, 10 * 64 / 1.12, 1e-9);
}

TEST(NeuronCost, VectorAndGpSimdTakeTurnsOnSbuf) {
  // No semaphore, but both use SBUF: v2 serialises them (1000 + 1000 ns).
  TileBuilder b("sbuf_port");
  const int32_t s = b.allocate(BufferKind::sbuf, 8192, "s");
  const int32_t t = b.allocate(BufferKind::sbuf, 8192, "t");
  const int64_t v = b.tensor_scalar(Engine::vector, sbuf(s, 1060), sbuf(s, 1060), AluOp::add, 1.0f);
  const int64_t g = b.tensor_scalar(Engine::gpsimd, sbuf(t, 1340), sbuf(t, 1340), AluOp::add, 1.0f);
  absl::StatusOr<CostReport> r = estimate_cost(b.program());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_ns, 2000);
  EXPECT_EQ(r->critical_path, (std::vector<int64_t>{v, g}));
}

TEST(NeuronCost, VectorAndScalarTakeTurnsOnPsumOnly) {
  TileBuilder b("psum_port");
  const int32_t ps = b.allocate(BufferKind::psum, 8192, "ps");
  const int32_t s = b.allocate(BufferKind::sbuf, 8192, "s");
  const int32_t t = b.allocate(BufferKind::sbuf, 8192, "t"); // no shared write: no race
  const AccessPattern pv = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{1060, 1}});
  const AccessPattern pa = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{1340, 1}});
  b.tensor_copy(Engine::vector, sbuf(s, 1060), pv);
  b.activation(sbuf(t, 1340), pa, ActivationFunction::exp);
  absl::StatusOr<CostReport> r = estimate_cost(b.program());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->total_ns, 2000);
}

TEST(NeuronCost, OneDmaIsFixedCostPlusBytesOverBandwidth) {
  // 32 KiB on one DMA engine: 1300 ns + 32768 B / 282.5 B/ns.
  TileBuilder b("dma");
  const int32_t x = b.hbm_tensor("x", DType::f32, 128 * 64);
  const int32_t s = b.allocate(BufferKind::sbuf, 256, "s");
  b.dma_copy(sbuf(s, 64), hbm_rows(x, DType::f32, 64, 0, 128, 0, 64));
  const CostParams p;
  absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->total_ns, 1300 + 32768 / 282.5, 1e-9);
  EXPECT_EQ(r->bottleneck(), "DMA");
}

TEST(NeuronCost, ADmaPaysAtLeastABurstPerDescriptor) {
  // 128 partitions x 64 f32 read with a most-minor stride: contiguous rows
  // (one 256-byte descriptor per partition: full bandwidth), element-wise
  // (stride 4 or 5: a 4-byte descriptor per element, each charged a
  // 64-byte burst: 16x the time), 2-element runs (8 B: 8x) and a column
  // of 1-element rows (128 descriptors of 4 B: 128 x 64 B).
  const CostParams p;
  ASSERT_EQ(p.dma_descriptor_bytes, 64);
  auto one_dma = [&](int64_t stride, int64_t n, int64_t run = 1) {
    TileBuilder b("dma");
    const int32_t x = b.hbm_tensor("x", DType::f32, 128 * 64 * 5);
    const int32_t s = b.allocate(BufferKind::sbuf, 256, "s");
    AccessPattern src = hbm_rows(x, DType::f32, 64 * 5, 0, 128, 0, n);
    src.dims[0].stride = stride;
    if (run > 1) src.dims = {{n / run, stride}, {run, 1}};
    b.dma_copy(sbuf(s, n), src);
    absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->total_ns : 0;
  };
  EXPECT_NEAR(one_dma(1, 64), 1300 + 32768 / 282.5, 1e-9);
  EXPECT_NEAR(one_dma(4, 64), 1300 + 16 * 32768 / 282.5, 1e-9);
  EXPECT_NEAR(one_dma(5, 64), 1300 + 16 * 32768 / 282.5, 1e-9);
  EXPECT_NEAR(one_dma(3, 64, 2), 1300 + 8 * 32768 / 282.5, 1e-9);
  EXPECT_NEAR(one_dma(100, 1), 1300 + 128 * 64 / 282.5, 1e-9);
  // A transposing bf16 load ([64 partitions, 128] from a row-major
  // [128, 64]: partition stride 1, free stride 64): 2-byte descriptors, 32x.
  TileBuilder b("transpose");
  const int32_t x = b.hbm_tensor("x", DType::bf16, 128 * 64);
  const int32_t s = b.allocate(BufferKind::sbuf, 256, "s");
  AccessPattern src = tile_pattern(BufferKind::hbm, x, DType::bf16, 0, 64, 0, {{128, 64}});
  src.partition_stride = 1;
  b.dma_copy(tile_pattern(BufferKind::sbuf, s, DType::bf16, 0, 64, 0, {{128, 1}}), src);
  absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->total_ns, 1300 + 32 * (64 * 128 * 2) / 282.5, 1e-9);
}

TEST(NeuronCost, DmaEnginesShareHbmBandwidth) {
  // Four 1 MiB loads on four engines, engine bandwidth set above HBM's:
  // HBM (410 B/ns) serialises them; the last starts after 3 MiB of HBM time.
  TileBuilder b("hbm");
  const int32_t x = b.hbm_tensor("x", DType::f32, 4 * 128 * 2048);
  const int32_t s = b.allocate(BufferKind::sbuf, 4 * 8192, "s");
  for (int i = 0; i < 4; ++i)
    b.dma_copy(tile_pattern(BufferKind::sbuf, s, DType::f32, 0, 128, i * 2048, {{2048, 1}}),
               hbm_rows(x, DType::f32, 4 * 2048, 0, 128, i * 2048, 2048));
  CostParams p;
  p.dma_engine_bytes_per_ns = 1e6;
  absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  const double mib = 1024.0 * 1024.0;
  // The last trigger starts at 3 x 64 cycles / 1.4 GHz; HBM is the later bound.
  EXPECT_NEAR(r->total_ns,
              p.dma_fixed_ns + 3 * mib / p.hbm_bytes_per_ns + mib / p.dma_engine_bytes_per_ns,
              1e-6);
  EXPECT_NEAR(r->hbm_busy_ns, 4 * mib / p.hbm_bytes_per_ns, 1e-6);
  EXPECT_EQ(r->bottleneck(), "HBM");
}

TEST(NeuronCost, AnHbmToHbmCopyReadsAndWritesHbm) {
  // Two 1 MiB HBM-to-HBM copies on two engines: 2 MiB of HBM traffic each
  // (read and write), so the second starts after the first's 2 MiB.
  TileBuilder b("hbm_to_hbm");
  const int32_t x = b.hbm_tensor("x", DType::f32, 2 * 128 * 2048);
  const int32_t y = b.hbm_tensor("y", DType::f32, 2 * 128 * 2048);
  for (int i = 0; i < 2; ++i)
    b.dma_copy(hbm_rows(y, DType::f32, 2 * 2048, 0, 128, i * 2048, 2048),
               hbm_rows(x, DType::f32, 2 * 2048, 0, 128, i * 2048, 2048));
  CostParams p;
  p.dma_engine_bytes_per_ns = 1e6;
  absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  const double mib = 1024.0 * 1024.0;
  EXPECT_NEAR(r->hbm_busy_ns, 4 * mib / p.hbm_bytes_per_ns, 1e-6);
  EXPECT_NEAR(r->total_ns, p.dma_fixed_ns + 2 * mib / p.hbm_bytes_per_ns + mib / 1e6, 1e-6);
}

TEST(NeuronCost, MatmulUtilization) {
  // Two back-to-back full bf16 matmuls: 2 x (60 + 512 + overhead) cycles
  // at 2.8 GHz; utilization = 512 / (572 + overhead).
  TileBuilder b("util");
  const int32_t s = b.allocate(BufferKind::sbuf, 4096, "s");
  const int32_t ps = b.allocate(BufferKind::psum, 2048, "ps");
  const AccessPattern out = tile_pattern(BufferKind::psum, ps, DType::f32, 0, 128, 0, {{512, 1}});
  b.matmul(out, sbuf(s, 128, DType::bf16), sbuf(s, 512, DType::bf16), false);
  b.matmul(out, sbuf(s, 128, DType::bf16), sbuf(s, 512, DType::bf16), true);
  const CostParams p;
  absl::StatusOr<CostReport> r = estimate_cost(b.program(), p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->total_ns, 2 * (572 + p.matmul_overhead_cycles) / 2.8, 1e-9);
  EXPECT_NEAR(r->tensor_utilization, 512 / (572 + p.matmul_overhead_cycles), 1e-9);
  EXPECT_EQ(r->bottleneck(), "Tensor");
}

TEST(NeuronCost, TheIssuesMatmulCalibrationPointWithin15Percent) {
  // [4096, 8192] x [8192, 8192] bf16 on Trn1: 6.97 ms, 85% of peak (issue 19).
  absl::StatusOr<CostReport> r =
      estimate_cost(tiled_matmul_program({4096, 8192, 8192, DType::bf16, DType::bf16}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->total_ns, 6.97e6, 0.15 * 6.97e6) << r->summary();
  EXPECT_NEAR(r->tensor_utilization, 0.85, 0.15 * 0.85) << r->summary();
  EXPECT_EQ(r->bottleneck(), "Tensor");
}

TEST(NeuronCost, RejectsAnInvalidProgram) {
  testing::BaseProgram p;
  p.inst(p.act).engine = Engine::tensor;
  absl::StatusOr<CostReport> r = estimate_cost(p.b.program());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("rule engine_opcode"));
}

} // namespace
} // namespace mstep::neuron
