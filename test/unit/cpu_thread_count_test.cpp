// A compiled cpu or xla step follows the OpenMP thread count it runs under:
// compiled and run at 1 thread, then run again (module-cache hit, or
// replay) after omp_set_num_threads(2), its kernels run on 2 threads, with
// the values of a step compiled at 2 threads.
//
// The observable is CPU time: the process's minus the calling thread's is
// what OpenMP's other threads spent. A oneDNN primitive created for one
// thread runs entirely on the caller, so before the rebuild that time stays
// near 0; with two threads the worker computes about half of the step's
// work (oneDNN splits statically), measured against the caller's time for
// the same runs at 1 thread (not against the caller's time at 2, which a
// busy machine inflates with barrier waits). The control is the same step
// compiled anew at 2 threads: when even that does not use the worker (a
// oneDNN that does not split the op on this CPU), the test is skipped
// rather than passed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <time.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <functional>
#include <vector>

#include "mstep/mstep.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/runtime/LoadedGraph.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {
namespace {

constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};

double cpu_seconds(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// CPU seconds the calling thread and all other threads spent in `body`.
struct CpuSplit {
  double caller = 0, others = 0;
  std::string describe() const {
    return "caller " + std::to_string(caller) + " s, others " + std::to_string(others) + " s";
  }
};
CpuSplit cpu_split(const std::function<void()>& body) {
  const double process0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  const double caller0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  body();
  const double caller = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - caller0;
  const double process = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - process0;
  return {caller, std::max(0.0, process - caller)};
}

Tensor wave(Device d, Shape s, int seed, DType dtype = DType::f32) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * static_cast<double>(i) + 1.37 * seed));
  return from_vector(v, s, DType::f32, d).to(dtype);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float rel) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], rel * (1 + std::abs(b[i]))) << "element " << i;
}

/// The CPU time split of `runs` calls of `step`, after one call (a rebuild
/// or compile happens there, not in the figure).
CpuSplit measure(const std::function<void()>& step, int runs = 6) {
  step();
  return cpu_split([&] {
    for (int i = 0; i < runs; ++i) step();
  });
}

/// Restores OpenMP's thread count and the module cache; skips where the
/// process cannot have 2 OpenMP threads.
class ThreadCountTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (omp_get_thread_limit() < 2) GTEST_SKIP() << "OMP_THREAD_LIMIT allows one thread";
    Tracer::get().cache().clear();
    mark_step();
    reset_metrics();
  }
  void TearDown() override {
    omp_set_num_threads(saved_);
    Tracer::get().cache().clear();
  }
  const int saved_ = omp_get_max_threads();
};

// With two threads the worker does about half the work: others ~0.5 of
// the 1-thread time (more while it spins between regions). A one-thread
// primitive leaves it near 0 (a worker still spinning from an earlier
// region adds ~0.2 ms per step, hence steps of 10+ ms). The line between.
constexpr double kWorkerShare = 0.25;

/// Whether the other threads did their share of the work that took `one`
/// (the same runs at 1 thread) on the caller.
bool uses_the_worker(const CpuSplit& split, const CpuSplit& one) {
  return split.others > kWorkerShare * one.caller;
}
std::string explain(const CpuSplit& split, const CpuSplit& one) {
  return split.describe() + "; the same runs at 1 thread: " + one.describe();
}

/// One matmul step (a oneDNN primitive on cpu) over fixed inputs: the same
/// graph at every call, so the module cache hits after the first.
struct MatmulStep {
  explicit MatmulStep(Device d, DType dtype = DType::f32, int64_t m = 776)
      : a(wave(d, {m, 1032}, 1, dtype)), b(wave(d, {1032, 760}, 2, dtype)) {
    mark_step();
  }
  std::vector<float> operator()() const {
    Tensor y = matmul(a, b);
    mark_step();
    return y.to(DType::f32).to_vector<float>();
  }
  /// The step captured into `g` (at the current thread count): its result.
  Tensor capture(Graph& g) const {
    CaptureGuard capturing(g);
    return matmul(a, b);
  }
  Tensor a, b;
};

