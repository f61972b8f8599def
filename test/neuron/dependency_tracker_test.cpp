// DependencyTracker: the semaphores it writes from what instructions read
// and write. A DMA load -> Vector op -> DMA store chain gets a wait per
// edge; reloading a tile waits for its readers (write after read);
// instructions on one queue (a compute engine, or one DMA engine) get none
// between them; partial writes of one buffer do not wait for each other,
// but its next reader waits for all of them; a scale column is a read.
#include <algorithm>

#include "NeuronTestPrograms.h"
#include "lib/backends/neuron/DependencyTracker.h"

namespace mstep::neuron {
namespace {

/// The instructions `index` waits on: for a wait (s, n), the n-th
/// instruction in program order that signals s (its queue completes in
/// program order, so it is the one the wait is for). Sorted.
std::vector<int64_t> waits_on(const TileProgram& p, int64_t index) {
  std::vector<int64_t> out;
  for (const SemaphoreWait& w : p.instructions[index].waits) {
    int32_t seen = 0;
    for (int64_t i = 0; i < static_cast<int64_t>(p.instructions.size()); ++i)
      for (int32_t s : p.instructions[i].signals)
        if (s == w.semaphore && ++seen == w.value) out.push_back(i);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Fixture {
  TileBuilder b{"deps"};
  DependencyTracker deps{b};
  int32_t x = b.hbm_tensor("x", DType::f32, 128 * 8), y = b.hbm_tensor("y", DType::f32, 128 * 8);
  int32_t in = b.allocate(BufferKind::sbuf, 32, "in"),
          out = b.allocate(BufferKind::sbuf, 32, "out");

  /// [128, w] of allocation t from column `col`.
  static AccessPattern tile(int32_t t, int64_t w = 8, int64_t col = 0) {
    return tile_pattern(BufferKind::sbuf, t, DType::f32, 0, 128, col, {{w, 1}});
  }
  AccessPattern rows(int32_t t, int64_t w = 8, int64_t col = 0) const {
    return hbm_rows(t, DType::f32, 8, 0, 128, col, w);
  }
};

TEST(NeuronDependencyTracker, ChainsLoadComputeStoreAndReuse) {
  Fixture f;
  TileBuilder& b = f.b;
  const int64_t load = f.deps.track(b.dma_copy(f.tile(f.in), f.rows(f.x)));
  const int64_t op1 =
      f.deps.track(b.tensor_scalar(Engine::vector, f.tile(f.out), f.tile(f.in), AluOp::add, 1));
  const int64_t op2 = f.deps.track(
      b.tensor_scalar(Engine::vector, f.tile(f.out), f.tile(f.out), AluOp::multiply, 2));
  const int64_t store = f.deps.track(b.dma_copy(f.rows(f.y), f.tile(f.out)));
  const int64_t reload = f.deps.track(b.dma_copy(f.tile(f.in), f.rows(f.x)));
  const int64_t op3 =
      f.deps.track(b.activation(f.tile(f.out), f.tile(f.in), ActivationFunction::exp));
  const TileProgram& p = b.program();
  EXPECT_TRUE(waits_on(p, load).empty());
  EXPECT_EQ(waits_on(p, op1), std::vector<int64_t>{load});  // read after write
  EXPECT_TRUE(waits_on(p, op2).empty());                    // same engine: in order
  EXPECT_EQ(waits_on(p, store), std::vector<int64_t>{op2}); // the last writer
  // Another DMA engine: write after write, and after read.
  EXPECT_EQ(waits_on(p, reload), (std::vector<int64_t>{load, op1}));
  // Scalar writes `out`: after Vector's last write and the store's read.
  EXPECT_EQ(waits_on(p, op3), (std::vector<int64_t>{op2, store, reload}));
  EXPECT_TRUE(validate(p).ok()) << validate(p);
}

// One DMA engine completes its transfers in order: a store of what a load
// on the same engine brought in needs no wait; on another engine it does.
TEST(NeuronDependencyTracker, SameDmaEngineIsInOrder) {
  Fixture f;
  TileBuilder& b = f.b;
  const int64_t load = f.deps.track(b.dma_copy(f.tile(f.in), f.rows(f.x)));
  const int64_t same = b.dma_copy(f.rows(f.y), f.tile(f.in));
  b.at(same).dma_engine = b.at(load).dma_engine;
  f.deps.track(same);
  // Into another tensor: two DMA engines storing into y would race.
  const int32_t z = b.hbm_tensor("z", DType::f32, 128 * 8);
  const int64_t other = b.dma_copy(f.rows(z), f.tile(f.in));
  b.at(other).dma_engine = (b.at(load).dma_engine + 1) % kDmaEngines;
  f.deps.track(other);
  EXPECT_TRUE(waits_on(b.program(), same).empty());
  EXPECT_EQ(waits_on(b.program(), other), std::vector<int64_t>{load});
  EXPECT_TRUE(validate(b.program()).ok()) << validate(b.program());
}

// Two DMAs fill the halves of `in` (partial writes): they run in parallel,
// the reader waits for both, and the next fill waits for that reader and,
// a new generation, for the earlier fills.
TEST(NeuronDependencyTracker, PartialWritesFillInParallel) {
  Fixture f;
  TileBuilder& b = f.b;
  const int64_t a = f.deps.track(b.dma_copy(f.tile(f.in, 4, 0), f.rows(f.x, 4, 0)), true);
  const int64_t c = f.deps.track(b.dma_copy(f.tile(f.in, 4, 4), f.rows(f.x, 4, 4)), true);
  const int64_t op =
      f.deps.track(b.tensor_scalar(Engine::vector, f.tile(f.out), f.tile(f.in), AluOp::add, 1));
  const int64_t refill = f.deps.track(b.dma_copy(f.tile(f.in, 4, 0), f.rows(f.x, 4, 0)), true);
  EXPECT_TRUE(waits_on(b.program(), c).empty());
  EXPECT_EQ(waits_on(b.program(), op), (std::vector<int64_t>{a, c}));
  EXPECT_EQ(waits_on(b.program(), refill), (std::vector<int64_t>{a, c, op}));
  EXPECT_TRUE(validate(b.program()).ok()) << validate(b.program());
}

// An activation's per-partition scale column is read: it waits for the
// instruction (on another engine) that wrote it.
TEST(NeuronDependencyTracker, ScaleColumnIsARead) {
  Fixture f;
  TileBuilder& b = f.b;
  const int64_t load = f.deps.track(b.dma_copy(f.tile(f.in), f.rows(f.x)));
  const int64_t col = f.deps.track(
      b.tensor_scalar(Engine::vector, f.tile(f.out, 1), f.tile(f.in, 1), AluOp::add, 1));
  const int32_t z = b.allocate(BufferKind::sbuf, 32, "z");
  const int64_t act = b.activation(f.tile(z), f.tile(f.in), ActivationFunction::identity);
  b.at(act).scale_column = f.tile(f.out, 1);
  f.deps.track(act);
  EXPECT_EQ(waits_on(b.program(), act), (std::vector<int64_t>{load, col}));
  EXPECT_TRUE(validate(b.program()).ok()) << validate(b.program());
}

} // namespace
} // namespace mstep::neuron
