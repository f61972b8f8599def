// philox_uniform: the simulator draws mstep's Philox::uniform numbers (the
// ones ref's dropout and rand use) at the counters the affine expression
// gives, from an int64 (seed, offset) state read as four int32 words; the
// validator's rules and the instruction's cost.
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "mstep/core/Philox.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::bytes_of;
using testing::expect_breach;
using testing::values_of;

constexpr int32_t kParts = 8;
constexpr int64_t kFree = 5;

/// state (HBM int32 [4]) broadcast to [8, 4] in SBUF; philox_uniform into
/// [8, 5] (instruction 1) with counter 1000 + 5p + j; store to out.
struct PhiloxProgram {
  TileBuilder b{"philox"};
  int32_t state_hbm, out, state, u;
  int64_t draw;

  PhiloxProgram() {
    state_hbm = b.hbm_tensor("state", DType::i32, 4);
    out = b.hbm_tensor("out", DType::f32, kParts * kFree);
    state = b.allocate(BufferKind::sbuf, 16, "state");
    u = b.allocate(BufferKind::sbuf, kFree * 4, "u");
    const int32_t loaded = b.semaphore(), drawn = b.semaphore();
    b.signal(b.dma_copy(state_pattern(), hbm_rows(state_hbm, DType::i32, 0, 0, kParts, 0, 4)),
             loaded);
    AffineExpr counter;
    counter.offset = 1000;
    counter.channel_multiplier = kFree;
    counter.steps = {1};
    draw = b.philox_uniform(u_pattern(), state_pattern(), counter);
    b.wait(draw, loaded, 1);
    b.signal(draw, drawn);
    b.wait(b.dma_copy(hbm_rows(out, DType::f32, kFree, 0, kParts, 0, kFree), u_pattern()), drawn,
           1);
  }
  AccessPattern state_pattern() const {
    return tile_pattern(BufferKind::sbuf, state, DType::i32, 0, kParts, 0, {{4, 1}});
  }
  AccessPattern u_pattern() const {
    return tile_pattern(BufferKind::sbuf, u, DType::f32, 0, kParts, 0, {{kFree, 1}});
  }
};

TEST(NeuronPhilox, DrawsMstepsPhiloxUniforms) {
  PhiloxProgram p;
  // A seed and an offset with both 32-bit halves set.
  const uint64_t seed = 0x123456789abcdefULL, offset = (uint64_t{7} << 32) + 99;
  const std::vector<int64_t> state = {static_cast<int64_t>(seed), static_cast<int64_t>(offset)};
  HbmContents hbm = {bytes_of(state), std::vector<std::byte>(kParts * kFree * 4)};
  Simulator sim;
  ASSERT_TRUE(sim.run(p.b.program(), hbm).ok());
  const std::vector<float> got = values_of<float>(hbm[1]);
  for (int64_t e = 0; e < kParts * kFree; ++e)
    EXPECT_EQ(got[e], Philox::uniform(seed, offset, 1000 + e)) << e;
}

TEST(NeuronPhilox, ValidatorRules) {
  {
    PhiloxProgram p;
    EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
  }
  {
    PhiloxProgram p;
    p.b.at(p.draw).dst.dtype = DType::bf16;
    expect_breach(p.b.program(), "operands", "#1 GpSimd philox_uniform", "writes fp32");
  }
  {
    PhiloxProgram p;
    p.b.at(p.draw).srcs[0].dims = {{3, 1}};
    expect_breach(p.b.program(), "operands", "#1 GpSimd philox_uniform",
                  "is not an SBUF int32 [8, 4]");
  }
  {
    PhiloxProgram p;
    p.b.at(p.draw).engine = Engine::vector;
    expect_breach(p.b.program(), "engine_opcode", "#1 Vector philox_uniform",
                  "does not run on Vector");
  }
  {
    PhiloxProgram p;
    p.b.at(p.draw).affine.steps = {1, 1};
    expect_breach(p.b.program(), "operands", "#1 GpSimd philox_uniform", "2 affine steps");
  }
}

TEST(NeuronPhilox, CostsPerElementOnGpSimd) {
  PhiloxProgram p;
  const CostParams params;
  EXPECT_EQ(instruction_cycles(p.b.at(p.draw), params),
            params.affine_fixed_cycles + params.philox_cycles_per_element * kFree);
}

} // namespace
} // namespace mstep::neuron
