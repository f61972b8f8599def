// The examples' simulated-device line: on a device with a cost model
// (neuron), the simulated time per step and the engines' figures over a
// window of steps, printed next to the host-measured step time.
#pragma once

#include <cstdint>
#include <cstdio>

#include "mstep/runtime/Metrics.h"

namespace mstep::examples {

/// Prints "simulated step_ms ..." (and the host fallbacks per step, whose
/// time the simulation leaves out) for the `steps` steps between the metrics
/// snapshots `start` and `end`; nothing when no simulated device ran.
inline void print_simulated_step(const Metrics& start, const Metrics& end, int64_t steps) {
  const SimulatedTime sim = end.simulated.minus(start.simulated);
  if (sim.runs == 0 || steps <= 0) return;
  // Ops that ran on the host take no simulated time: say how many.
  std::printf("simulated step_ms %.3f  (NeuronCore cost model; host fallbacks not included: "
              "%.1f ops/step; %s)\n",
              1e3 * sim.seconds / steps, double(end.fallbacks - start.fallbacks) / steps,
              sim.summary().c_str());
}

} // namespace mstep::examples
