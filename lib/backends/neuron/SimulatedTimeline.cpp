// SimulatedTimeline (SimulatedTimeline.h): per-run figures and the trace.
#include "lib/backends/neuron/SimulatedTimeline.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "lib/runtime/RuntimeInternal.h"

namespace mstep::neuron {

namespace {

constexpr absl::string_view kDevice = "neuron (simulated)";
// Track order in the trace: run, program, the engines, the DMA queues.
constexpr int kRunTrack = 0, kProgramTrack = 1, kEngineTrack = 2, kDmaTrack = 10;

/// End of the last run placed on the trace (microseconds, trace time base).
std::mutex g_clock_mutex;
double g_last_end_us = 0;

/// Where a run of `us` microseconds starts on the trace: now, or after the
/// previous run if that ends later.
double place_run(internal::DeviceTraceSink& sink, double us) {
  std::lock_guard<std::mutex> lock(g_clock_mutex);
  const double start = std::max(sink.now_us(), g_last_end_us);
  g_last_end_us = start + us;
  return start;
}

void trace_program(internal::DeviceTraceSink& sink, const TileProgram& program,
                   const CostReport& report, double t0_us) {
  const CostParams params;
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction& inst = program.instructions[i];
    const InstructionTiming& tm = report.timing[i];
    const absl::string_view name = opcode_name(inst.opcode);
    const double busy_ns = instruction_cycles(inst, params) / engine_ghz(inst.engine, params);
    const Engine engine = inst.engine;
    sink.slice(kDevice, engine_name(engine), kEngineTrack + static_cast<int>(engine), name,
               t0_us + tm.start_ns / 1e3, busy_ns / 1e3);
    if (inst.opcode == Opcode::dma_copy || inst.opcode == Opcode::dma_indirect) {
      const double transfer_ns = dma_transfer_bytes(inst, params) / params.dma_engine_bytes_per_ns;
      sink.slice(kDevice, absl::StrCat("DMA ", inst.dma_engine), kDmaTrack + inst.dma_engine, name,
                 t0_us + (tm.end_ns - transfer_ns) / 1e3, transfer_ns / 1e3);
    }
  }
}

} // namespace

void add_program(SimulatedTime& t, const CostReport& r) {
  ++t.programs;
  t.runs = 1;
  t.seconds += r.total_ns * 1e-9;
  for (int e = 0; e < kNumEngines; ++e)
    t.busy_seconds[std::string(engine_name(static_cast<Engine>(e)))] += r.busy_ns[e] * 1e-9;
  t.busy_seconds["DMA"] += r.dma_busy_ns / kDmaEngines * 1e-9;
  t.busy_seconds["HBM"] += r.hbm_busy_ns * 1e-9;
  t.tensor_peak_seconds += r.tensor_utilization * r.total_ns * 1e-9;
}

void SimulatedTimeline::add(std::string name, const TileProgram& program, CostReport report) {
  add_program(per_run_, report);
  programs_.push_back({std::move(name), &program, std::move(report)});
}

void SimulatedTimeline::record_run() const {
  if (programs_.empty()) return;
  internal::record_simulated_run(per_run_);
  internal::DeviceTraceSink* sink = internal::device_trace_sink();
  if (!sink) return;
  const double run_us = per_run_.seconds * 1e6;
  double t = place_run(*sink, run_us);
  sink->slice(kDevice, "run", kRunTrack,
              absl::StrFormat("run: %d programs, Tensor utilization %.1f%%, bottleneck %s",
                              programs_.size(), 100 * per_run_.tensor_utilization(),
                              per_run_.bottleneck()),
              t, run_us);
  for (const Entry& e : programs_) {
    sink->slice(kDevice, "program", kProgramTrack, e.name, t, e.report.total_ns / 1e3);
    trace_program(*sink, *e.program, e.report, t);
    t += e.report.total_ns / 1e3;
  }
}

} // namespace mstep::neuron
