// The host-fallback log: every op that ran on the host instead of the
// device is counted in metrics().fallbacks and per (op, dtype). With
// RuntimeOptions::log_fallback (MSTEP_LOG_FALLBACK=1) each one is printed,
// and the per-(op, dtype) frequency table is printed at exit.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::internal {

namespace {

/// Never destroyed, so the exit report can run after static destructors.
struct FallbackState {
  std::mutex mutex;
  std::map<std::pair<std::string, DType>, int64_t> counts;
  bool atexit_registered = false;
};

FallbackState& state() {
  static FallbackState* s = new FallbackState;
  return *s;
}

// 0: not set yet (the tracer's options set it), 1: off, 2: on.
std::atomic<int> g_log_mode{0};

bool log_enabled();

/// Registered when the first fallback is logged; prints nothing if logging
/// was turned off since (set_log_fallback(false)).
void print_table_at_exit() {
  if (!log_enabled()) return;
  const std::string table = fallback_table();
  std::fputs(table.c_str(), stderr);
}

/// Registers the exit report once logging is on. Caller holds s.mutex.
void register_atexit_locked(FallbackState& s) {
  if (s.atexit_registered) return;
  s.atexit_registered = true;
  std::atexit(print_table_at_exit);
}

bool log_enabled() {
  int mode = g_log_mode.load(std::memory_order_relaxed);
  if (mode == 0) {
    Tracer::get(); // its constructor calls init_log_fallback(options().log_fallback)
    mode = g_log_mode.load(std::memory_order_relaxed);
  }
  return mode == 2;
}

} // namespace

void set_log_fallback(bool on) { g_log_mode.store(on ? 2 : 1, std::memory_order_relaxed); }

void init_log_fallback(bool on) {
  int expected = 0;
  g_log_mode.compare_exchange_strong(expected, on ? 2 : 1); // set_log_fallback may have won
}

void record_fallback(absl::string_view op, DType dtype, absl::string_view reason) {
  ++mutable_metrics().fallbacks;
  const bool log = log_enabled();
  FallbackState& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.counts[{std::string(op), dtype}];
    if (log) register_atexit_locked(s);
  }
  if (log)
    std::fprintf(stderr, "mstep fallback: %.*s (%.*s) ran on the host%s%.*s\n",
                 static_cast<int>(op.size()), op.data(), static_cast<int>(dtype_name(dtype).size()),
                 dtype_name(dtype).data(), reason.empty() ? "" : ": ",
                 static_cast<int>(reason.size()), reason.data());
}

void record_host_fallbacks(const Executable& executable) {
  for (const HostFallbackOp& f : executable.host_fallbacks())
    record_fallback(op_name(f.op), f.dtype, f.reason);
}

std::string fallback_table() {
  std::vector<std::pair<std::pair<std::string, DType>, int64_t>> rows;
  {
    FallbackState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    rows.assign(s.counts.begin(), s.counts.end());
  }
  // Most frequent first; ties keep the map's (op, dtype) order.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  size_t width = 2; // "op"
  for (const auto& [key, n] : rows) width = std::max(width, key.first.size());
  std::string out = "mstep host fallbacks, most frequent first:\n";
  absl::StrAppendFormat(&out, "  %-*s  %-5s  %s\n", static_cast<int>(width), "op", "dtype",
                        "count");
  for (const auto& [key, n] : rows)
    absl::StrAppendFormat(&out, "  %-*s  %-5s  %d\n", static_cast<int>(width), key.first,
                          dtype_name(key.second), n);
  return out;
}

} // namespace mstep::internal
