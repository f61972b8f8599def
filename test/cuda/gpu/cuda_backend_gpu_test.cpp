// CudaBackend on a real GPU (in cuda_driver_gpu_test's binary, label gpu):
// buffers of several dtypes and sizes (0 bytes too) round-trip bit for bit;
// saxpy queued through enqueue() writes a buffer and copy_out sees its
// result without a synchronize (and a second kernel takes the first's
// output without a wait); a training-like loop of steps allocates from the
// cache after the first step; asking for more memory than the card has is
// ResourceExhausted and the backend keeps working. Pageable copy_in /
// copy_out bandwidths through the backend (multithreaded staging) and
// through one-thread staging are printed, not asserted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/EnqueueSaxpy.h"
#include "test/cuda/TestKernels.h"
#include "test/cuda/gpu/GpuBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

class CudaBackendGpuTest : public testing::GpuBackendTest {
protected:
  void SetUp() override {
    GpuBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto module = testing::load_test_kernels(backend_->context(), {"saxpy"});
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
  }
  void TearDown() override {
    module_.reset();
    backend_.reset();
  }
  /// Queues y = a * x + y through the backend.
  absl::Status saxpy(float a, const BufferPtr& x, const BufferPtr& y) {
    return testing::enqueue_saxpy(*backend_, **module_->kernel("saxpy"), a, x, y);
  }
  BufferPtr upload(const std::vector<float>& host) {
    TensorType type{Shape{static_cast<int64_t>(host.size())}, DType::f32};
    auto buffer = backend_->allocate(type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return nullptr;
    EXPECT_TRUE(backend_->copy_in(**buffer, host.data(), type.bytes()).ok());
    return *buffer;
  }
  std::unique_ptr<CudaKernelModule> module_;
};

template <typename T>
void expect_round_trip(Backend& backend, DType dtype, int64_t n) {
  TensorType type{Shape{n}, dtype};
  SCOPED_TRACE(type.to_string());
  std::vector<T> in(n), out(n);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<T>((i * 2654435761u) >> 7);
  auto buffer = backend.allocate(type);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  ASSERT_TRUE(backend.copy_in(**buffer, in.data(), type.bytes()).ok());
  absl::Status copied = backend.copy_out(**buffer, out.data(), type.bytes());
  ASSERT_TRUE(copied.ok()) << copied;
  EXPECT_TRUE(in == out);
}

TEST_F(CudaBackendGpuTest, BuffersOfSeveralDtypesAndSizesRoundTrip) {
  expect_round_trip<float>(*backend_, DType::f32, 1);
  expect_round_trip<float>(*backend_, DType::f32, (40 << 20) / 4 + 3); // > one staging chunk
  expect_round_trip<int64_t>(*backend_, DType::i64, 1000);
  expect_round_trip<uint16_t>(*backend_, DType::bf16, 1000003);
  expect_round_trip<uint8_t>(*backend_, DType::boolean, 17);
  expect_round_trip<int32_t>(*backend_, DType::i32, 0);
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_F(CudaBackendGpuTest, CopyOutSeesTheKernelsResultWithoutASynchronize) {
  const int n = (1 << 22) + 5;
  std::vector<float> x(n), y(n), expected(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * static_cast<float>(i % 1000) - 3.0f;
    y[i] = 1.0f - 0.25f * static_cast<float>(i % 777);
    // Two kernels in a row: y1 = 2.5 x + y, then y2 = -1.5 x + y1.
    expected[i] = std::fmaf(-1.5f, x[i], std::fmaf(2.5f, x[i], y[i]));
  }
  BufferPtr bx = upload(x), by = upload(y);
  ASSERT_TRUE(bx && by);
  ASSERT_TRUE(saxpy(2.5f, bx, by).ok());
  // The second reads the first's output at once: the stream orders them.
  ASSERT_TRUE(saxpy(-1.5f, bx, by).ok());
  absl::Status copied = backend_->copy_out(*by, out.data(), n * sizeof(float));
  ASSERT_TRUE(copied.ok()) << copied;
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += std::memcmp(&out[i], &expected[i], sizeof(float)) != 0;
  EXPECT_EQ(wrong, 0) << "elements differing from fmaf's";
  // copy_in into x while nothing waits: later kernels see the new values.
  std::vector<float> ones(n, 1.0f);
  ASSERT_TRUE(backend_->copy_in(*bx, ones.data(), n * sizeof(float)).ok());
  ASSERT_TRUE(saxpy(1.0f, bx, by).ok());
  ASSERT_TRUE(backend_->copy_out(*by, out.data(), n * sizeof(float)).ok());
  EXPECT_EQ(out[12345], expected[12345] + 1.0f);
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_F(CudaBackendGpuTest, StepsAfterTheFirstAllocateFromTheCache) {
  const int n = 1 << 18;
  std::vector<float> x(n, 2.0f), y(n, 1.0f), out(n);
  for (int step = 0; step < 5; ++step) {
    BufferPtr bx = upload(x), by = upload(y);
    auto scratch = backend_->allocate(TensorType{Shape{n / 2}, DType::f32});
    ASSERT_TRUE(bx && by && scratch.ok());
    ASSERT_TRUE(saxpy(3.0f, bx, by).ok());
    ASSERT_TRUE(backend_->copy_out(*by, out.data(), n * sizeof(float)).ok());
    ASSERT_EQ(out[n - 1], 7.0f) << "step " << step;
    // The buffers go back to the cache here, with the step's work done or not.
  }
  CudaAllocatorStats stats = backend_->allocator().stats();
  std::printf("allocator after 5 steps: %zu requests, %zu cache hits, %zu cuMemAlloc, %zu MiB "
              "cached, peak %zu MiB in use\n",
              stats.requests, stats.cache_hits, stats.device_allocations, stats.bytes_cached >> 20,
              stats.peak_bytes_in_use >> 20);
  EXPECT_EQ(stats.device_allocations, 3u);
  EXPECT_EQ(stats.cache_hits, 12u);
  ASSERT_TRUE(backend_->allocator().empty_cache().ok());
  EXPECT_EQ(backend_->allocator().stats().bytes_cached, 0u);
}

TEST_F(CudaBackendGpuTest, MoreMemoryThanTheCardHasIsAnErrorAndTheBackendStaysUsable) {
  size_t total = backend_->context().device().total_memory;
  auto small = backend_->allocate(TensorType{Shape{1024}, DType::f32});
  ASSERT_TRUE(small.ok());
  small->reset(); // cached: the failing request empties the cache first
  auto huge = backend_->allocate(TensorType{Shape{static_cast<int64_t>(total / 2)}, DType::f32});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_THAT(huge.status().message(), HasSubstr("out of device memory allocating"));
  EXPECT_THAT(huge.status().message(), HasSubstr(backend_->context().device().name));
  std::printf("out of memory: %s\n", std::string(huge.status().message()).c_str());
  EXPECT_TRUE(backend_->health().ok());
  expect_round_trip<float>(*backend_, DType::f32, 1 << 20);
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_F(CudaBackendGpuTest, PrintsPageableCopyBandwidth) {
  constexpr size_t kBytes = size_t{256} << 20;
  std::vector<std::byte> host(kBytes), back(kBytes);
  for (size_t i = 0; i < kBytes; i += 4096) host[i] = static_cast<std::byte>(i >> 12);
  auto buffer = backend_->allocate(TensorType{Shape{static_cast<int64_t>(kBytes)}, DType::boolean});
  ASSERT_TRUE(buffer.ok());
  auto gbps = [&](Clock::time_point t) {
    return static_cast<double>(kBytes) /
           std::chrono::duration<double>(Clock::now() - t).count() / 1e9;
  };
  // Warm: the first touch of the pinned chunks and the pool's threads.
  ASSERT_TRUE(backend_->copy_in(**buffer, host.data(), kBytes).ok());
  ASSERT_TRUE(backend_->synchronize().ok());
  Clock::time_point t = Clock::now();
  ASSERT_TRUE(backend_->copy_in(**buffer, host.data(), kBytes).ok());
  ASSERT_TRUE(backend_->synchronize().ok());
  double in = gbps(t);
  t = Clock::now();
  ASSERT_TRUE(backend_->copy_out(**buffer, back.data(), kBytes).ok());
  double out = gbps(t);
  EXPECT_TRUE(host == back);

  // The same through one-thread staging of 16 MiB chunks (the first GPU
  // run's 5.8 GB/s), on the same stream.
  auto staging = CudaStaging::create(backend_->context(), size_t{16} << 20, 1);
  ASSERT_TRUE(staging.ok());
  CUdeviceptr device = CudaBackend::device_pointer(**buffer);
  ASSERT_TRUE((*staging)->copy_in(device, host).ok());
  ASSERT_TRUE(backend_->context().synchronize().ok());
  t = Clock::now();
  ASSERT_TRUE((*staging)->copy_in(device, host).ok());
  ASSERT_TRUE(backend_->context().synchronize().ok());
  double in_one = gbps(t);
  t = Clock::now();
  ASSERT_TRUE((*staging)->copy_out(back, device).ok());
  double out_one = gbps(t);
  std::printf("256 MiB pageable: backend copy_in %.1f GB/s, copy_out %.1f GB/s (staging %zu MiB "
              "chunks, %u copy threads); one-thread staging 16 MiB chunks: copy_in %.1f GB/s, "
              "copy_out %.1f GB/s\n",
              in, out, CudaStaging::kDefaultChunkBytes >> 20, HostCopyPool::default_threads(),
              in_one, out_one);
}

} // namespace
} // namespace mstep::cuda
