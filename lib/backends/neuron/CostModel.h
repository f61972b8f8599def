// The cost model: a discrete-event schedule of a validated tile program over
// the five engine queues, the 16 DMA engines, HBM bandwidth, semaphores and
// the v2 shared ports (Vector and GpSimd take turns on SBUF, Vector and
// Scalar on PSUM). Each step starts, among the queue heads whose waits are
// met, the one that can start earliest:
//   1. start = max(engine free, each wait's satisfying signal, shared port free,
//      and for a Vector/Scalar instruction reading an allocation the one
//      before it on that engine wrote: that one's start + the dependent
//      latency);
//   2. compute engines end at start + cycles / clock (InstructionCost.h);
//   3. a dma_copy holds Sync for its trigger; its transfer starts at
//      max(start + dma_fixed_ns, DMA engine free, HBM free), lasts bytes /
//      engine bandwidth and holds HBM for bytes / HBM bandwidth (bytes as
//      dma_transfer_bytes counts them: at least a burst per descriptor);
//   4. signals count at the end (the transfer's end for DMA).
// A wait for value v is met at the v-th earliest end among its semaphore's
// scheduled signals.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/neuron/CostParams.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

struct InstructionTiming {
  double start_ns = 0;
  double end_ns = 0;
  /// The instruction whose end set this start (-1: none, it started at 0).
  int64_t bound_by = -1;
};

struct CostReport {
  double total_ns = 0;
  /// Busy time of each engine (Sync: DMA triggers only).
  std::array<double, kNumEngines> busy_ns{};
  /// Transfer time summed over the DMA engines, and per DMA engine.
  double dma_busy_ns = 0;
  std::array<double, kDmaEngines> dma_engine_busy_ns{};
  /// Time HBM bandwidth is taken (bytes / HBM bandwidth, summed).
  double hbm_busy_ns = 0;
  /// Matmul FLOPs / (peak bf16 FLOP/s x total time).
  double tensor_utilization = 0;
  /// Instructions from the first to the last on the critical path.
  std::vector<int64_t> critical_path;
  std::vector<InstructionTiming> timing;

  double busy_fraction(Engine e) const {
    return total_ns > 0 ? busy_ns[static_cast<int>(e)] / total_ns : 0;
  }
  /// Busy fraction of the 16 DMA engines together.
  double dma_busy_fraction() const;
  /// The busiest of the engines, "DMA" (the busiest DMA engine) and "HBM".
  std::string bottleneck() const;
  /// Total time, busy fractions, utilization, bottleneck, critical-path length.
  std::string summary() const;
};

/// Validates `program`, then schedules it.
absl::StatusOr<CostReport> estimate_cost(const TileProgram& program, const CostParams& params = {});

} // namespace mstep::neuron