/// What the tests compare with: `step` compiled and run at 1 thread (its
/// values, and its CPU time: the work), then `at_two` compiled anew at 2
/// threads (its values and CPU split). Leaves 1 thread set and the module
/// cache empty. A test skips when `at_two` does not use the worker: oneDNN
/// does not split the op here.
struct Control {
  Control(const MatmulStep& step, const MatmulStep& at_two) {
    Tracer::get().cache().clear();
    omp_set_num_threads(1);
    one = step();
    single = measure(step);
    omp_set_num_threads(2);
    Tracer::get().cache().clear();
    two = at_two();
    split = measure(at_two);
    omp_set_num_threads(1);
    Tracer::get().cache().clear();
  }
  explicit Control(const MatmulStep& step) : Control(step, step) {}
  bool splits() const { return uses_the_worker(split, single); }
  std::string why_not() const {
    return "oneDNN does not split the matmul over 2 threads here: " + explain(split, single);
  }
  std::vector<float> one, two;
  CpuSplit single, split;
};

/// `step` compiled and run at 1 thread (the Control's values), then run
/// again, a module-cache hit, at 2: its values, the metrics counting from
/// that run.
std::vector<float> compiled_at_one_run_at_two(const MatmulStep& step, const Control& c) {
  EXPECT_EQ(step(), c.one);
  reset_metrics();
  omp_set_num_threads(2);
  std::vector<float> two = step();
  EXPECT_EQ(metrics().compiles, 0);
  return two;
}

TEST_F(ThreadCountTest, CachedCpuStepRebuildsItsKernelsForANewCount) {
  MatmulStep step(kCpu);
  const Control c(step);
  if (!c.splits()) GTEST_SKIP() << c.why_not();
  const std::vector<float> two = compiled_at_one_run_at_two(step, c);
  EXPECT_EQ(metrics().cache_hits, 1);
  EXPECT_EQ(metrics().thread_rebuilds, 1);
  const CpuSplit reused = measure(step);
  EXPECT_TRUE(uses_the_worker(reused, c.single))
      << "the cached step ran on one thread at 2: " << explain(reused, c.single)
      << "; compiled at 2: " << c.split.describe();
  EXPECT_EQ(metrics().thread_rebuilds, 1) << "rebuilt once, not per run";
  // The same primitives as a step compiled at 2 threads: the same bits;
  // against 1 thread and ref, f32 rounding of a 1032-term sum.
  EXPECT_EQ(two, c.two);
  expect_near(two, c.one, 1e-5f);
  MatmulStep ref(kRef);
  expect_near(two, ref(), 1e-5f);
  // And back to 1: rebuilt again, the worker idle.
  omp_set_num_threads(1);
  EXPECT_EQ(step(), c.one);
  EXPECT_EQ(metrics().thread_rebuilds, 2);
  const CpuSplit back = measure(step);
  EXPECT_FALSE(uses_the_worker(back, c.single)) << explain(back, c.single);
}

TEST_F(ThreadCountTest, ReplayedGraphFollowsTheNewCount) {
  MatmulStep step(kCpu);
  const Control c(step);
  if (!c.splits()) GTEST_SKIP() << c.why_not();
  Graph g;
  const Tensor y = step.capture(g);
  EXPECT_EQ(y.to_vector<float>(), c.one);
  reset_metrics();
  omp_set_num_threads(2);
  g.replay();
  EXPECT_EQ(metrics().thread_rebuilds, 1);
  EXPECT_EQ(y.to_vector<float>(), c.two);
  const CpuSplit replayed = measure([&] { g.replay(); });
  EXPECT_TRUE(uses_the_worker(replayed, c.single))
      << "replays ran on one thread at 2: " << explain(replayed, c.single);
  EXPECT_EQ(metrics().thread_rebuilds, 1);
}

// The disk cache stores nothing that depends on the thread count (the
// graph, the arena plan, the fusion object): a step stored at 1 thread and
// loaded at 2 builds its kernels at load, for 2.
TEST_F(ThreadCountTest, DiskCacheEntryStoredAtOneThreadLoadsForTwo) {
  MatmulStep step(kCpu);
  const Control c(step);
  if (!c.splits()) GTEST_SKIP() << c.why_not();
  const std::string dir =
      (std::filesystem::temp_directory_path() / "mstep_thread_count_disk_cache").string();
  std::filesystem::remove_all(dir);
  RuntimeOptions saved = Tracer::get().options();
  Tracer::get().mutable_options().disk_cache = dir + ",false,64";
  Tracer::get().reset_disk_cache();
  EXPECT_EQ(step(), c.one);  // compiled at 1 thread, and stored
  Tracer::get().disk_cache()->flush();
  Tracer::get().cache().clear();
  reset_metrics();
  omp_set_num_threads(2);
  const std::vector<float> loaded = step();
  const Metrics m = metrics();
  const CpuSplit split = measure(step);
  Tracer::get().mutable_options() = saved;
  Tracer::get().reset_disk_cache();
  std::filesystem::remove_all(dir);
  EXPECT_EQ(m.compiles, 0);
  EXPECT_EQ(m.disk_hits, 1);
  EXPECT_EQ(m.thread_rebuilds, 0) << "built at load for the count then";
  EXPECT_EQ(loaded, c.two);
  EXPECT_TRUE(uses_the_worker(split, c.single)) << explain(split, c.single);
}

