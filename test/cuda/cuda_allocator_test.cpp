// The caching allocator against the fake driver: a released block is
// reused for a request of its size class without calling the driver,
// every cuMemFree frees a block once, out of memory empties the cache and
// retries before failing with the sizes, and empty_cache gives everything
// cached back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaAllocator.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

class CudaAllocatorTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto context = CudaContext::create(fake_.driver());
    ASSERT_TRUE(context.ok()) << context.status();
    allocator_ = std::make_unique<CudaAllocator>(std::move(*context));
  }
  size_t driver_allocs() const { return fake_.calls_named("cuMemAlloc").size(); }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaAllocator> allocator_;
};

TEST(CudaAllocatorSizeClass, RoundsTo512BytesUpTo1MiBAnd2MiBAbove) {
  EXPECT_EQ(CudaAllocator::size_class(0), 0u);
  EXPECT_EQ(CudaAllocator::size_class(1), 512u);
  EXPECT_EQ(CudaAllocator::size_class(512), 512u);
  EXPECT_EQ(CudaAllocator::size_class(513), 1024u);
  EXPECT_EQ(CudaAllocator::size_class(1 << 20), 1u << 20);
  EXPECT_EQ(CudaAllocator::size_class((1 << 20) + 1), 2u << 20);
  EXPECT_EQ(CudaAllocator::size_class((5u << 20) + 7), 6u << 20);
}

TEST_F(CudaAllocatorTest, AReleasedBlockIsReusedForItsSizeClassWithoutTheDriver) {
  auto first = allocator_->allocate(1000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->size, 1024u);
  CUdeviceptr address = first->pointer;
  allocator_->release(*first);
  EXPECT_EQ(allocator_->stats().bytes_cached, 1024u);
  EXPECT_EQ(allocator_->stats().bytes_in_use, 0u);
  // 600 bytes is the same class (1024): the cached block, no cuMemAlloc.
  auto second = allocator_->allocate(600);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->pointer, address);
  EXPECT_EQ(driver_allocs(), 1u);
  // Another class misses.
  auto third = allocator_->allocate(3000);
  ASSERT_TRUE(third.ok());
  EXPECT_NE(third->pointer, address);
  EXPECT_EQ(driver_allocs(), 2u);
  CudaAllocatorStats stats = allocator_->stats();
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.device_allocations, 2u);
  EXPECT_EQ(stats.requests, 3u);
  EXPECT_EQ(stats.bytes_in_use, 1024u + 3072u);
  EXPECT_EQ(stats.bytes_cached, 0u);
  allocator_->release(*second);
  allocator_->release(*third);
}

TEST_F(CudaAllocatorTest, ZeroBytesAllocateNothing) {
  auto block = allocator_->allocate(0);
  ASSERT_TRUE(block.ok());
  EXPECT_EQ(block->pointer, 0u);
  allocator_->release(*block);
  EXPECT_EQ(driver_allocs(), 0u);
  EXPECT_EQ(allocator_->bad_releases(), 0u);
}

TEST_F(CudaAllocatorTest, ADoubleReleaseIsIgnoredAndEveryBlockIsFreedOnce) {
  auto block = allocator_->allocate(4096);
  ASSERT_TRUE(block.ok());
  allocator_->release(*block);
  allocator_->release(*block); // the second is counted, not cached twice
  EXPECT_EQ(allocator_->bad_releases(), 1u);
  EXPECT_EQ(allocator_->stats().bytes_cached, 4096u);
  ASSERT_TRUE(allocator_->empty_cache().ok());
  // The fake aborts on a cuMemFree of memory it does not hold.
  EXPECT_EQ(fake_.calls_named("cuMemFree").size(), 1u);
  EXPECT_EQ(fake_.live_device, 0);
  EXPECT_EQ(allocator_->stats().bytes_cached, 0u);
  EXPECT_EQ(allocator_->stats().device_frees, 1u);
}

TEST_F(CudaAllocatorTest, OutOfMemoryEmptiesTheCacheRetriesThenNamesTheSizes) {
  fake_.device_memory = 8u << 20;
  auto a = allocator_->allocate(4u << 20);
  auto b = allocator_->allocate(2u << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  allocator_->release(*a); // 4 MiB cached, 2 MiB in use, 2 MiB free on the device
  // 6 MiB does not fit beside the cache: it is freed and the retry succeeds.
  auto c = allocator_->allocate(6u << 20);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(allocator_->stats().bytes_cached, 0u);
  EXPECT_EQ(fake_.calls_named("cuMemFree").size(), 1u);
  // Nothing cached and nothing free: ResourceExhausted with the sizes.
  auto d = allocator_->allocate(3u << 20);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(d.status().message(), HasSubstr("out of device memory allocating 3 MiB (size class 4 MiB)"));
  EXPECT_THAT(d.status().message(), HasSubstr("8 MiB in use by mstep, 0 bytes cached"));
  EXPECT_THAT(d.status().message(), HasSubstr("Fake GPU"));
  // Still usable: a release and a smaller request work.
  allocator_->release(*c);
  auto e = allocator_->allocate(1u << 20);
  ASSERT_TRUE(e.ok()) << e.status();
  allocator_->release(*b);
  allocator_->release(*e);
}

TEST_F(CudaAllocatorTest, TheErrorSaysWhatWasCachedBeforeTheRetry) {
  fake_.device_memory = 4u << 20;
  auto a = allocator_->allocate(2u << 20);
  ASSERT_TRUE(a.ok());
  allocator_->release(*a);
  auto big = allocator_->allocate(16u << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("0 bytes in use by mstep, 2 MiB cached (freed and retried)"));
  EXPECT_EQ(allocator_->stats().bytes_cached, 0u);
}

TEST_F(CudaAllocatorTest, DestroyingTheAllocatorFreesCachedAndLiveBlocks) {
  auto a = allocator_->allocate(100);
  auto b = allocator_->allocate(200000);
  ASSERT_TRUE(a.ok() && b.ok());
  allocator_->release(*a);
  EXPECT_EQ(fake_.live_device, 2);
  allocator_.reset();
  EXPECT_EQ(fake_.live_device, 0);
}

} // namespace
} // namespace mstep::cuda
