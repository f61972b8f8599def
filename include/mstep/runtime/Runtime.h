// The public runtime entry points: cutting and running the step graph,
// seeding the RNG, choosing the default device.
#pragma once

#include <cstdint>

#include "mstep/core/Device.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep {

/// Cuts one graph from every live tensor that has pending ops, looks it
/// up in the graph cache (compiling on a miss) and runs it. Afterwards
/// every live tensor is materialized. Throws mstep::Error on failure; the
/// pending tensors are then left pending, so nothing is lost.
void mark_step();

/// The graph the next mark_step() would cut, without running it (for
/// tests, tools and benchmarks: import it, dump it, compile it).
TraceGraph pending_graph();

/// Seeds the counter-based RNG (Philox) used by rand, randn, dropout and
/// attention dropout, and resets its offset to 0.
void manual_seed(uint64_t seed);

/// Device used by creation ops that are not given one.
void set_default_device(Device device);
Device default_device();

}  // namespace mstep
