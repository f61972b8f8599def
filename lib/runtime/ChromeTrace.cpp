// The Chrome/Perfetto trace: complete events ("ph":"X") kept in memory and
// written as {"traceEvents":[...]} by flush_trace() and at exit.
//
// 1. The tracer's constructor starts the trace of RuntimeOptions::trace_file
//    (MSTEP_TRACE; empty: off); the first trace_enabled() constructs the
//    tracer. set_trace_file() overrides it at any time.
// 2. trace_enabled() is one relaxed atomic load after that.
// 3. Events carry microseconds since the first trace use, the process id
//    and a small per-thread id (1, 2, ... in order of first event).
// 4. Each flush rewrites the whole file (via a temporary and a rename), so
//    the file is always one complete JSON document. At most kMaxEvents are
//    kept; later events are dropped and counted in the file's metadata.
// 5. A simulated device (neuron) adds its timeline through the device trace
//    sink (RuntimeInternal.h): each device is a process of its own (pid
//    above Linux's largest, 2^22, so no real one), each track a thread,
//    named by metadata events ("ph":"M") in track order.
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

namespace {

using internal::Clock;

constexpr size_t kMaxEvents = 1'000'000;
/// Simulated devices' pids: kDevicePidBase + 1, + 2, ... (Linux pids are at most 2^22).
constexpr int kDevicePidBase = 1 << 22;

struct Event {
  std::string name;
  std::string category;
  double ts_us;
  double dur_us;
  int tid;
  int device = 0; // 0: this process; k: devices[k - 1]
};

/// A simulated device's process: its name and tracks (tid = index + 1).
struct DeviceProcess {
  std::string name;
  std::vector<std::pair<std::string, int>> tracks; // name, sort order
};

/// Never destroyed, so the atexit flush can run after static destructors.
struct TraceState {
  std::mutex mutex;
  std::string path;
  std::vector<Event> events;
  std::vector<DeviceProcess> devices;
  int64_t dropped = 0;
  bool atexit_registered = false;
  Clock::time_point epoch = Clock::now();
};

TraceState& state() {
  static TraceState* s = new TraceState;
  return *s;
}

// 0: not set yet (the tracer's options set it), 1: off, 2: on.
std::atomic<int> g_trace_mode{0};
std::atomic<int> g_next_tid{1};

int current_tid() {
  thread_local int tid = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return tid;
}

/// Length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_length(absl::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
  if (c >= 0xF5) n = 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

/// `s` as a JSON string literal: quotes, backslashes and control characters
/// escaped, bytes that are not UTF-8 replaced by U+FFFD.
std::string json_string(absl::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        absl::StrAppendFormat(&out, "\\u%04x", c);
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else if (size_t n = utf8_length(s, i)) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
  return out;
}

void flush_at_exit() { flush_trace(); }

/// The device trace sink while a trace is recorded.
class ChromeDeviceSink final : public internal::DeviceTraceSink {
public:
  double now_us() override {
    return std::chrono::duration<double, std::micro>(Clock::now() - state().epoch).count();
  }
  void slice(absl::string_view device, absl::string_view track, int track_order,
             absl::string_view name, double ts_us, double dur_us) override {
    TraceState& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.path.empty()) return;
    if (s.events.size() >= kMaxEvents) {
      ++s.dropped;
      return;
    }
    size_t d = 0;
    while (d < s.devices.size() && s.devices[d].name != device) ++d;
    if (d == s.devices.size()) s.devices.push_back({std::string(device), {}});
    auto& tracks = s.devices[d].tracks;
    size_t t = 0;
    while (t < tracks.size() && tracks[t].first != track) ++t;
    if (t == tracks.size()) tracks.emplace_back(std::string(track), track_order);
    s.events.push_back(Event{std::string(name), std::string(device), ts_us, dur_us < 0 ? 0 : dur_us,
                             static_cast<int>(t) + 1, static_cast<int>(d) + 1});
  }
};

ChromeDeviceSink& device_sink() {
  static ChromeDeviceSink* sink = new ChromeDeviceSink;
  return *sink;
}

