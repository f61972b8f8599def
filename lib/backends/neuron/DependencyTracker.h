// DependencyTracker: adds the semaphore waits an instruction needs, from
// the on-chip allocations (SBUF/PSUM) it reads and writes, so a program
// builder only chooses buffers. Every instruction signals its queue's
// semaphore (one per compute engine, one per DMA engine: each completes its
// instructions in program order, as the cost model times them: a DMA
// engine's transfers run one after another), and an instruction waits, per
// other queue, for the last instruction there it depends on (same queue:
// no wait, program order suffices):
//   read  -> the writes of the allocation since it was last overwritten;
//   write -> those writes and the reads since (WAR, WAW).
// A partial write (a region disjoint from the allocation's other pending
// writes, e.g. one of several DMAs filling a buffer) does not wait for
// those writes, only for the reads, which start a new generation.
// Dependencies are per allocation, not per byte range: conservative.
#pragma once

#include <array>
#include <vector>

#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron {

class DependencyTracker {
public:
  explicit DependencyTracker(TileBuilder& b);

  /// Adds instruction `index`'s waits and its signal; call right after
  /// emitting it, in program order. Returns `index`.
  int64_t track(int64_t index, bool partial_write = false);

private:
  static constexpr int kQueues = kCompletionQueues; ///< Tensor, Vector, Scalar, GpSimd, DMA 0..15

  struct Uses {
    std::vector<int64_t> writes, reads;
  };

  TileBuilder& b_;
  std::array<int32_t, kQueues> semaphore_{};
  std::array<int32_t, kQueues> issued_{}; ///< instructions per queue so far
  std::vector<int32_t> queue_;            ///< per instruction
  std::vector<int32_t> ordinal_;          ///< per instruction: 1-based place in its queue
  std::vector<Uses> uses_;                ///< per allocation
};

} // namespace mstep::neuron
