// cpu_parallel_for (mstep/runtime/CustomOp.h), the helper custom cpu
// kernels split work with: every index exactly once for any n and grain,
// ranges no shorter than the grain and no more than the backend's threads,
// nested calls, and exceptions. ctest runs it again with OMP_NUM_THREADS=4
// (cpu_parallel_for_4_threads), so the parallel path runs on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "mstep/runtime/CustomOp.h"

namespace mstep {
namespace {

/// Calls cpu_parallel_for(n, grain) and records how often each index was
/// visited and the ranges it was given.
struct Coverage {
  std::unique_ptr<std::atomic<int>[]> hits;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::set<std::thread::id> threads;

  Coverage(int64_t n, int64_t grain) : hits(new std::atomic<int>[std::max<int64_t>(n, 1)]()) {
    std::mutex mutex;
    cpu_parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++hits[i];
      std::lock_guard<std::mutex> lock(mutex);
      ranges.emplace_back(begin, end);
      threads.insert(std::this_thread::get_id());
    });
  }
};

TEST(CpuParallelFor, CoversEveryIndexExactlyOnceForAnySizeAndGrain) {
  for (int64_t n : {1, 2, 7, 64, 1000, 100003})
    for (int64_t grain : {-3, 0, 1, 5, 64, 1000, 1 << 20}) {
      Coverage c(n, grain);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(c.hits[i], 1) << "index " << i << " of n=" << n << " grain=" << grain;
      // Disjoint, in bounds, each at least one grain long (a single range
      // may be shorter: n itself is), at most one per thread.
      ASSERT_FALSE(c.ranges.empty());
      EXPECT_LE(c.ranges.size(), static_cast<size_t>(cpu_thread_count()));
      EXPECT_LE(c.threads.size(), static_cast<size_t>(cpu_thread_count()));
      for (auto [begin, end] : c.ranges) {
        EXPECT_LT(begin, end);
        if (c.ranges.size() > 1) EXPECT_GE(end - begin, std::max<int64_t>(grain, 1));
      }
    }
}

TEST(CpuParallelFor, NothingRunsForAnEmptyOrNegativeRange) {
  int calls = 0;
  cpu_parallel_for(0, 1, [&](int64_t, int64_t) { ++calls; });
  cpu_parallel_for(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(CpuParallelFor, SplitsLargeWorkOverTheBackendsThreads) {
  Coverage c(1 << 16, 1);
  EXPECT_EQ(c.ranges.size(), static_cast<size_t>(cpu_thread_count()));
}

TEST(CpuParallelFor, ANestedCallCoversItsRangeToo) {
  constexpr int64_t kOuter = 64, kInner = 1000;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  cpu_parallel_for(kOuter, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o)
      cpu_parallel_for(kInner, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) ++hits[o * kInner + i];
      });
  });
  for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << i;
}

TEST(CpuParallelFor, AnExceptionReachesTheCallerAndTheHelperStaysUsable) {
  std::atomic<int64_t> covered{0};
  EXPECT_THROW(cpu_parallel_for(1 << 16, 1,
                                [&](int64_t begin, int64_t end) {
                                  covered += end - begin;
                                  if (begin == 0) throw std::runtime_error("bad range");
                                }),
               std::runtime_error);
  EXPECT_EQ(covered, 1 << 16) << "the other ranges still ran";
  Coverage after(1000, 1);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(after.hits[i], 1);
}

} // namespace
} // namespace mstep
