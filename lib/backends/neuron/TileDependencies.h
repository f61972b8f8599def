// TileDependencies: semaphores written for a program from what its
// instructions read and write. After each instruction is emitted, track()
// makes it wait for the instructions it depends on through an SBUF/PSUM
// allocation: the last writer of what it reads (read after write), and the
// last writer and the readers since of what it writes (write after write,
// write after read). Instructions on one compute engine run in program
// order and need no semaphore between them; DMA transfers complete in any
// order, so a dependency that involves the Sync queue always gets one.
// Granularity is the allocation (not byte ranges): conservative, never
// missing an order the data needs.
#pragma once

#include <array>
#include <vector>

#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron {

class TileDependencies {
public:
  explicit TileDependencies(TileBuilder& builder) : b_(builder) {}

  /// Adds instruction `index`'s waits (and its producers' signals); returns index.
  int64_t track(int64_t index);

private:
  struct Uses {
    int64_t writer = -1;
    /// The last reader on each compute engine since the last write, -1 none.
    std::array<int64_t, kNumEngines> reader{-1, -1, -1, -1, -1};
    /// DMA readers since the last write (each its own completion).
    std::vector<int64_t> dma_readers;
  };
  void depend(int64_t index, int64_t on);
  int32_t semaphore_of(int64_t index);

  TileBuilder& b_;
  std::vector<Uses> uses_;         ///< by allocation id
  std::vector<int32_t> semaphore_; ///< by instruction: its completion semaphore, -1 none
};

} // namespace mstep::neuron
