// HostCopyPool: a split memcpy copies every byte once, whatever the size
// (below the parallel threshold, odd sizes, sizes not a multiple of the
// slices), the thread count, and across many jobs in a row.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/backends/cuda/HostCopyPool.h"

namespace mstep::cuda {
namespace {

TEST(HostCopyPool, CopiesEveryByteForAnySizeAndThreadCount) {
  for (unsigned threads : {1u, 2u, 3u, 8u}) {
    HostCopyPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4095}, HostCopyPool::min_parallel_bytes,
                         HostCopyPool::min_parallel_bytes * 3 + 7}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, " << bytes << " bytes");
      std::vector<uint8_t> source(bytes), target(bytes + 1, 0xEE);
      for (size_t i = 0; i < bytes; ++i) source[i] = static_cast<uint8_t>(i * 31 + (i >> 12));
      pool.copy(target.data(), source.data(), bytes);
      EXPECT_TRUE(std::equal(source.begin(), source.end(), target.begin()));
      EXPECT_EQ(target[bytes], 0xEE) << "wrote past the end";
    }
  }
}

TEST(HostCopyPool, ManyJobsInARowReuseTheWorkers) {
  HostCopyPool pool(4);
  std::vector<uint8_t> source(HostCopyPool::min_parallel_bytes * 2), target(source.size());
  for (int job = 0; job < 50; ++job) {
    for (size_t i = 0; i < source.size(); i += 4096) source[i] = static_cast<uint8_t>(job + i);
    pool.copy(target.data(), source.data(), source.size());
    ASSERT_EQ(source, target) << "job " << job;
  }
}

} // namespace
} // namespace mstep::cuda
