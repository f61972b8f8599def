// CudaBackend against the fake driver: buffers of several dtypes and
// sizes (0 bytes too) round-trip through copy_in/copy_out; a kernel queued
// through enqueue() writes a buffer and copy_out waits for its event
// first; copy_in needs no wait (one stream); buffers return to the
// allocator's cache; wrong buffers and sizes are errors; a device fault is
// an error naming the kernel that says the context is unusable, and every
// later call says so too. And "cuda" in the registry: unavailable with the
// reason where no driver is, the other backends unaffected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/EnqueueSaxpy.h"
#include "test/cuda/TestKernels.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto backend = CudaBackend::create(fake_.driver(), {.staging_chunk_bytes = 256});
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    std::vector<std::string> names = {"saxpy", "write_out_of_bounds"};
    auto module = CudaKernelModule::load(backend_->context(),
                                         testing::read_test_kernel("test_kernels.sm_90.cubin"), "",
                                         names);
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
  }
  void TearDown() override {
    module_.reset();
    backend_.reset();
  }
  /// Queues saxpy(y = a * x + y) on the backend, reading x, writing y.
  absl::Status saxpy(float a, const BufferPtr& x, const BufferPtr& y) {
    return testing::enqueue_saxpy(*backend_, **module_->kernel("saxpy"), a, x, y);
  }
  /// The position of the first call named `name` after call `from`.
  size_t find_call(const std::string& name, size_t from = 0) const {
    for (size_t i = from; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == name) return i;
    return fake_.calls.size();
  }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaBackend> backend_;
  std::unique_ptr<CudaKernelModule> module_;
};

template <typename T> void round_trip(Backend& backend, DType dtype, std::vector<int64_t> dims) {
  TensorType type{Shape(absl::Span<const int64_t>(dims)), dtype};
  SCOPED_TRACE(type.to_string());
  std::vector<T> in(type.shape.numel()), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<T>(i * 7 + 3);
  auto buffer = backend.allocate(type);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ((*buffer)->device().type, DeviceType::cuda);
  ASSERT_TRUE(backend.copy_in(**buffer, in.data(), type.bytes()).ok());
  ASSERT_TRUE(backend.copy_out(**buffer, out.data(), type.bytes()).ok());
  EXPECT_EQ(in, out);
}

