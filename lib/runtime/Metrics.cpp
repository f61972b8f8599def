// Runtime counters, timing samples with their percentiles, and the warning
// sink.
//
// The counters in g_metrics are written by the thread that runs the tracer.
// The timing samples and the recompile reasons may be read by metrics() from
// any thread, so they live behind g_samples_mutex. Each kind keeps at most
// kMaxSamples samples in a ring: the percentiles describe the most recent
// events, while count and total cover every event since reset_metrics().
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/runtime/RuntimeInternal.h"

namespace mstep {

namespace {

/// Samples kept per kind; a ring overwrites the oldest beyond this.
constexpr size_t kMaxSamples = 100'000;

/// One kind of timed event: exact count and total, bounded samples.
struct SampleRing {
  int64_t count = 0;
  double total_seconds = 0;
  std::vector<double> samples; // grows to kMaxSamples, then wraps
  size_t next = 0;             // slot the next sample overwrites once full

  void add(double seconds) {
    ++count;
    total_seconds += seconds;
    if (samples.size() < kMaxSamples) {
      samples.push_back(seconds);
    } else {
      samples[next] = seconds;
      next = (next + 1) % kMaxSamples;
    }
  }
};

Metrics g_metrics;
std::mutex g_samples_mutex; // guards the three rings and recompile_reasons
SampleRing g_compile, g_execute, g_replay;

std::mutex g_warning_mutex;
std::function<void(absl::string_view)> g_warning_handler;

/// Nearest-rank percentile of sorted `v`: the value at rank ceil(p/100 * n).
double nearest_rank(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

/// Percentiles over a copy of the samples (sorted outside the lock).
TimeStats summarize(int64_t count, double total, std::vector<double> samples) {
  TimeStats s;
  s.count = count;
  s.total_seconds = total;
  std::sort(samples.begin(), samples.end());
  s.p50_seconds = nearest_rank(samples, 50);
  s.p90_seconds = nearest_rank(samples, 90);
  s.p99_seconds = nearest_rank(samples, 99);
  return s;
}

void record(SampleRing& ring, double seconds) {
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  ring.add(seconds);
}

} // namespace

namespace internal {
Metrics& mutable_metrics() { return g_metrics; }

void emit_warning(absl::string_view message) {
  {
    // The disk cache warns from its background thread.
    std::lock_guard<std::mutex> counters(g_samples_mutex);
    ++g_metrics.warnings;
  }
  std::lock_guard<std::mutex> lock(g_warning_mutex);
  if (g_warning_handler) {
    g_warning_handler(message);
  } else {
    std::fprintf(stderr, "mstep warning: %.*s\n", static_cast<int>(message.size()), message.data());
  }
}

void record_epilogue_fallbacks(int64_t calls) {
  // Executables load on the tracer's thread and the disk cache's.
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  g_metrics.epilogue_fallbacks += calls;
}

void record_compile_time(double seconds) { record(g_compile, seconds); }
void record_execute_time(double seconds) { record(g_execute, seconds); }
void record_replay_time(double seconds) { record(g_replay, seconds); }

void record_simulated_run(const SimulatedTime& run) {
  // Executables run on the tracer's thread and, in replays, the caller's.
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  SimulatedTime& t = g_metrics.simulated;
  t.runs += run.runs;
  t.programs += run.programs;
  t.seconds += run.seconds;
  t.tensor_peak_seconds += run.tensor_peak_seconds;
  for (const auto& [engine, busy] : run.busy_seconds) t.busy_seconds[engine] += busy;
}

void record_recompile_reason(absl::string_view reason) {
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  ++g_metrics.recompile_reasons[std::string(reason)];
}
void record_thread_rebuild(absl::string_view backend, int from, int to, double seconds,
                           bool log) {
  {
    std::lock_guard<std::mutex> lock(g_samples_mutex);
    ++g_metrics.thread_rebuilds;
  }
  if (log)
    std::fprintf(stderr, "mstep: %.*s step: kernels rebuilt for thread count %d -> %d (%.1f ms)\n",
                 static_cast<int>(backend.size()), backend.data(), from, to, seconds * 1e3);
}
} // namespace internal

Metrics metrics() {
  Metrics m;
  std::vector<double> compile, execute, replay;
  int64_t nc, ne, nr;
  double tc, te, tr;
  {
    std::lock_guard<std::mutex> lock(g_samples_mutex);
    m = g_metrics;
    compile = g_compile.samples, nc = g_compile.count, tc = g_compile.total_seconds;
    execute = g_execute.samples, ne = g_execute.count, te = g_execute.total_seconds;
    replay = g_replay.samples, nr = g_replay.count, tr = g_replay.total_seconds;
  }
  m.compile_time = summarize(nc, tc, std::move(compile));
  m.execute_time = summarize(ne, te, std::move(execute));
  m.replay_time = summarize(nr, tr, std::move(replay));
  // The samples are the source of truth for the totals.
  m.compile_seconds = m.compile_time.total_seconds;
  m.execute_seconds = m.execute_time.total_seconds;
  return m;
}

double executing_seconds() {
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  return g_execute.total_seconds + g_metrics.replay_execute_seconds;
}

void reset_metrics() {
  std::lock_guard<std::mutex> lock(g_samples_mutex);
  g_metrics = Metrics{};
  g_compile = SampleRing{};
  g_execute = SampleRing{};
  g_replay = SampleRing{};
}

void set_warning_handler(std::function<void(absl::string_view)> handler) {
  std::lock_guard<std::mutex> lock(g_warning_mutex);
  g_warning_handler = std::move(handler);
}

namespace {
// Every line starts with its name padded to 20 columns, so values align.
void counter_line(std::string* out, absl::string_view name, int64_t value) {
  absl::StrAppendFormat(out, "%-20s%d\n", name, value);
}

void time_line(std::string* out, absl::string_view name, const TimeStats& t) {
  absl::StrAppendFormat(
      out, "%-20scount %d  total %.3f ms  p50 %.3f ms  p90 %.3f ms  p99 %.3f ms\n", name, t.count,
      t.total_seconds * 1e3, t.p50_seconds * 1e3, t.p90_seconds * 1e3, t.p99_seconds * 1e3);
}
} // namespace

std::string metrics_report() {
  const Metrics m = metrics();
  std::string out;
  counter_line(&out, "mark_steps", m.mark_steps);
  counter_line(&out, "sync_points", m.sync_points);
  counter_line(&out, "graphs_executed", m.graphs_executed);
  counter_line(&out, "cache_hits", m.cache_hits);
  counter_line(&out, "cache_misses", m.cache_misses);
  counter_line(&out, "memory_evictions", m.memory_evictions);
  counter_line(&out, "disk_hits", m.disk_hits);
  counter_line(&out, "disk_misses", m.disk_misses);
  counter_line(&out, "disk_corrupt", m.disk_corrupt);
  counter_line(&out, "compiles", m.compiles);
  // Recompile reasons, most frequent first (ties by name), indented under
  // compiles and aligned on the longest reason.
  std::vector<std::pair<std::string, int64_t>> reasons(m.recompile_reasons.begin(),
                                                       m.recompile_reasons.end());
  std::stable_sort(reasons.begin(), reasons.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  size_t width = 16;
  for (const auto& [reason, n] : reasons) width = std::max(width, reason.size());
  for (const auto& [reason, n] : reasons)
    absl::StrAppendFormat(&out, "  %-*s  %d\n", static_cast<int>(width), reason, n);
  counter_line(&out, "constant_recompiles", m.constant_recompiles);
  // Only where a compiled step met a new OpenMP thread count (cpu, xla).
  if (m.thread_rebuilds > 0) counter_line(&out, "thread_rebuilds", m.thread_rebuilds);
  counter_line(&out, "warnings", m.warnings);
  counter_line(&out, "fallbacks", m.fallbacks);
  // Only where a cuBLASLt epilogue ran as kernels (cuda).
  if (m.epilogue_fallbacks > 0) counter_line(&out, "epilogue_fallbacks", m.epilogue_fallbacks);
  counter_line(&out, "replays", m.replays);
  counter_line(&out, "arena_bytes", m.arena_bytes);
  // Only where a step was recorded as a device graph (cuda).
  if (m.device_graph_pool_bytes > 0) {
    counter_line(&out, "graph_pool_bytes", m.device_graph_pool_bytes);
    // Moved inputs: graph nodes patched in place, and re-recorded steps.
    counter_line(&out, "graph_node_patches", m.device_graph_node_patches);
    counter_line(&out, "graph_rerecords", m.device_graph_rerecords);
  }
  time_line(&out, "compile_time", m.compile_time);
  time_line(&out, "execute_time", m.execute_time);
  time_line(&out, "replay_time", m.replay_time);
  // A simulated device's figures, only where one ran (neuron).
  if (m.simulated.runs > 0)
    absl::StrAppendFormat(&out, "%-20s%s\n", "simulated", m.simulated.summary());
  return out;
}

} // namespace mstep
