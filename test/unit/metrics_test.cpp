// Metrics (timing percentiles, recompile reasons, the report), the Chrome
// trace file and the host-fallback log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#include "lib/runtime/RuntimeInternal.h"
#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MetricsTest : public ::testing::Test {
protected:
  void SetUp() override {
    mark_step(); // flush anything a previous test left pending
    reset_metrics();
  }
  void TearDown() override { reset_metrics(); }
};

TEST_F(MetricsTest, PercentilesAreNearestRank) {
  // 1..100 ms in a scrambled order: percentiles must not depend on it.
  for (int i = 0; i < 100; ++i) internal::record_compile_time(((i * 37) % 100 + 1) * 1e-3);
  const Metrics m = metrics();
  EXPECT_EQ(m.compile_time.count, 100);
  EXPECT_NEAR(m.compile_time.total_seconds, 5.050, 1e-9);
  EXPECT_NEAR(m.compile_time.p50_seconds, 0.050, 1e-12);
  EXPECT_NEAR(m.compile_time.p90_seconds, 0.090, 1e-12);
  EXPECT_NEAR(m.compile_time.p99_seconds, 0.099, 1e-12);
  // The legacy total is the samples' total.
  EXPECT_DOUBLE_EQ(m.compile_seconds, m.compile_time.total_seconds);
  // Other kinds are untouched.
  EXPECT_EQ(m.execute_time.count, 0);
  EXPECT_EQ(m.replay_time.count, 0);
  EXPECT_EQ(m.execute_time.p99_seconds, 0);
}

TEST_F(MetricsTest, EachKindKeepsItsOwnSamples) {
  internal::record_execute_time(0.002);
  internal::record_execute_time(0.004);
  internal::record_replay_time(0.010);
  const Metrics m = metrics();
  EXPECT_EQ(m.execute_time.count, 2);
  EXPECT_DOUBLE_EQ(m.execute_time.total_seconds, 0.006);
  EXPECT_DOUBLE_EQ(m.execute_seconds, 0.006);
  EXPECT_DOUBLE_EQ(m.execute_time.p50_seconds, 0.002); // rank ceil(0.5 * 2) = 1
  EXPECT_DOUBLE_EQ(m.execute_time.p90_seconds, 0.004);
  EXPECT_EQ(m.replay_time.count, 1);
  EXPECT_DOUBLE_EQ(m.replay_time.p50_seconds, 0.010);
  EXPECT_DOUBLE_EQ(m.replay_time.p99_seconds, 0.010);
  EXPECT_EQ(m.compile_time.count, 0);
  EXPECT_EQ(m.compile_seconds, 0);
}

TEST_F(MetricsTest, ExecutingSecondsAddsLazyRunsAndReplays) {
  internal::record_execute_time(0.25);
  internal::mutable_metrics().replay_execute_seconds += 0.5;
  EXPECT_DOUBLE_EQ(executing_seconds(), 0.75);
  // A real lazy step and a replay both add to it, as metrics() reports.
  Tensor x = ones({4});
  Tensor y = x * 3.0;
  mark_step();
  Graph g;
  {
    CaptureGuard capture(g);
    y = x * 5.0;
  }
  g.replay();
  const Metrics m = metrics();
  EXPECT_GT(m.replay_execute_seconds, 0.5);
  EXPECT_DOUBLE_EQ(executing_seconds(), m.execute_seconds + m.replay_execute_seconds);
  reset_metrics();
  EXPECT_EQ(executing_seconds(), 0);
}