TEST_F(CudaBackendTest, BuffersOfSeveralDtypesAndSizesRoundTrip) {
  round_trip<float>(*backend_, DType::f32, {3, 5});
  round_trip<int64_t>(*backend_, DType::i64, {100}); // several staging chunks
  round_trip<uint16_t>(*backend_, DType::bf16, {7});
  round_trip<uint8_t>(*backend_, DType::boolean, {1});
  round_trip<int32_t>(*backend_, DType::i32, {0, 4}); // 0 bytes
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_F(CudaBackendTest, ZeroByteBuffersNeedNoDeviceMemory) {
  auto buffer = backend_->allocate(TensorType{Shape{0}, DType::f32});
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ(CudaBackend::device_pointer(**buffer), 0u);
  EXPECT_EQ(fake_.calls_named("cuMemAlloc").size(), 0u);
}

TEST_F(CudaBackendTest, CopyOutWaitsForTheKernelThatWritesTheBuffer) {
  TensorType type{Shape{8}, DType::f32};
  std::vector<float> x(8), y(8, 1.0f), out(8);
  std::iota(x.begin(), x.end(), 0.0f);
  BufferPtr bx = *backend_->allocate(type), by = *backend_->allocate(type);
  ASSERT_TRUE(backend_->copy_in(*bx, x.data(), type.bytes()).ok());
  ASSERT_TRUE(backend_->copy_in(*by, y.data(), type.bytes()).ok());
  ASSERT_TRUE(saxpy(2.0f, bx, by).ok());
  size_t launched = find_call("cuLaunchKernel");
  ASSERT_LT(launched, fake_.calls.size());
  // The launch's event is recorded right after it on the stream, and
  // copy_out waits for it before the device-to-host copy.
  EXPECT_EQ(fake_.calls[launched + 1].name, "cuEventRecord");
  EXPECT_EQ(fake_.calls[launched + 1].stream, backend_->context().stream());
  fake_.calls.clear();
  ASSERT_TRUE(backend_->copy_out(*by, out.data(), type.bytes()).ok());
  size_t waited = find_call("cuEventSynchronize");
  EXPECT_LT(waited, find_call("cuMemcpyDtoHAsync"));
  EXPECT_EQ(fake_.calls_named("cuStreamSynchronize").size(), 0u) << "no whole-stream wait";
  // The fake runs no kernel: y is what copy_in put there. The GPU test
  // checks the values.
  EXPECT_EQ(out, y);
}

TEST_F(CudaBackendTest, CopyInIntoABufferAKernelReadsIsQueuedBehindItWithoutWaiting) {
  TensorType type{Shape{8}, DType::f32};
  std::vector<float> host(8, 2.0f);
  BufferPtr bx = *backend_->allocate(type), by = *backend_->allocate(type);
  ASSERT_TRUE(saxpy(1.0f, bx, by).ok());
  fake_.calls.clear();
  ASSERT_TRUE(backend_->copy_in(*bx, host.data(), type.bytes()).ok());
  // One stream orders the copy after the kernel; the host does not block.
  EXPECT_EQ(fake_.calls_named("cuEventSynchronize").size(), 0u);
  ASSERT_EQ(fake_.calls_named("cuMemcpyHtoDAsync").size(), 1u);
  EXPECT_EQ(fake_.calls_named("cuMemcpyHtoDAsync")[0].stream, backend_->context().stream());
}

TEST_F(CudaBackendTest, FreedBuffersGoBackToTheCacheForTheNextStep) {
  TensorType type{Shape{256}, DType::f32};
  for (int step = 0; step < 3; ++step) {
    BufferPtr a = *backend_->allocate(type), b = *backend_->allocate(type);
    (void)a, (void)b;
  }
  CudaAllocatorStats stats = backend_->allocator().stats();
  EXPECT_EQ(stats.device_allocations, 2u);
  EXPECT_EQ(stats.cache_hits, 4u);
  EXPECT_EQ(fake_.calls_named("cuMemAlloc").size(), 2u);
}

TEST_F(CudaBackendTest, WrongBuffersAndSizesAreErrors) {
  TensorType type{Shape{4}, DType::f32};
  BufferPtr b = *backend_->allocate(type);
  float host[8] = {};
  absl::Status in = backend_->copy_in(*b, host, 8);
  EXPECT_EQ(in.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(in.message(), HasSubstr("cuda copy_in of 8 bytes with f32[4] (16 bytes)"));
  Buffer foreign(type, Device{DeviceType::cpu, 0});
  EXPECT_THAT(backend_->copy_out(foreign, host, 16).message(), HasSubstr("cuda copy_out of a cpu"));
}

TEST_F(CudaBackendTest, OutOfMemoryNamesTheBufferAndTheBackendStaysUsable) {
  fake_.device_memory = 1u << 20;
  auto big = backend_->allocate(TensorType{Shape{1 << 20}, DType::f32});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("out of device memory allocating 4 MiB"));
  EXPECT_THAT(big.status().message(), HasSubstr("(a buffer of f32[1048576])"));
  round_trip<float>(*backend_, DType::f32, {16});
}

TEST_F(CudaBackendTest, ADeviceFaultNamesTheKernelAndEveryLaterCallSaysTheContextIsLost) {
  TensorType type{Shape{4}, DType::f32};
  BufferPtr b = *backend_->allocate(type);
  const CudaKernel* kernel = *module_->kernel("write_out_of_bounds");
  CudaKernelArgs args;
  args.add(CUdeviceptr{0});
  const Buffer* writes[] = {b.get()};
  fake_.device_fault = CUDA_ERROR_ILLEGAL_ADDRESS;
  ASSERT_TRUE(backend_
                  ->enqueue("kernel write_out_of_bounds",
                            [&] { return launch_kernel(backend_->context(), *kernel, {}, args); },
                            {}, writes)
                  .ok());
  float host[4];
  absl::Status out = backend_->copy_out(*b, host, sizeof(host));
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.message(), HasSubstr("kernel write_out_of_bounds failed on the device"));
  EXPECT_THAT(out.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_THAT(out.message(), HasSubstr("the CUDA context is unusable"));
  EXPECT_EQ(backend_->synchronize().message(), out.message());
  EXPECT_EQ(backend_->allocate(type).status().message(), out.message());
  EXPECT_EQ(backend_->copy_in(*b, host, sizeof(host)).message(), out.message());
  EXPECT_EQ(backend_->health().message(), out.message());
}

TEST_F(CudaBackendTest, ALaunchTheDriverRefusesIsReturnedAtOnceAndTracksNothing) {
  TensorType type{Shape{4}, DType::f32};
  BufferPtr x = *backend_->allocate(type), y = *backend_->allocate(type);
  fake_.launch_result = CUDA_ERROR_INVALID_VALUE;
  absl::Status launched = saxpy(1.0f, x, y);
  EXPECT_THAT(launched.message(), HasSubstr("kernel saxpy: "));
  EXPECT_THAT(launched.message(), HasSubstr("CUDA_ERROR_INVALID_VALUE"));
  EXPECT_TRUE(backend_->health().ok());
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST(CudaBackendRegistry, CudaIsRegisteredAndUnavailableWithoutADriver) {
  EXPECT_EQ(*BackendRegistry::device_type("cuda"), DeviceType::cuda);
  absl::StatusOr<Backend*> cuda = BackendRegistry::get("cuda");
  if (cuda.ok()) GTEST_SKIP() << "this machine has a usable CUDA driver";
  EXPECT_EQ(cuda.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(cuda.status().message(), HasSubstr("cuda: unavailable: "));
  EXPECT_THAT(cuda.status().message(), HasSubstr("libcuda.so.1"));
  // Asked again: the same reason (created once), and cpu works.
  EXPECT_EQ(BackendRegistry::get(DeviceType::cuda).status(), cuda.status());
  absl::StatusOr<Backend*> cpu = BackendRegistry::get("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto buffer = (*cpu)->allocate(TensorType{Shape{2}, DType::f32});
  EXPECT_TRUE(buffer.ok());
}

} // namespace
} // namespace mstep::cuda
