// Library-internal runtime hooks: metrics recording, warnings, the
// fallback log and the Chrome trace.
#pragma once

#include <chrono>
#include <string>

#include "absl/strings/string_view.h"
#include "mstep/core/DType.h"
#include "mstep/runtime/Metrics.h"

namespace mstep {
class Executable;
}

namespace mstep::internal {

/// The counters, written by the tracer's thread. The timing samples and
/// recompile_reasons are not written here: use the record_* calls, which
/// lock against metrics() readers on other threads.
Metrics& mutable_metrics();
/// Sends `message` to the warning handler (stderr by default).
void emit_warning(absl::string_view message);

/// Counts cuBLASLt calls that run without their epilogue
/// (Metrics::epilogue_fallbacks).
void record_epilogue_fallbacks(int64_t calls);
/// Timing samples for the percentiles in metrics().
void record_compile_time(double seconds);
void record_execute_time(double seconds);
void record_replay_time(double seconds);
/// Adds one executable run's simulated time to metrics().simulated.
void record_simulated_run(const SimulatedTime& run);
/// Counts one compile under `reason` (a short, fixed phrase).
void record_recompile_reason(absl::string_view reason);
/// Counts one rebuild of `backend`'s step kernels for a new OpenMP thread
/// count, which took `seconds` (Metrics::thread_rebuilds); with `log`
/// (MSTEP_LOG_RECOMPILES) says so on stderr, naming "thread count <from>
/// -> <to>".
void record_thread_rebuild(absl::string_view backend, int from, int to, double seconds,
                           bool log);
/// An op that ran on the host instead of the device: counted, logged with
/// MSTEP_LOG_FALLBACK=1, and tabulated at exit.
void record_fallback(absl::string_view op, DType dtype, absl::string_view reason = {});
/// Records the host fallbacks one run of `executable` made.
void record_host_fallbacks(const Executable& executable);
/// Turns the fallback log on or off (the C API's log_fallback, tests).
void set_log_fallback(bool on);
/// Starts the fallback log as RuntimeOptions::log_fallback says, unless
/// set_log_fallback() came first. Called once, by the tracer's constructor.
void init_log_fallback(bool on);
/// The per-(op, dtype) fallback counts since start, most frequent first, as
/// the text printed at exit.
std::string fallback_table();

using Clock = std::chrono::steady_clock;
/// Whether a Chrome trace is being recorded (RuntimeOptions::trace_file or
/// set_trace_file).
bool trace_enabled();
/// Starts the trace of RuntimeOptions::trace_file (empty: none), unless
/// set_trace_file() came first. Called once, by the tracer's constructor.
void init_trace_file(const std::string& path);
/// Records one complete event ("ph":"X") on the timeline.
void trace_event(absl::string_view name, absl::string_view category, Clock::time_point start,
                 Clock::time_point end);

/// Where a simulated device puts its timeline in the Chrome trace: set by
/// the trace (libmstep) while one is recorded, null otherwise, so the
/// runtime's backends (which cannot call libmstep) reach it.
class DeviceTraceSink {
 public:
  virtual ~DeviceTraceSink() = default;
  /// Microseconds since the trace's epoch (the host events' time base).
  virtual double now_us() = 0;
  /// One complete event on `track` of the simulated `device` (its own
  /// process in the trace, tracks ordered by `track_order`), at simulated
  /// time placed on the trace's time base.
  virtual void slice(absl::string_view device, absl::string_view track, int track_order,
                     absl::string_view name, double ts_us, double dur_us) = 0;
};
void set_device_trace_sink(DeviceTraceSink* sink);
/// The sink, or null when no trace is recorded.
DeviceTraceSink* device_trace_sink();

/// Records the enclosing scope as a trace event (nothing when tracing is off).
class TraceScope {
 public:
  TraceScope(const char* name, const char* category)
      : name_(name), category_(category), on_(trace_enabled()) {
    if (on_) start_ = Clock::now();
  }
  ~TraceScope() {
    if (on_) trace_event(name_, category_, start_, Clock::now());
  }
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  const char* name_;
  const char* category_;
  bool on_;
  Clock::time_point start_;
};

}  // namespace mstep::internal
