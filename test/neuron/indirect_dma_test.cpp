// dma_indirect: the validator's rules for it, the simulator's gather and
// scatter-add (repeated rows add up in partition order; an index out of
// range is an error naming the instruction, never a stray access) and its
// cost.
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "test/neuron/NeuronTestPrograms.h"

namespace mstep::neuron {
namespace {

using testing::bytes_of;
using testing::expect_breach;
using ::testing::HasSubstr;
using testing::values_of;

constexpr int64_t kRows = 10, kCols = 6, kTokens = 4;

/// ids (HBM int32 [4]) -> SBUF; then either a gather of table rows
/// [10, 6] into SBUF and a store to out [4, 6], or (scatter) a load of
/// source [4, 6] and an accumulating scatter into table. `indirect` is
/// the dma_indirect (instruction 1 in the gather, 2 in the scatter).
struct IndirectProgram {
  TileBuilder b{"indirect"};
  int32_t table, ids, rows_hbm, id_tile, rows;
  int64_t indirect;

  explicit IndirectProgram(bool scatter) {
    table = b.hbm_tensor("table", DType::f32, kRows * kCols);
    ids = b.hbm_tensor("ids", DType::i32, kTokens);
    rows_hbm = b.hbm_tensor(scatter ? "source" : "out", DType::f32, kTokens * kCols);
    id_tile = b.allocate(BufferKind::sbuf, 4, "ids");
    rows = b.allocate(BufferKind::sbuf, kCols * 4, "rows");
    const int32_t ready = b.semaphore(), moved = b.semaphore();
    b.signal(b.dma_copy(id_pattern(), hbm_rows(ids, DType::i32, 1, 0, kTokens, 0, 1)), ready);
    if (scatter) {
      b.signal(b.dma_copy(sbuf(), hbm_rows(rows_hbm, DType::f32, kCols, 0, kTokens, 0, kCols)),
               ready);
      indirect = b.dma_indirect(hbm_rows(table, DType::f32, kCols, 0, kTokens, 0, kCols), sbuf(),
                                id_pattern(), /*accumulate=*/true);
      b.wait(indirect, ready, 2);
    } else {
      indirect = b.dma_indirect(sbuf(), hbm_rows(table, DType::f32, kCols, 0, kTokens, 0, kCols),
                                id_pattern());
      b.wait(indirect, ready, 1);
      b.signal(indirect, moved);
      b.wait(b.dma_copy(hbm_rows(rows_hbm, DType::f32, kCols, 0, kTokens, 0, kCols), sbuf()), moved,
             1);
    }
  }
  AccessPattern sbuf() const {
    return tile_pattern(BufferKind::sbuf, rows, DType::f32, 0, kTokens, 0, {{kCols, 1}});
  }
  AccessPattern id_pattern() const {
    return tile_pattern(BufferKind::sbuf, id_tile, DType::i32, 0, kTokens, 0, {{1, 1}});
  }
  Instruction& inst() { return b.at(indirect); }
};

std::vector<float> table_values() {
  std::vector<float> t(kRows * kCols);
  for (size_t i = 0; i < t.size(); ++i) t[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return t;
}

TEST(NeuronIndirectDma, GatherPicksARowPerPartition) {
  IndirectProgram p(/*scatter=*/false);
  const std::vector<int32_t> ids = {7, 0, 7, 9};
  HbmContents hbm = {bytes_of(table_values()), bytes_of(ids),
                     std::vector<std::byte>(kTokens * kCols * 4)};
  Simulator sim;
  ASSERT_TRUE(sim.run(p.b.program(), hbm).ok());
  const std::vector<float> out = values_of<float>(hbm[2]), table = table_values();
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t c = 0; c < kCols; ++c)
      EXPECT_EQ(out[t * kCols + c], table[ids[t] * kCols + c]) << t << "," << c;
}

TEST(NeuronIndirectDma, ScatterAddAddsRepeatedRowsInPartitionOrder) {
  IndirectProgram p(/*scatter=*/true);
  const std::vector<int32_t> ids = {3, 5, 3, 3};
  // Values whose sum depends on the order in fp32: 1e8 + 1 + (-1e8) ...
  std::vector<float> source(kTokens * kCols);
  for (int64_t t = 0; t < kTokens; ++t)
    for (int64_t c = 0; c < kCols; ++c)
      source[t * kCols + c] = t == 0 ? 1e8f : t == 1 ? 2.0f : t == 2 ? 1.0f : -1e8f;
  HbmContents hbm = {bytes_of(table_values()), bytes_of(ids), bytes_of(source)};
  Simulator sim;
  ASSERT_TRUE(sim.run(p.b.program(), hbm).ok());
  std::vector<float> want = table_values();
  for (int64_t t = 0; t < kTokens; ++t) // partition (token) order, one fp32 add each
    for (int64_t c = 0; c < kCols; ++c) want[ids[t] * kCols + c] += source[t * kCols + c];
  EXPECT_EQ(values_of<float>(hbm[0]), want);
}

TEST(NeuronIndirectDma, IndexOutOfRangeIsAnError) {
  for (int32_t bad : {10, -1}) {
    IndirectProgram p(/*scatter=*/false);
    const std::vector<int32_t> ids = {1, 2, bad, 3};
    HbmContents hbm = {bytes_of(table_values()), bytes_of(ids),
                       std::vector<std::byte>(kTokens * kCols * 4)};
    Simulator sim;
    const absl::Status s = sim.run(p.b.program(), hbm).status();
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(std::string(s.message()), HasSubstr("#1 Sync dma_indirect"));
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("partition 2 has row index " + std::to_string(bad)));
    EXPECT_THAT(std::string(s.message()), HasSubstr("(10 rows)"));
  }
}

TEST(NeuronIndirectDma, ValidProgramsPass) {
  for (bool scatter : {false, true}) {
    IndirectProgram p(scatter);
    EXPECT_TRUE(validate(p.b.program()).ok()) << validate(p.b.program());
  }
}

TEST(NeuronIndirectDma, IndexMustBeOneInt32PerPartition) {
  IndirectProgram p(false);
  p.inst().srcs[1].dtype = DType::f32;
  expect_breach(p.b.program(), "indirect", "#1 Sync dma_indirect", "is not an SBUF int32 [4, 1]");
  IndirectProgram q(false);
  q.inst().srcs[1].partitions = 2;
  expect_breach(q.b.program(), "indirect", "#1 Sync dma_indirect", "one row index per partition");
}

TEST(NeuronIndirectDma, OneSideIsHbmTheOtherSbuf) {
  IndirectProgram p(false);
  p.inst().dst = p.inst().srcs[0]; // HBM to HBM
  expect_breach(p.b.program(), "indirect", "#1 Sync dma_indirect", "dst HBM and src HBM");
}

TEST(NeuronIndirectDma, RowLengthAndOneRowBounds) {
  IndirectProgram p(false);
  p.inst().srcs[0].partition_stride = 0;
  expect_breach(p.b.program(), "indirect", "#1 Sync dma_indirect", "row length");
  // One row's extent is checked statically: columns past the table's end.
  IndirectProgram q(false);
  q.inst().srcs[0].offset = kRows * kCols;
  expect_breach(q.b.program(), "bounds", "#1 Sync dma_indirect", "outside HBM tensor 'table'");
}

TEST(NeuronIndirectDma, AccumulateOnlyIntoHbm) {
  IndirectProgram p(false);
  p.inst().accumulate = true;
  expect_breach(p.b.program(), "indirect", "#1 Sync dma_indirect", "accumulate adds into HBM");
}

TEST(NeuronIndirectDma, CostsAsADmaAndTwiceForReadModifyWrite) {
  IndirectProgram gather(false), scatter(true);
  const Instruction& g = gather.inst();
  const Instruction& s = scatter.inst();
  EXPECT_EQ(dma_bytes(g), kTokens * kCols * 4.0);
  EXPECT_EQ(dma_bytes(s), 2.0 * kTokens * kCols * 4.0); // reads and writes HBM
  absl::StatusOr<CostReport> r = estimate_cost(scatter.b.program());
  ASSERT_TRUE(r.ok()) << r.status();
  const CostParams params;
  // Each token's 24-byte row is one descriptor, charged a 64-byte burst,
  // read and written: 2 x 4 x 64 B.
  EXPECT_NEAR(r->timing[scatter.indirect].end_ns - r->timing[scatter.indirect].start_ns,
              params.dma_fixed_ns + 2.0 * kTokens * 64 / params.dma_engine_bytes_per_ns, 1e-6);
}

} // namespace
} // namespace mstep::neuron
