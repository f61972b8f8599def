// The simulated timeline of a neuron executable's run: its tile programs
// one after another (in graph order; host fallbacks take no simulated
// time), each as the cost model scheduled it. Each run adds its figures to
// metrics().simulated and, while a Chrome trace is recorded, its timeline
// to the device "neuron (simulated)": a track per engine (Tensor, Vector,
// Scalar, GpSimd, Sync) and per DMA queue used ("DMA 0".."DMA 15"), each
// instruction a slice (a dma_copy's transfer on its queue, its trigger on
// Sync), plus a "program" track (a slice per tile program, named by its op)
// and a "run" track (a slice per executable run). The timeline is placed
// at the host time of the run, or at the end of the previous one if that
// is later, so runs never overlap.
#pragma once

#include <string>
#include <vector>

#include "lib/backends/neuron/CostModel.h"
#include "mstep/runtime/Metrics.h"

namespace mstep::neuron {

/// Adds one program's figures (its cost report) to `t` (and sets runs to 1).
void add_program(SimulatedTime& t, const CostReport& report);

class SimulatedTimeline {
public:
  /// Appends a program; `program` must outlive this timeline.
  void add(std::string name, const TileProgram& program, CostReport report);
  /// One run's figures (runs = 1 when there is a program, else 0).
  const SimulatedTime& per_run() const { return per_run_; }
  size_t size() const { return programs_.size(); }
  /// Records one run: metrics().simulated, and the trace when one is on.
  void record_run() const;

private:
  struct Entry {
    std::string name;
    const TileProgram* program;
    CostReport report;
  };
  std::vector<Entry> programs_;
  SimulatedTime per_run_;
};

} // namespace mstep::neuron
