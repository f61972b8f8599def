// Runtime counters. metrics() is a snapshot for tests and tools;
// metrics_report() is the human-readable form (see the README).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace mstep {

/// Count, total and percentiles of one kind of timed event.
struct TimeStats {
  int64_t count = 0;
  double total_seconds = 0;
  double p50_seconds = 0, p90_seconds = 0, p99_seconds = 0;
};

/// The time a simulated device would take (the `neuron` backend's cost
/// model; docs in the README's NeuronCore section), summed over executable
/// runs. metrics().simulated covers every run since reset_metrics(); one
/// step's figures are the difference of two snapshots (minus()).
struct SimulatedTime {
  int64_t runs = 0;      // executable runs with at least one tile program
  int64_t programs = 0;  // tile programs run (one per lowered op)
  double seconds = 0;    // the programs' cost-model estimates, summed
  /// Busy time per engine: "Tensor", "Vector", "Scalar", "GpSimd", "Sync"
  /// (DMA triggers), "DMA" (the 16 DMA queues' transfer time / 16) and
  /// "HBM" (time its bandwidth is taken).
  std::map<std::string, double> busy_seconds;
  /// The matmul FLOPs run, as seconds of the Tensor engine at its peak.
  double tensor_peak_seconds = 0;

  /// busy_seconds[engine] / seconds (0 when nothing ran).
  double busy_fraction(const std::string& engine) const;
  /// tensor_peak_seconds / seconds: the Tensor engine's utilization.
  double tensor_utilization() const;
  /// The engine with the most busy time ("" when nothing ran).
  std::string bottleneck() const;
  /// These counters minus an earlier snapshot of them.
  SimulatedTime minus(const SimulatedTime& earlier) const;
  /// One line: time, busy fraction per engine, utilization, bottleneck.
  std::string summary() const;
};

struct Metrics {
  int64_t mark_steps = 0;        // calls to mark_step()
  int64_t sync_points = 0;       // item(), to_vector(), printing
  int64_t graphs_executed = 0;   // executions in lazy mode, hits and misses
  int64_t cache_hits = 0;        // in-memory module cache
  int64_t cache_misses = 0;
  int64_t disk_hits = 0;         // memory misses served from MSTEP_CACHE
  int64_t disk_misses = 0;
  int64_t disk_corrupt = 0;      // entries found bad, removed and recompiled
  int64_t memory_evictions = 0;  // LRU evictions beyond MSTEP_MAX_GRAPHS
  int64_t compiles = 0;          // graphs compiled (misses in memory and on disk)
  int64_t constant_recompiles = 0;  // compiles that differed only in constants
  /// Runs of a compiled cpu or xla step that first rebuilt its kernels
  /// (oneDNN primitives, per-thread scratch) because the OpenMP thread
  /// count changed since they were built (not compiles: no MLIR or LLVM).
  int64_t thread_rebuilds = 0;
  /// Why each compile happened ("new structure", "input shape changed",
  /// "host constant changed", ...), with counts.
  std::map<std::string, int64_t> recompile_reasons;
  int64_t warnings = 0;
  int64_t fallbacks = 0;         // ops run on the host instead of the device
  /// cuBLASLt calls whose epilogue (bias, activation, bias gradient) the
  /// device's cuBLASLt has no algorithm for (or MSTEP_CUDA_NO_EPILOGUES=1),
  /// so the call runs without it and kernels do its work: counted per call
  /// of each cuda executable loaded (cuda).
  int64_t epilogue_fallbacks = 0;
  int64_t replays = 0;           // mstep::Graph::replay() calls
  /// Replays that launched one device graph (CUDA Graphs), and those that
  /// first moved it to new buffer addresses (an input moved): by patching
  /// the nodes that use them in place, or else by recording the step again
  /// and updating the graph.
  int64_t device_graph_launches = 0;
  int64_t device_graph_updates = 0;
  /// The graph nodes those in-place patches changed (no recording).
  int64_t device_graph_node_patches = 0;
  /// Of device_graph_updates, the replays that recorded the step again
  /// (DeviceGraph::update) because patching could not move the graph; the
  /// rest were patched in place.
  int64_t device_graph_rerecords = 0;
  /// Largest pool of a captured device graph: the device memory of its
  /// static results, allocated at capture as one block where the backend
  /// pools them (cuda) and held for the graph's life.
  int64_t device_graph_pool_bytes = 0;
  int64_t arena_bytes = 0;       // largest planned arena of a compiled graph
  TimeStats compile_time;
  TimeStats execute_time;        // executable runs in lazy mode
  TimeStats replay_time;         // whole replay() calls
  // Totals of compile_time / execute_time, kept for older callers. metrics()
  // fills them from the samples (internal::record_compile_time and
  // record_execute_time); writes through mutable_metrics() are overwritten.
  double compile_seconds = 0;
  double execute_seconds = 0;
  /// Time inside the captured executables during replay() (replay_time
  /// minus this is the replay's own host overhead).
  double replay_execute_seconds = 0;
  /// Simulated devices' time (runs == 0 on the other backends).
  SimulatedTime simulated;
};

/// A copy of the counters, with percentiles computed now. Safe to call from
/// any thread. Percentiles (nearest rank) cover the newest 100,000 samples
/// of each kind; count and total cover every sample since the last reset.
Metrics metrics();
/// Seconds spent inside executables so far, in lazy runs and replays
/// (metrics().execute_seconds + replay_execute_seconds) without copying the
/// timing samples: cheap enough to read around every step, to split a
/// step's wall time into host time and execution.
double executing_seconds();
/// Resets every counter, timing sample and recompile reason to zero. The
/// host-fallback table of MSTEP_LOG_FALLBACK covers the whole run and is
/// kept.
void reset_metrics();
/// Counters as text, one per line, percentiles in milliseconds.
std::string metrics_report();

/// Where warnings go: stderr by default. Tests install a handler to check
/// them. Passing nullptr restores stderr.
void set_warning_handler(std::function<void(absl::string_view)> handler);

/// Like MSTEP_TRACE: starts (or, with an empty path, stops) recording a
/// Chrome/Perfetto trace to `path`, overriding the environment. The file
/// is written by flush_trace() and at exit; events recorded for a previous
/// path are written there first. Thread-safe.
void set_trace_file(const std::string& path);
/// Writes every event recorded so far to the trace file (the whole file is
/// rewritten, so it is always complete JSON). A file that cannot be written
/// is reported through the warning handler, not thrown.
void flush_trace();

}  // namespace mstep
