// The cpu backend's collectives (mstep.all_reduce, all_gather, broadcast,
// reduce_scatter) as two calls: `start` at the node's place issues MPI's
// nonblocking call on the arena (lib/runtime/distributed/Communicator.h)
// and returns; `wait`, which the executable places right before the first
// call that reads the result (or at the end of the run), completes it. The
// kernels in between overlap the transfer; the executable lets MPI make
// progress between them (progress()).
#pragma once

#include <memory>

#include "lib/backends/cpu/CpuKernel.h"
#include "lib/runtime/distributed/Communicator.h"

namespace mstep::cpu {

struct CollectiveKernels {
  std::unique_ptr<CpuKernel> start;  // operands: the input; results: the result
  std::unique_ptr<CpuKernel> wait;   // operand: the result; no results; has_effects()
  std::shared_ptr<dist::CollectiveRun> run;
};

/// The two calls of a collective node.
CollectiveKernels make_collective_kernels(const KernelRequest& request);

}  // namespace mstep::cpu
