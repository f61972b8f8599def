// Runtime counters and the warning sink.
#include <cstdio>
#include <mutex>

#include "absl/strings/str_format.h"
#include "lib/runtime/RuntimeInternal.h"

namespace mstep {

namespace {
Metrics g_metrics;
std::mutex g_warning_mutex;
std::function<void(absl::string_view)> g_warning_handler;
}  // namespace

namespace internal {
Metrics& mutable_metrics() { return g_metrics; }

void emit_warning(absl::string_view message) {
  ++g_metrics.warnings;
  std::lock_guard<std::mutex> lock(g_warning_mutex);
  if (g_warning_handler) {
    g_warning_handler(message);
  } else {
    std::fprintf(stderr, "mstep warning: %.*s\n",
                 static_cast<int>(message.size()), message.data());
  }
}
}  // namespace internal

Metrics metrics() { return g_metrics; }
void reset_metrics() { g_metrics = Metrics{}; }

void set_warning_handler(std::function<void(absl::string_view)> handler) {
  std::lock_guard<std::mutex> lock(g_warning_mutex);
  g_warning_handler = std::move(handler);
}

std::string metrics_report() {
  const Metrics& m = g_metrics;
  return absl::StrFormat(
      "mark_steps          %d\n"
      "sync_points         %d\n"
      "graphs_executed     %d\n"
      "cache_hits          %d\n"
      "cache_misses        %d\n"
      "constant_recompiles %d\n"
      "warnings            %d\n"
      "compile_seconds     %.6f\n"
      "execute_seconds     %.6f\n",
      m.mark_steps, m.sync_points, m.graphs_executed, m.cache_hits,
      m.cache_misses, m.constant_recompiles, m.warnings, m.compile_seconds,
      m.execute_seconds);
}

}  // namespace mstep
