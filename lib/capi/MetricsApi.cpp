// C API: the metrics report and single counters.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "lib/capi/Handles.h"
#include "mstep/runtime/Metrics.h"

using namespace mstep;
using namespace mstep::capi;

namespace {

double counter(const Metrics& m, const std::string& name) {
  const std::pair<const char*, double> counters[] = {
      {"mark_steps", double(m.mark_steps)},
      {"sync_points", double(m.sync_points)},
      {"graphs_executed", double(m.graphs_executed)},
      {"cache_hits", double(m.cache_hits)},
      {"cache_misses", double(m.cache_misses)},
      {"disk_hits", double(m.disk_hits)},
      {"disk_misses", double(m.disk_misses)},
      {"disk_corrupt", double(m.disk_corrupt)},
      {"compiles", double(m.compiles)},
      {"thread_rebuilds", double(m.thread_rebuilds)},
      {"fallbacks", double(m.fallbacks)},
      {"replays", double(m.replays)},
      {"warnings", double(m.warnings)},
      {"arena_bytes", double(m.arena_bytes)},
      {"compile_seconds", m.compile_seconds},
      {"execute_seconds", m.execute_seconds},
      {"simulated_seconds", m.simulated.seconds},
      {"simulated_tensor_utilization", m.simulated.tensor_utilization()},
  };
  std::string names;
  for (const auto& [n, value] : counters) {
    if (name == n) return value;
    absl::StrAppend(&names, names.empty() ? "" : ", ", n);
  }
  fail(MSTEP_NOT_FOUND, absl::StrCat("no metric '", name, "'; the metrics are ", names));
}

}  // namespace

extern "C" {

mstep_status* mstep_metrics_report(mstep_context* context, char* dst, size_t capacity,
                                   size_t* out_length) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_length, "out_length");
    if (capacity > 0) require_out(dst, "dst");
    const std::string report = metrics_report();
    if (capacity > 0) {
      const size_t n = std::min(report.size(), capacity - 1);
      std::memcpy(dst, report.data(), n);
      dst[n] = '\0';
    }
    *out_length = report.size();
  });
}

mstep_status* mstep_metrics_get(mstep_context* context, const char* name, double* out_value) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(name, "name");
    require_out(out_value, "out_value");
    *out_value = counter(metrics(), name);
  });
}

mstep_status* mstep_metrics_reset(mstep_context* context) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    reset_metrics();
  });
}

}  // extern "C"
