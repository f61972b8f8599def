// ExecutionOrder: one sequential order in which a tile program's
// instructions can run: each engine's queue in order, an instruction only
// once every semaphore it waits on has been signalled often enough (each
// instruction counted complete when it runs). Among the ready engines the
// lowest program index goes first, so a program that needs no waiting runs
// in program order. A program whose queues block each other is a deadlock.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// The order, or an error naming the blocked instruction at the head of
/// each stuck queue, the semaphore and its count.
absl::StatusOr<std::vector<int64_t>> execution_order(const TileProgram& program);

} // namespace mstep::neuron
