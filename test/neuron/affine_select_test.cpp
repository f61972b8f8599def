// The GpSimd iota and affine_select instructions (NKI's, added for the
// attention program's causal mask and identity): their values on the
// simulator, their validator rules and their cost (150 + N cycles).
#include "NeuronTestPrograms.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/InstructionCost.h"

namespace mstep::neuron {
namespace {

using testing::expect_breach;
using testing::values_of;

// iota writes 3 + 2p - x into [4, 5]; affine_select keeps a row-major copy
// of it where p - x >= 1 (strictly below the diagonal) and fills -7 elsewhere.
TEST(NeuronAffineSelect, IotaAndSelectValues) {
  TileBuilder b("affine");
  const int32_t out = b.hbm_tensor("out", DType::f32, 20);
  const int32_t t = b.allocate(BufferKind::sbuf, 5 * 4, "t");
  const int32_t u = b.allocate(BufferKind::sbuf, 5 * 4, "u");
  auto tile = [&](int32_t a) {
    return tile_pattern(BufferKind::sbuf, a, DType::f32, 0, 4, 0, {{5, 1}});
  };
  const int64_t i = b.iota(tile(t), AffineExpr{3, 2, {-1}});
  const int64_t s =
      b.affine_select(tile(u), tile(t), AffineExpr{-1, 1, {-1}}, CmpOp::greater_equal, -7.0f);
  const int64_t st = b.dma_copy(hbm_rows(out, DType::f32, 5, 0, 4, 0, 5), tile(u));
  const int32_t s1 = b.semaphore(), s2 = b.semaphore();
  b.signal(i, s1);
  b.signal(s, s2);
  b.wait(st, s2, 1);
  HbmContents hbm(1, std::vector<std::byte>(80));
  Simulator sim;
  ASSERT_TRUE(sim.run(b.program(), hbm).ok());
  const std::vector<float> got = values_of<float>(hbm[0]);
  for (int p = 0; p < 4; ++p)
    for (int x = 0; x < 5; ++x)
      EXPECT_EQ(got[p * 5 + x], p - x >= 1 ? float(3 + 2 * p - x) : -7.0f) << p << "," << x;
}

// cmp equal over two free dims [2, 3]: the expression -p + y (channel
// multiplier -1, steps {1, 0}) is 0 where the block row y equals the
// partition p, so partition p keeps its row y = p of ones, zeros elsewhere.
TEST(NeuronAffineSelect, EqualOverTwoFreeDims) {
  TileBuilder b("affine_eq");
  const int32_t out = b.hbm_tensor("out", DType::bf16, 12);
  const int32_t ones = b.allocate(BufferKind::sbuf, 12, "ones");
  const int32_t sel = b.allocate(BufferKind::sbuf, 12, "sel");
  auto tile = [&](int32_t a) {
    return tile_pattern(BufferKind::sbuf, a, DType::bf16, 0, 2, 0, {{2, 3}, {3, 1}});
  };
  b.iota(tile(ones), AffineExpr{1, 0, {0, 0}});
  b.affine_select(tile(sel), tile(ones), AffineExpr{0, -1, {1, 0}}, CmpOp::equal, 0.0f);
  AccessPattern dst = hbm_rows(out, DType::bf16, 6, 0, 2, 0, 6);
  b.dma_copy(dst, tile(sel));
  for (int64_t k = 0; k < 2; ++k) {
    const int32_t sem = b.semaphore();
    b.signal(k, sem);
    b.wait(k + 1, sem, 1);
  }
  HbmContents hbm(1, std::vector<std::byte>(24));
  Simulator sim;
  ASSERT_TRUE(sim.run(b.program(), hbm).ok());
  const std::vector<BFloat16> got = values_of<BFloat16>(hbm[0]);
  for (int p = 0; p < 2; ++p)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x) EXPECT_EQ(float(got[p * 6 + y * 3 + x]), y == p ? 1.0f : 0.0f);
}

TEST(NeuronAffineSelect, RunsOnGpSimdOnly) {
  testing::BaseProgram base;
  base.inst(base.act).opcode = Opcode::affine_select;
  base.inst(base.act).affine.steps = {-1};
  expect_breach(base.b.program(), "engine_opcode", "#1 Scalar affine_select",
                "affine_select does not run on Scalar");
}

TEST(NeuronAffineSelect, OneStepPerFreeDim) {
  testing::BaseProgram base;
  base.inst(base.act).engine = Engine::gpsimd;
  base.inst(base.act).opcode = Opcode::affine_select;
  base.inst(base.act).affine.steps = {-1, 1};
  expect_breach(base.b.program(), "operands", "#1 GpSimd affine_select",
                "2 affine steps for 1 free dims");
}

TEST(NeuronAffineSelect, IotaTakesNoSource) {
  testing::BaseProgram base;
  base.inst(base.act).engine = Engine::gpsimd;
  base.inst(base.act).opcode = Opcode::iota;
  base.inst(base.act).affine.steps = {1};
  expect_breach(base.b.program(), "operands", "#1 GpSimd iota", "1 source operands, iota takes 0");
}

// The table: GpSimd iota and affine select cost 150 + N cycles (a fixed
// cost above the ~60-cycle access cost, so that adds nothing).
TEST(NeuronAffineSelect, CostIs150PlusN) {
  Instruction inst;
  inst.engine = Engine::gpsimd;
  inst.opcode = Opcode::affine_select;
  inst.dst = tile_pattern(BufferKind::sbuf, 0, DType::f32, 0, 128, 0, {{512, 1}});
  inst.srcs = {inst.dst};
  EXPECT_DOUBLE_EQ(instruction_cycles(inst, CostParams{}), 150 + 512);
  inst.opcode = Opcode::iota;
  inst.srcs.clear();
  EXPECT_DOUBLE_EQ(instruction_cycles(inst, CostParams{}), 150 + 512);
}

} // namespace
} // namespace mstep::neuron
