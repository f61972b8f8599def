// SimulatedTime (Metrics.h): the derived figures of a simulated device's
// summed time, and the difference of two snapshots.
#include <algorithm>

#include "absl/strings/str_format.h"
#include "mstep/runtime/Metrics.h"

namespace mstep {

double SimulatedTime::busy_fraction(const std::string& engine) const {
  auto it = busy_seconds.find(engine);
  return seconds > 0 && it != busy_seconds.end() ? it->second / seconds : 0;
}

double SimulatedTime::tensor_utilization() const {
  return seconds > 0 ? tensor_peak_seconds / seconds : 0;
}

std::string SimulatedTime::bottleneck() const {
  std::string best;
  double most = 0;
  for (const auto& [engine, busy] : busy_seconds)
    if (busy > most) best = engine, most = busy;
  return best;
}

SimulatedTime SimulatedTime::minus(const SimulatedTime& earlier) const {
  SimulatedTime d = *this;
  d.runs -= earlier.runs;
  d.programs -= earlier.programs;
  d.seconds -= earlier.seconds;
  d.tensor_peak_seconds -= earlier.tensor_peak_seconds;
  for (const auto& [engine, busy] : earlier.busy_seconds) d.busy_seconds[engine] -= busy;
  return d;
}

std::string SimulatedTime::summary() const {
  std::string s = absl::StrFormat(
      "%.3f ms simulated (%d runs, %d tile programs); busy:", seconds * 1e3, runs, programs);
  // Engines in the hardware's order, then the memory system.
  for (const char* engine : {"Tensor", "Vector", "Scalar", "GpSimd", "Sync", "DMA", "HBM"})
    absl::StrAppendFormat(&s, " %s %.1f%%", engine, 100 * busy_fraction(engine));
  absl::StrAppendFormat(&s, "; Tensor utilization %.1f%%; bottleneck %s",
                        100 * tensor_utilization(), runs ? bottleneck() : "none");
  return s;
}

} // namespace mstep
