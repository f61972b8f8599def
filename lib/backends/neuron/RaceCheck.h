// RaceCheck: the validator's rule `race`. Two instructions on different
// completion queues (TileInstruction.h: the compute engines, the DMA
// engines) that touch overlapping memory, at least one of them writing,
// must be ordered by semaphores; otherwise the result on hardware depends
// on timing (the simulator runs one order and would hide it).
//
// Happens-before is the cost model's and the simulator's semantics, as
// vector clocks (one component per completion queue, counting the
// instructions known complete):
//   - a compute engine starts an instruction once its previous one is done;
//   - Sync issues DMAs in program order, each once its waits are met, and
//     a DMA engine starts a transfer once its previous one is done: a
//     transfer follows its own waits and every earlier Sync instruction's
//     waits, but not the transfers of other DMA engines;
//   - a signal counts when its instruction completes (a DMA: its transfer);
//     a wait for count c on semaphore s follows whichever c signals of s
//     complete first, so it is known to follow the k-th signaller of queue
//     q only when k = c minus the signals of s on all other queues > 0.
// Footprints: SBUF/PSUM partitions x bytes of each partition (by address,
// so allocations that reuse bytes are compared too), HBM elements of one
// tensor; the free dims expand into runs (a bounding range past 64K
// runs), dma_indirect's HBM side is the whole tensor (its rows are picked
// at run time).
//
// Cost: per memory region and queue the accesses in queue order; an access
// is compared only with the accesses of other queues it is unordered with,
// a contiguous window of each queue found by binary search, so a program
// without races costs about (accesses x queues touching the region x log).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

/// OK, or the first race found, naming both instructions, the memory and
/// the overlapping range. `order` is an order in which the program runs
/// (execution_order()): every wait after the signals that meet it. The
/// program has passed the validator's other rules (operands in bounds,
/// semaphores that exist).
absl::Status check_races(const TileProgram& program, absl::Span<const int64_t> order);

} // namespace mstep::neuron
