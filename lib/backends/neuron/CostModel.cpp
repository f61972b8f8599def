// estimate_cost: the list scheduler of CostModel.h and the report.
#include "lib/backends/neuron/CostModel.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/backends/neuron/InstructionCost.h"
#include "lib/backends/neuron/Validator.h"

namespace mstep::neuron {

namespace {

/// A timeline resource: free from `free_ns`, last held by `holder`.
struct Resource {
  double free_ns = 0;
  int64_t holder = -1;
};

/// Raises `t` to `r`'s free time, remembering who bound it.
void bind(double& t, int64_t& by, const Resource& r) {
  if (r.free_ns > t) {
    t = r.free_ns;
    by = r.holder;
  }
}

bool touches(const Instruction& inst, BufferKind kind) {
  if (inst.dst.kind == kind) return true;
  for (const AccessPattern& s : inst.srcs)
    if (s.kind == kind) return true;
  return (inst.bias && inst.bias->kind == kind) || (inst.accum && inst.accum->kind == kind);
}

/// The shared ports an instruction holds (v2): 0 SBUF for Vector/GpSimd, 1 PSUM for Vector/Scalar.
std::array<bool, 2> ports(const Instruction& inst) {
  const bool vg = inst.engine == Engine::vector || inst.engine == Engine::gpsimd;
  const bool vs = inst.engine == Engine::vector || inst.engine == Engine::scalar;
  return {vg && touches(inst, BufferKind::sbuf), vs && touches(inst, BufferKind::psum)};
}

/// Whether `next` reads an on-chip allocation `prev` writes.
bool reads_what_it_wrote(const Instruction& prev, const Instruction& next) {
  auto written = [&](const AccessPattern& ap) {
    auto same = [&](const AccessPattern& w) {
      return w.kind != BufferKind::hbm && w.kind == ap.kind && w.buffer == ap.buffer;
    };
    return same(prev.dst) || (prev.accum && same(*prev.accum));
  };
  for (const AccessPattern& s : next.srcs)
    if (written(s)) return true;
  return next.bias && written(*next.bias);
}

/// The dependent-instruction latency of `engine` in cycles, 0 where none.
double dependent_cycles(Engine engine, const CostParams& p) {
  switch (engine) {
  case Engine::vector:
    return p.vector_dependent_cycles;
  case Engine::scalar:
    return p.scalar_dependent_cycles;
  default:
    return 0;
  }
}

} // namespace

double CostReport::dma_busy_fraction() const {
  return total_ns > 0 ? dma_busy_ns / (kDmaEngines * total_ns) : 0;
}

std::string CostReport::bottleneck() const {
  int best = 0;
  for (int e = 1; e < kNumEngines; ++e)
    if (busy_ns[e] > busy_ns[best]) best = e;
  const double dma = *std::max_element(dma_engine_busy_ns.begin(), dma_engine_busy_ns.end());
  if (hbm_busy_ns > busy_ns[best] && hbm_busy_ns >= dma) return "HBM";
  if (dma > busy_ns[best]) return "DMA";
  return std::string(engine_name(static_cast<Engine>(best)));
}

std::string CostReport::summary() const {
  std::string s = absl::StrFormat("%.3f us; busy:", total_ns / 1000);
  for (int e = 0; e < kNumEngines; ++e)
    absl::StrAppendFormat(&s, " %s %.1f%%", engine_name(static_cast<Engine>(e)),
                          100 * busy_fraction(static_cast<Engine>(e)));
  absl::StrAppendFormat(&s,
                        " DMA %.1f%% HBM %.1f%%; Tensor utilization %.1f%%; bottleneck %s; "
                        "critical path %d instructions",
                        100 * dma_busy_fraction(),
                        total_ns > 0 ? 100 * hbm_busy_ns / total_ns : 0.0, 100 * tensor_utilization,
                        bottleneck(), static_cast<int>(critical_path.size()));
  return s;
}

absl::StatusOr<CostReport> estimate_cost(const TileProgram& program, const CostParams& params) {
  if (absl::Status s = validate(program); !s.ok()) return s;
  const auto queues = program.engine_queues();
  const int64_t n = static_cast<int64_t>(program.instructions.size());
  CostReport report;
  report.timing.resize(n);
  std::array<size_t, kNumEngines> head{};
  std::array<Resource, kNumEngines> engine{};
  std::array<Resource, kDmaEngines> dma{};
  std::array<Resource, 2> port{};
  Resource hbm;
  // Per semaphore: the scheduled signals' (end, instruction), sorted by end.
  std::vector<std::vector<std::pair<double, int64_t>>> signals(program.num_semaphores);
  double flops = 0;

  for (int64_t done = 0; done < n; ++done) {
    int best = -1;
    double best_start = 0;
    int64_t best_by = -1;
    for (int e = 0; e < kNumEngines; ++e) {
      if (head[e] == queues[e].size()) continue;
      const Instruction& inst = program.instructions[queues[e][head[e]]];
      double t = 0;
      int64_t by = -1;
      bind(t, by, engine[e]);
      bool ready = true;
      for (const SemaphoreWait& w : inst.waits) {
        const auto& sig = signals[w.semaphore];
        if (w.value <= 0) continue;
        if (static_cast<int64_t>(sig.size()) < w.value) {
          ready = false;
          break;
        }
        bind(t, by, Resource{sig[w.value - 1].first, sig[w.value - 1].second});
      }
      if (!ready) continue;
      const auto held = ports(inst);
      for (int k = 0; k < 2; ++k)
        if (held[k]) bind(t, by, port[k]);
      if (head[e] > 0 && dependent_cycles(inst.engine, params) > 0) {
        const int64_t prev = queues[e][head[e] - 1];
        if (reads_what_it_wrote(program.instructions[prev], inst))
          bind(t, by,
               Resource{report.timing[prev].start_ns +
                            dependent_cycles(inst.engine, params) / engine_ghz(inst.engine, params),
                        prev});
      }
      if (best < 0 || t < best_start) {
        best = e;
        best_start = t;
        best_by = by;
      }
    }
    // The validator proved the program free of deadlock.
    const int64_t i = queues[best][head[best]++];
    const Instruction& inst = program.instructions[i];
    InstructionTiming& tm = report.timing[i];
    tm.start_ns = best_start;
    tm.bound_by = best_by;
    const double busy = instruction_cycles(inst, params) / engine_ghz(inst.engine, params);
    engine[best] = {best_start + busy, i};
    report.busy_ns[best] += busy;
    tm.end_ns = best_start + busy;
    const auto held = ports(inst);
    for (int k = 0; k < 2; ++k)
      if (held[k]) port[k] = {tm.end_ns, i};
    if (inst.opcode == Opcode::dma_copy || inst.opcode == Opcode::dma_indirect) {
      // Descriptors shorter than a memory burst cost a burst (element-wise DMAs).
      const double bytes = dma_transfer_bytes(inst, params);
      double t = best_start + params.dma_fixed_ns;
      int64_t by = best_by;
      bind(t, by, dma[inst.dma_engine]);
      const bool uses_hbm =
          inst.dst.kind == BufferKind::hbm || inst.srcs[0].kind == BufferKind::hbm;
      if (uses_hbm) bind(t, by, hbm);
      const double transfer = bytes / params.dma_engine_bytes_per_ns;
      tm.end_ns = t + transfer;
      if (by != best_by) tm.bound_by = by;
      dma[inst.dma_engine] = {tm.end_ns, i};
      if (uses_hbm) { // an HBM-to-HBM copy reads and writes HBM: twice the traffic
        const double sides = (inst.dst.kind == BufferKind::hbm ? 1.0 : 0.0) +
                              (inst.srcs[0].kind == BufferKind::hbm ? 1.0 : 0.0);
        hbm = {t + sides * bytes / params.hbm_bytes_per_ns, i};
        report.hbm_busy_ns += sides * bytes / params.hbm_bytes_per_ns;
      }
      report.dma_busy_ns += transfer;
      report.dma_engine_busy_ns[inst.dma_engine] += transfer;
    }
    if (inst.opcode == Opcode::nc_matmul)
      flops += 2.0 * inst.srcs[0].partitions * inst.srcs[0].free_elements() *
               inst.srcs[1].free_elements();
    for (int32_t s : inst.signals) {
      auto& sig = signals[s];
      auto pos = std::upper_bound(sig.begin(), sig.end(),
                                  std::make_pair(tm.end_ns, std::numeric_limits<int64_t>::max()));
      sig.insert(pos, {tm.end_ns, i});
    }
    report.total_ns = std::max(report.total_ns, tm.end_ns);
  }
  report.tensor_utilization =
      report.total_ns > 0 ? flops / (params.tensor_peak_flops * report.total_ns * 1e-9) : 0;
  // The critical path: back from the last instruction to end, through what bound each start.
  int64_t last = -1;
  for (int64_t i = 0; i < n; ++i)
    if (last < 0 || report.timing[i].end_ns > report.timing[last].end_ns) last = i;
  for (int64_t i = last; i >= 0; i = report.timing[i].bound_by) report.critical_path.push_back(i);
  std::reverse(report.critical_path.begin(), report.critical_path.end());
  return report;
}

} // namespace mstep::neuron
