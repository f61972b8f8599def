// Runtime counters. metrics() is a snapshot for tests and tools;
// metrics_report() is the human-readable form.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include "absl/strings/string_view.h"

namespace mstep {

struct Metrics {
  int64_t mark_steps = 0;        // calls to mark_step()
  int64_t sync_points = 0;       // item(), to_vector(), printing
  int64_t graphs_executed = 0;   // executions, hits and misses
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;      // = compiles
  int64_t constant_recompiles = 0;  // misses that differed only in constants
  int64_t warnings = 0;
  double compile_seconds = 0;
  double execute_seconds = 0;
};

/// A copy of the counters.
Metrics metrics();
/// Resets every counter to zero.
void reset_metrics();
/// Counters as text, one per line.
std::string metrics_report();

/// Where warnings go: stderr by default. Tests install a handler to check
/// them. Passing nullptr restores stderr.
void set_warning_handler(std::function<void(absl::string_view)> handler);

}  // namespace mstep
