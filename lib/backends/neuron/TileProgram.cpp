// TileProgram's per-engine queues.
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

std::array<std::vector<int64_t>, kNumEngines> TileProgram::engine_queues() const {
  std::array<std::vector<int64_t>, kNumEngines> queues;
  for (int64_t i = 0; i < static_cast<int64_t>(instructions.size()); ++i)
    queues[static_cast<int>(instructions[i].engine)].push_back(i);
  return queues;
}

} // namespace mstep::neuron
