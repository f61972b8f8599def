// TileDependencies: the semaphores it writes from what instructions read
// and write. A DMA load -> Vector op -> DMA store chain gets a wait per
// edge; reloading a tile waits for its readers (write after read);
// instructions on one compute engine get none between them.
#include <algorithm>

#include "NeuronTestPrograms.h"
#include "lib/backends/neuron/TileDependencies.h"

namespace mstep::neuron {
namespace {

/// The instructions `index` waits on: the ones that signal its semaphores.
std::vector<int64_t> waits_on(const TileProgram& p, int64_t index) {
  std::vector<int64_t> out;
  for (const SemaphoreWait& w : p.instructions[index].waits)
    for (int64_t i = 0; i < static_cast<int64_t>(p.instructions.size()); ++i)
      for (int32_t s : p.instructions[i].signals)
        if (s == w.semaphore) out.push_back(i);
  return out;
}

TEST(NeuronTileDependencies, ChainsLoadComputeStoreAndReuse) {
  TileBuilder b("deps");
  TileDependencies deps(b);
  const int32_t x = b.hbm_tensor("x", DType::f32, 128 * 8),
                y = b.hbm_tensor("y", DType::f32, 128 * 8);
  const int32_t in = b.allocate(BufferKind::sbuf, 32, "in"),
                out = b.allocate(BufferKind::sbuf, 32, "out");
  auto tile = [](int32_t t) {
    return tile_pattern(BufferKind::sbuf, t, DType::f32, 0, 128, 0, {{8, 1}});
  };
  const int64_t load = deps.track(b.dma_copy(tile(in), hbm_rows(x, DType::f32, 8, 0, 128, 0, 8)));
  const int64_t op1 =
      deps.track(b.tensor_scalar(Engine::vector, tile(out), tile(in), AluOp::add, 1));
  const int64_t op2 =
      deps.track(b.tensor_scalar(Engine::vector, tile(out), tile(out), AluOp::multiply, 2));
  const int64_t store = deps.track(b.dma_copy(hbm_rows(y, DType::f32, 8, 0, 128, 0, 8), tile(out)));
  const int64_t reload = deps.track(b.dma_copy(tile(in), hbm_rows(x, DType::f32, 8, 0, 128, 0, 8)));
  const int64_t op3 = deps.track(b.activation(tile(out), tile(in), ActivationFunction::exp));
  const TileProgram& p = b.program();
  EXPECT_TRUE(waits_on(p, load).empty());
  EXPECT_EQ(waits_on(p, op1), std::vector<int64_t>{load});  // read after write
  EXPECT_TRUE(waits_on(p, op2).empty());                    // same engine: in order
  EXPECT_EQ(waits_on(p, store), std::vector<int64_t>{op2}); // the last writer
  // Write after write (DMAs complete in any order) and after read.
  EXPECT_EQ(waits_on(p, reload), (std::vector<int64_t>{load, op1}));
  // Scalar writes `out`: after Vector's last write and the store's read.
  std::vector<int64_t> w3 = waits_on(p, op3);
  std::sort(w3.begin(), w3.end());
  EXPECT_EQ(w3, (std::vector<int64_t>{op2, store, reload}));
  EXPECT_TRUE(validate(p).ok()) << validate(p);
}

} // namespace
} // namespace mstep::neuron