// An exported graph (Graph::save, load_graph: what mstep-run replays) holds
// nothing thread-dependent either: loaded at 1 thread and replayed at 2,
// it rebuilds its kernels once; loaded at 2, it builds them for 2.
TEST_F(ThreadCountTest, ExportedGraphFollowsTheCountItRunsUnder) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "mstep_thread_count_export.mstep";
  MatmulStep step(kCpu);
  const Control c(step);
  if (!c.splits()) GTEST_SKIP() << c.why_not();
  Graph g;
  const Tensor y = step.capture(g);
  g.save(path.string(), {{"a", step.a}, {"b", step.b}, {"y", y}});
  std::vector<float> out(c.two.size());
  auto replay_loaded = [&](LoadedGraph& loaded) {
    ASSERT_TRUE(loaded.replay().ok());
    ASSERT_TRUE(loaded.read("y", out.data(), out.size() * sizeof(float)).ok());
  };
  for (const int load_at : {1, 2}) {
    SCOPED_TRACE(::testing::Message() << "loaded at " << load_at << " thread(s)");
    omp_set_num_threads(load_at);
    auto loaded = load_graph(path.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    replay_loaded(**loaded);
    reset_metrics();
    omp_set_num_threads(2);
    replay_loaded(**loaded);
    EXPECT_EQ(metrics().thread_rebuilds, load_at == 1 ? 1 : 0);
    EXPECT_EQ(out, c.two);
    const CpuSplit split = measure([&] { replay_loaded(**loaded); });
    EXPECT_TRUE(uses_the_worker(split, c.single)) << explain(split, c.single);
  }
  std::filesystem::remove(path);
}

/// A matmul on xla: the step function's oneDNN matmul (mstep_xla_gemm_f32
/// or _bf16), whose primitives live for the process, one per shape and
/// thread count; the executable makes its gemm table's primitives for a
/// new count before the run (a thread rebuild). The control has its own
/// shape (m), so that it does not create the primitive the test checks.
/// `rel`: the tolerance against 1 thread and ref (the output's rounding).
void expect_xla_matmul_follows_the_count(DType dtype, int64_t m, float rel) {
  MatmulStep step(kXla, dtype, m);
  const Control c(step, MatmulStep(kXla, dtype, m - 32));
  if (!c.splits()) GTEST_SKIP() << c.why_not();
  const std::vector<float> two = compiled_at_one_run_at_two(step, c);
  EXPECT_EQ(metrics().thread_rebuilds, 1);
  const CpuSplit reused = measure(step);
  EXPECT_TRUE(uses_the_worker(reused, c.single))
      << "the cached xla step ran on one thread at 2: " << explain(reused, c.single);
  EXPECT_EQ(metrics().thread_rebuilds, 1) << "rebuilt once, not per run";
  expect_near(two, c.one, rel);
  MatmulStep ref(kRef, dtype, m);
  expect_near(two, ref(), rel);
  // And back to 1: the 1-thread primitive again, the worker idle.
  omp_set_num_threads(1);
  EXPECT_EQ(step(), c.one);
  const CpuSplit back = measure(step);
  EXPECT_FALSE(uses_the_worker(back, c.single)) << explain(back, c.single);
}

TEST_F(ThreadCountTest, XlaF32MatmulFollowsTheNewCount) {
  // f32 rounding of a 1032-term sum.
  expect_xla_matmul_follows_the_count(DType::f32, 808, 1e-5f);
}

TEST_F(ThreadCountTest, XlaBf16MatmulFollowsTheNewCount) {
  // bf16 results of f32 sums: a thread split may move a rounding by one
  // bf16 step (2^-8 relative).
  expect_xla_matmul_follows_the_count(DType::bf16, 744, 1e-2f);
}

}  // namespace
}  // namespace mstep