TEST_F(MetricsTest, SamplesAreBoundedButCountAndTotalAreExact) {
  // 100k old samples of 1 s, then 100k new ones of 2 s: the ring keeps
  // only the newest, while count and total cover all of them.
  for (int i = 0; i < 100'000; ++i) internal::record_execute_time(1.0);
  for (int i = 0; i < 100'000; ++i) internal::record_execute_time(2.0);
  const Metrics m = metrics();
  EXPECT_EQ(m.execute_time.count, 200'000);
  EXPECT_DOUBLE_EQ(m.execute_time.total_seconds, 300'000.0);
  EXPECT_DOUBLE_EQ(m.execute_time.p50_seconds, 2.0);
  EXPECT_DOUBLE_EQ(m.execute_time.p90_seconds, 2.0);
}

TEST_F(MetricsTest, ResetClearsCountersSamplesAndReasons) {
  internal::record_compile_time(0.5);
  internal::record_replay_time(0.5);
  internal::record_recompile_reason("new structure");
  ++internal::mutable_metrics().replays;
  reset_metrics();
  const Metrics m = metrics();
  EXPECT_EQ(m.compile_time.count, 0);
  EXPECT_EQ(m.compile_time.p50_seconds, 0);
  EXPECT_EQ(m.replay_time.count, 0);
  EXPECT_EQ(m.compile_seconds, 0);
  EXPECT_EQ(m.replays, 0);
  EXPECT_TRUE(m.recompile_reasons.empty());
  // Samples recorded after the reset are the only ones seen.
  internal::record_compile_time(0.003);
  EXPECT_DOUBLE_EQ(metrics().compile_time.p99_seconds, 0.003);
}

TEST_F(MetricsTest, RecompileReasonsAreCounted) {
  internal::record_recompile_reason("input shape changed");
  internal::record_recompile_reason("new structure");
  internal::record_recompile_reason("input shape changed");
  const Metrics m = metrics();
  ASSERT_EQ(m.recompile_reasons.size(), 2u);
  EXPECT_EQ(m.recompile_reasons.at("input shape changed"), 2);
  EXPECT_EQ(m.recompile_reasons.at("new structure"), 1);
}

TEST_F(MetricsTest, ReportAlignsCountersAndSortsReasonsByCount) {
  Metrics& c = internal::mutable_metrics();
  c.cache_hits = 3;
  c.cache_misses = 1;
  c.disk_corrupt = 2;
  c.memory_evictions = 4;
  c.compiles = 5;
  c.fallbacks = 6;
  c.replays = 7;
  c.arena_bytes = 4096;
  internal::record_recompile_reason("new structure");
  for (int i = 0; i < 3; ++i) internal::record_recompile_reason("host constant changed");
  for (int i = 0; i < 2; ++i) internal::record_recompile_reason("input shape changed");
  for (int i = 1; i <= 100; ++i) internal::record_compile_time(i * 1e-3);
  internal::record_replay_time(0.0125);

  const std::string r = metrics_report();
  EXPECT_THAT(r, HasSubstr("cache_hits          3\n"));
  EXPECT_THAT(r, HasSubstr("cache_misses        1\n"));
  EXPECT_THAT(r, HasSubstr("disk_hits           0\n"));
  EXPECT_THAT(r, HasSubstr("disk_misses         0\n"));
  EXPECT_THAT(r, HasSubstr("disk_corrupt        2\n"));
  EXPECT_THAT(r, HasSubstr("memory_evictions    4\n"));
  EXPECT_THAT(r, HasSubstr("compiles            5\n"));
  EXPECT_THAT(r, HasSubstr("constant_recompiles 0\n"));
  EXPECT_THAT(r, HasSubstr("fallbacks           6\n"));
  EXPECT_THAT(r, HasSubstr("replays             7\n"));
  EXPECT_THAT(r, HasSubstr("arena_bytes         4096\n"));
  EXPECT_THAT(r, HasSubstr("mark_steps          0\n"));
  EXPECT_THAT(r, HasSubstr("sync_points         0\n"));
  EXPECT_THAT(r, HasSubstr("warnings            0\n"));
  EXPECT_THAT(r, HasSubstr("compile_time        count 100  total 5050.000 ms  p50 50.000 ms  "
                           "p90 90.000 ms  p99 99.000 ms\n"));
  EXPECT_THAT(r, HasSubstr("execute_time        count 0  total 0.000 ms"));
  EXPECT_THAT(r, HasSubstr("replay_time         count 1  total 12.500 ms  p50 12.500 ms"));
  // One line per reason, most frequent first, values aligned.
  const size_t host = r.find("  host constant changed  3\n");
  const size_t shape = r.find("  input shape changed    2\n");
  const size_t fresh = r.find("  new structure          1\n");
  ASSERT_NE(host, std::string::npos) << r;
  ASSERT_NE(shape, std::string::npos) << r;
  ASSERT_NE(fresh, std::string::npos) << r;
  EXPECT_LT(host, shape);
  EXPECT_LT(shape, fresh);
  // Reasons sit under compiles.
  EXPECT_LT(r.find("compiles "), host);
}

TEST_F(MetricsTest, SimulatedTimeSumsRunsAndDerivesFractions) {
  EXPECT_EQ(metrics().simulated.runs, 0);
  EXPECT_THAT(metrics_report(), Not(HasSubstr("simulated")));
  SimulatedTime run;
  run.runs = 1;
  run.programs = 2;
  run.seconds = 4e-6;
  run.busy_seconds = {{"Tensor", 1e-6}, {"Vector", 3e-6}, {"DMA", 2e-6}};
  run.tensor_peak_seconds = 0.5e-6;
  internal::record_simulated_run(run);
  const SimulatedTime one = metrics().simulated;
  internal::record_simulated_run(run);
  const SimulatedTime two = metrics().simulated;
  EXPECT_EQ(two.runs, 2);
  EXPECT_EQ(two.programs, 4);
  EXPECT_DOUBLE_EQ(two.seconds, 8e-6);
  EXPECT_DOUBLE_EQ(two.busy_fraction("Vector"), 0.75);
  EXPECT_DOUBLE_EQ(two.busy_fraction("Scalar"), 0);  // never busy
  EXPECT_DOUBLE_EQ(two.tensor_utilization(), 0.125);
  EXPECT_EQ(two.bottleneck(), "Vector");
  // A step: the difference of two snapshots.
  const SimulatedTime step = two.minus(one);
  EXPECT_EQ(step.runs, 1);
  EXPECT_DOUBLE_EQ(step.seconds, 4e-6);
  EXPECT_DOUBLE_EQ(step.busy_seconds.at("DMA"), 2e-6);
  EXPECT_EQ(SimulatedTime{}.bottleneck(), "");
  EXPECT_DOUBLE_EQ(SimulatedTime{}.busy_fraction("Tensor"), 0);
  EXPECT_THAT(metrics_report(),
              HasSubstr("simulated           0.008 ms simulated (2 runs, 4 tile programs); busy: "
                        "Tensor 25.0% Vector 75.0% Scalar 0.0%"));
  EXPECT_THAT(metrics_report(), HasSubstr("Tensor utilization 12.5%; bottleneck Vector"));
  reset_metrics();
  EXPECT_EQ(metrics().simulated.runs, 0);
}

TEST_F(MetricsTest, ReportCountsARealStep) {
  Tensor y = relu(ones({2}) * 2.0) - 1.0;
  mark_step();
  const std::string r = metrics_report();
  EXPECT_THAT(r, HasSubstr("mark_steps          1\n"));
  EXPECT_THAT(r, HasSubstr("graphs_executed     1\n"));
}

TEST_F(MetricsTest, SnapshotsWhileAnotherThreadRecords) {
  std::thread writer([] {
    for (int i = 0; i < 20'000; ++i) {
      internal::record_execute_time(1e-6);
      if (i % 100 == 0) internal::record_recompile_reason("new structure");
    }
  });
  int64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    const Metrics m = metrics();
    EXPECT_GE(m.execute_time.count, last); // monotonic while recording
    last = m.execute_time.count;
  }
  writer.join();
  const Metrics m = metrics();
  EXPECT_EQ(m.execute_time.count, 20'000);
  EXPECT_EQ(m.recompile_reasons.at("new structure"), 200);
}

// ---- Chrome trace --------------------------------------------------

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Asserts with Python's json module that `p` is valid JSON shaped as a
/// Chrome trace whose events are all complete events with dur >= 0, and
/// that an event named `name` of category `cat` is in it.
void expect_chrome_trace(const std::filesystem::path& p, const std::string& name,
                         const std::string& cat) {
  const std::string script =
      "import json,sys\n"
      "d=json.load(open(sys.argv[1],encoding='utf-8'))\n"
      "ev=d['traceEvents']\n"
      "assert all(e['ph']=='X' and e['dur']>=0 and e['ts']>=0 for e in ev), ev\n"
      "assert all(isinstance(e['pid'],int) and isinstance(e['tid'],int) for e in ev)\n"
      "assert any(e['name']==sys.argv[2] and e['cat']==sys.argv[3] for e in ev), ev\n";
  const std::filesystem::path py = p.string() + ".check.py";
  std::ofstream(py) << script;
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = "/usr/bin/python3 " + quote(py.string()) + " " + quote(p.string()) + " " +
                          quote(name) + " " + quote(cat);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "trace file:\n" << read_file(p);
  std::filesystem::remove(py);
}

class ChromeTraceTest : public ::testing::Test {
protected:
  void SetUp() override {
    // One directory per test process; a death test's child inherits it
    // through the environment, so both sides look at the same files.
    if (const char* d = std::getenv("MSTEP_TRACE_TEST_DIR")) {
      dir_ = d;
    } else {
      dir_ = std::filesystem::temp_directory_path() /
             ("mstep_trace_test_" + std::to_string(::getpid()));
      ::setenv("MSTEP_TRACE_TEST_DIR", dir_.c_str(), 1);
    }
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    set_trace_file("");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(ChromeTraceTest, WritesParseableEventsOnFlush) {
  const auto path = dir_ / "trace.json";
  set_trace_file(path.string());
  ASSERT_TRUE(internal::trace_enabled());
  const auto t0 = internal::Clock::now();
  internal::trace_event("compile", "runtime", t0, t0 + std::chrono::microseconds(1500));
  { internal::TraceScope scope("execute", "runtime"); }
  // Quotes, backslashes, control characters and bad UTF-8 must be escaped.
  internal::trace_event("odd \"name\" \\ \n\t\x01 \xff caf\xc3\xa9", "weird/cat", t0, t0);
  std::thread([] { internal::TraceScope scope("worker", "thread"); }).join();
  flush_trace();

  ASSERT_TRUE(std::filesystem::exists(path));
  expect_chrome_trace(path, "compile", "runtime");
  expect_chrome_trace(path, "execute", "runtime");
  expect_chrome_trace(path, "odd \"name\" \\ \n\t\x01 \xef\xbf\xbd caf\xc3\xa9", "weird/cat");
  expect_chrome_trace(path, "worker", "thread");
  const std::string text = read_file(path);
  EXPECT_THAT(text, HasSubstr("\"dur\":1500.000"));
  EXPECT_THAT(text, HasSubstr("\"ph\":\"X\""));
}

TEST_F(ChromeTraceTest, SimulatedDeviceTracksAreNamedProcessesAndThreads) {
  EXPECT_EQ(internal::device_trace_sink(), nullptr) << "no trace yet, no sink";
  const auto path = dir_ / "device.json";
  set_trace_file(path.string());
  internal::DeviceTraceSink* sink = internal::device_trace_sink();
  ASSERT_NE(sink, nullptr);
  const double t = sink->now_us();
  EXPECT_GE(t, 0);
  // Tracks named in first-use order, sorted by their order argument.
  sink->slice("dev \"x\"", "Vector", 3, "tensor_tensor", t, 2.5);
  sink->slice("dev \"x\"", "Tensor", 2, "nc_matmul", t + 1, 4);
  sink->slice("dev \"x\"", "Tensor", 2, "nc_matmul", t + 5, 1);
  flush_trace();
  const std::string script =
      "import json,sys\n"
      "ev=json.load(open(sys.argv[1],encoding='utf-8'))['traceEvents']\n"
      "m=[e for e in ev if e['ph']=='M']\n"
      "x=[e for e in ev if e['ph']=='X']\n"
      "pid=[e['pid'] for e in m if e['name']=='process_name' and e['args']['name']=='dev \"x\"']\n"
      "assert len(pid)==1 and pid[0]>(1<<22), m\n"
      "tid={e['args']['name']:e['tid'] for e in m if e['name']=='thread_name'}\n"
      "order={e['tid']:e['args']['sort_index'] for e in m if e['name']=='thread_sort_index'}\n"
      "assert order[tid['Tensor']]==2 and order[tid['Vector']]==3, (tid, order)\n"
      "assert len(x)==3 and all(e['pid']==pid[0] for e in x), x\n"
      "assert [e['name'] for e in x if e['tid']==tid['Tensor']]==['nc_matmul','nc_matmul'], x\n"
      "assert [e['dur'] for e in x if e['tid']==tid['Vector']]==[2.5], x\n";
  const auto py = dir_ / "check_device.py";
  std::ofstream(py) << script;
  EXPECT_EQ(std::system(("/usr/bin/python3 " + py.string() + " " + path.string()).c_str()), 0)
      << read_file(path);
  set_trace_file("");
  EXPECT_EQ(internal::device_trace_sink(), nullptr) << "stopping the trace removes the sink";
}

TEST_F(ChromeTraceTest, ThreadsGetDistinctSmallIds) {
  const auto path = dir_ / "threads.json";
  set_trace_file(path.string());
  { internal::TraceScope scope("main", "t"); }
  std::thread([] { internal::TraceScope scope("other", "t"); }).join();
  flush_trace();
  const std::string script =
      "import json,sys\n"
      "ev={e['name']:e for e in json.load(open(sys.argv[1],encoding='utf-8'))['traceEvents']}\n"
      "assert ev['main']['tid']!=ev['other']['tid'], ev\n"
      "assert 0<ev['main']['tid']<1000 and 0<ev['other']['tid']<1000, ev\n";
  const auto py = dir_ / "check.py";
  std::ofstream(py) << script;
  EXPECT_EQ(std::system(("/usr/bin/python3 " + py.string() + " " + path.string()).c_str()), 0)
      << read_file(path);
}

TEST_F(ChromeTraceTest, StoppingWritesAndDisables) {
  const auto path = dir_ / "stop.json";
  set_trace_file(path.string());
  { internal::TraceScope scope("before_stop", "t"); }
  set_trace_file(""); // writes what was recorded, then stops
  EXPECT_FALSE(internal::trace_enabled());
  { internal::TraceScope scope("after_stop", "t"); }
  flush_trace(); // nothing to write to: a no-op
  expect_chrome_trace(path, "before_stop", "t");
  EXPECT_THAT(read_file(path), Not(HasSubstr("after_stop")));
}

TEST_F(ChromeTraceTest, SwitchingFilesStartsAFreshTrace) {
  const auto first = dir_ / "first.json";
  const auto second = dir_ / "second.json";
  set_trace_file(first.string());
  { internal::TraceScope scope("one", "t"); }
  set_trace_file(second.string());
  { internal::TraceScope scope("two", "t"); }
  flush_trace();
  expect_chrome_trace(first, "one", "t");
  expect_chrome_trace(second, "two", "t");
  EXPECT_THAT(read_file(second), Not(HasSubstr("\"one\"")));
}

TEST_F(ChromeTraceTest, UnwritablePathWarns) {
  std::vector<std::string> warnings;
  set_warning_handler([&](absl::string_view w) { warnings.emplace_back(w); });
  set_trace_file((dir_ / "no_such_dir" / "t.json").string());
  { internal::TraceScope scope("x", "t"); }
  flush_trace();
  set_trace_file(""); // tries once more, warns again
  set_warning_handler(nullptr);
  ASSERT_FALSE(warnings.empty());
  EXPECT_THAT(warnings[0], HasSubstr("cannot write the trace file"));
}

// Fresh processes (threadsafe death tests re-run the binary), so the
// environment is read at first use and the exit hooks run.
TEST_F(ChromeTraceTest, EnvVarStartsTraceWrittenAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto path = dir_ / "env.json";
  ::setenv("MSTEP_TRACE", path.string().c_str(), 1);
  EXPECT_EXIT(
      {
        if (!internal::trace_enabled()) std::_Exit(3);
        { internal::TraceScope scope("from_env", "exit"); }
        std::exit(0); // no flush_trace(): the atexit hook writes the file
      },
      ::testing::ExitedWithCode(0), "");
  ::unsetenv("MSTEP_TRACE");
  ASSERT_TRUE(std::filesystem::exists(path));
  expect_chrome_trace(path, "from_env", "exit");
}

// ---- Host-fallback log ---------------------------------------------

/// Position of the first match of `re` in `s`, or npos.
size_t find_regex(const std::string& s, const std::string& re) {
  std::smatch m;
  if (!std::regex_search(s, m, std::regex(re))) return std::string::npos;
  return static_cast<size_t>(m.position(0));
}

TEST(FallbackLogTest, CountsPerOpAndDtypeSortedByCount) {
  reset_metrics();
  for (int i = 0; i < 3; ++i) internal::record_fallback("fb_test_often", DType::f32);
  internal::record_fallback("fb_test_rare", DType::i64);
  internal::record_fallback("fb_test_often", DType::bf16);
  internal::record_fallback("fb_test_often", DType::bf16);
  EXPECT_EQ(metrics().fallbacks, 6);

  const std::string t = internal::fallback_table();
  const size_t often = find_regex(t, "fb_test_often +f32 +3\n");
  const size_t bf16 = find_regex(t, "fb_test_often +bf16 +2\n");
  const size_t rare = find_regex(t, "fb_test_rare +i64 +1\n");
  ASSERT_NE(often, std::string::npos) << t;
  ASSERT_NE(bf16, std::string::npos) << t;
  ASSERT_NE(rare, std::string::npos) << t;
  EXPECT_LT(often, bf16);
  EXPECT_LT(bf16, rare);
  // The per-op counts survive reset_metrics(): the table covers the run.
  reset_metrics();
  EXPECT_EQ(metrics().fallbacks, 0);
  EXPECT_NE(find_regex(internal::fallback_table(), "fb_test_often +f32 +3\n"), std::string::npos);
}

TEST(FallbackLogTest, LogsEachCallWhenEnabled) {
  internal::set_log_fallback(true);
  ::testing::internal::CaptureStderr();
  internal::record_fallback("fb_logged", DType::f16);
  const std::string err = ::testing::internal::GetCapturedStderr();
  internal::set_log_fallback(false);
  EXPECT_EQ(err, "mstep fallback: fb_logged (f16) ran on the host\n");

  ::testing::internal::CaptureStderr();
  internal::record_fallback("fb_quiet", DType::f32);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_THAT(internal::fallback_table(), HasSubstr("fb_quiet")); // counted anyway
}

TEST(FallbackLogTest, EnvVarLogsAndPrintsTableAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ::setenv("MSTEP_LOG_FALLBACK", "1", 1);
  EXPECT_EXIT(
      {
        internal::record_fallback("fb_exit_b", DType::f32);
        internal::record_fallback("fb_exit_a", DType::i32);
        internal::record_fallback("fb_exit_a", DType::i32);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      "mstep fallback: fb_exit_b \\(f32\\) ran on the host\n"
      "mstep fallback: fb_exit_a \\(i32\\) ran on the host\n"
      "(.|\n)*most frequent first(.|\n)*fb_exit_a +i32 +2\n +fb_exit_b +f32 +1\n");
  ::unsetenv("MSTEP_LOG_FALLBACK");
}

} // namespace
} // namespace mstep