/// Starts recording to `path` (empty: stops). Caller holds s.mutex.
void open_locked(TraceState& s, std::string path) {
  s.path = std::move(path);
  s.events.clear();
  s.devices.clear();
  s.dropped = 0;
  const bool on = !s.path.empty();
  internal::set_device_trace_sink(on ? &device_sink() : nullptr);
  if (on && !s.atexit_registered) {
    s.atexit_registered = true;
    std::atexit(flush_at_exit);
  }
  g_trace_mode.store(on ? 2 : 1, std::memory_order_release);
}

void write_locked(TraceState& s) {
  if (s.path.empty()) return;
  std::string out = "{\"traceEvents\":[";
  const int pid = static_cast<int>(::getpid());
  bool first = true;
  auto metadata = [&](const char* what, int p, int tid, absl::string_view arg,
                      const std::string& value) {
    absl::StrAppend(&out, first ? "\n" : ",\n", "{\"name\":\"", what, "\",\"ph\":\"M\",",
                    absl::StrFormat("\"pid\":%d,\"tid\":%d,\"args\":{\"", p, tid), arg,
                    "\":", value, "}}");
    first = false;
  };
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const int p = kDevicePidBase + static_cast<int>(d) + 1;
    metadata("process_name", p, 0, "name", json_string(s.devices[d].name));
    for (size_t t = 0; t < s.devices[d].tracks.size(); ++t) {
      const auto& [track, order] = s.devices[d].tracks[t];
      metadata("thread_name", p, static_cast<int>(t) + 1, "name", json_string(track));
      metadata("thread_sort_index", p, static_cast<int>(t) + 1, "sort_index", absl::StrCat(order));
    }
  }
  for (const Event& e : s.events) {
    absl::StrAppend(&out, first ? "\n" : ",\n", "{\"name\":", json_string(e.name),
                    ",\"cat\":", json_string(e.category),
                    absl::StrFormat(",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d}",
                                    e.ts_us, e.dur_us, e.device ? kDevicePidBase + e.device : pid,
                                    e.tid));
    first = false;
  }
  absl::StrAppendFormat(
      &out, "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"dropped_events\":%d}}\n", s.dropped);
  const std::string tmp = s.path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << out;
    if (!f) {
      internal::emit_warning(absl::StrCat("cannot write the trace file ", tmp,
                                          "; check that its directory exists and is writable"));
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, s.path, ec);
  if (ec)
    internal::emit_warning(
        absl::StrCat("cannot rename ", tmp, " to the trace file ", s.path, ": ", ec.message()));
}

} // namespace

namespace internal {

bool trace_enabled() {
  const int mode = g_trace_mode.load(std::memory_order_relaxed);
  if (mode != 0) return mode == 2;
  Tracer::get(); // its constructor calls init_trace_file(options().trace_file)
  return g_trace_mode.load(std::memory_order_acquire) == 2;
}

void init_trace_file(const std::string& path) {
  TraceState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (g_trace_mode.load(std::memory_order_acquire) != 0) return; // set_trace_file() came first
  open_locked(s, path);
}

void trace_event(absl::string_view name, absl::string_view category, Clock::time_point start,
                 Clock::time_point end) {
  if (!trace_enabled()) return;
  const int tid = current_tid();
  TraceState& s = state();
  using us = std::chrono::duration<double, std::micro>;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.path.empty()) return; // stopped since the check above
  if (s.events.size() >= kMaxEvents) {
    ++s.dropped;
    return;
  }
  const double ts = us(start - s.epoch).count();
  const double dur = us(end - start).count();
  s.events.push_back(Event{std::string(name), std::string(category), ts, dur < 0 ? 0 : dur, tid});
}

} // namespace internal

void set_trace_file(const std::string& path) {
  TraceState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Events recorded for the previous file are written there first.
  if (g_trace_mode.load(std::memory_order_acquire) == 2) write_locked(s);
  open_locked(s, path);
}

void flush_trace() {
  TraceState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  write_locked(s);
}

} // namespace mstep
