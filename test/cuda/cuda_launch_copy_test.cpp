// Copies and launches against the fake driver: copy_in, a launch and
// copy_out go on the context's one stream in program order, host data
// passes through the pinned staging buffers (in chunks, both buffers
// used), the launch configuration and every argument's bytes reach the
// driver as the kernel lays them out, and wrong launches are errors that
// name the kernel before anything is queued.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <set>

#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaStaging.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/TestKernels.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CudaLaunchCopyTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto context = CudaContext::create(fake_.driver());
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = std::move(*context);
    std::vector<std::string> names = {"saxpy", "empty_kernel"};
    auto module = CudaKernelModule::load(
        *context_, testing::read_test_kernel("test_kernels.sm_90.cubin"), "", names);
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    saxpy_ = *module_->kernel("saxpy");
  }
  /// The calls made on the context's stream, by name, in order.
  std::vector<std::string> stream_calls() const {
    std::vector<std::string> names;
    for (const auto& call : fake_.calls)
      if (call.stream == context_->stream() && call.name != "cuStreamCreate")
        names.push_back(call.name);
    return names;
  }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaContext> context_;
  std::unique_ptr<CudaKernelModule> module_;
  const CudaKernel* saxpy_ = nullptr;
};

TEST_F(CudaLaunchCopyTest, CopyInLaunchCopyOutRunInOrderOnOneStreamThroughStaging) {
  auto staging = CudaStaging::create(*context_, /*chunk_bytes=*/64);
  ASSERT_TRUE(staging.ok()) << staging.status();
  auto x = CudaDeviceBuffer::allocate(*context_, 40 * sizeof(float));
  ASSERT_TRUE(x.ok());
  std::vector<float> host(40);
  std::iota(host.begin(), host.end(), 1.0f);
  ASSERT_TRUE((*staging)->copy_in(x->pointer(), std::as_bytes(std::span(host))).ok());
  CudaKernelArgs args;
  args.add(40).add(2.0f).add(x->pointer()).add(x->pointer());
  ASSERT_TRUE(
      launch_kernel(*context_, *saxpy_, {.grid = {1, 1, 1}, .block = {64, 1, 1}}, args).ok());
  std::vector<float> back(40);
  ASSERT_TRUE((*staging)->copy_out(std::as_writable_bytes(std::span(back)), x->pointer()).ok());

  // 160 bytes in 64-byte chunks: three copies each way, each followed by
  // its slot's event; the launch between them.
  EXPECT_THAT(stream_calls(),
              ElementsAre("cuMemcpyHtoDAsync", "cuEventRecord", "cuMemcpyHtoDAsync",
                          "cuEventRecord", "cuMemcpyHtoDAsync", "cuEventRecord", "cuLaunchKernel",
                          "cuMemcpyDtoHAsync", "cuEventRecord", "cuMemcpyDtoHAsync",
                          "cuEventRecord", "cuMemcpyDtoHAsync", "cuEventRecord"));
  // Every host-side copy end is a pinned staging buffer, never the
  // caller's memory, and both staging buffers are used.
  std::set<uintptr_t> pinned;
  for (const auto& call : fake_.calls_named("cuMemHostAlloc")) pinned.insert(call.target);
  ASSERT_EQ(pinned.size(), 2u);
  std::set<uintptr_t> used;
  for (const auto& call : fake_.calls_named("cuMemcpyHtoDAsync")) used.insert(call.source);
  for (const auto& call : fake_.calls_named("cuMemcpyDtoHAsync")) used.insert(call.target);
  EXPECT_EQ(used, pinned);
  // The fake's device memory is host memory, so the bytes made the trip.
  EXPECT_EQ(back, host);
}

// A copy_in of at most CudaStaging::kRingCopyBytes (a learning rate, a
// replay's RNG state, a batch of token ids) takes the ring's next bytes: no
// wait for the copy before it (whose event, behind the work queued before
// it, would hold the host to the device), an event per group the ring
// leaves, a wait only when the ring comes round to a group, and a copy
// that does not fit the rest of a group starts the next one.
TEST_F(CudaLaunchCopyTest, CopiesInThroughTheRingWaitOnlyWhenItComesRound) {
  auto staging = CudaStaging::create(*context_);
  ASSERT_TRUE(staging.ok()) << staging.status();
  constexpr size_t kGroup = CudaStaging::kRingGroupBytes, kGroups = CudaStaging::kRingGroups;
  constexpr size_t kCopy = kGroup / 4;  // four copies a group
  auto device = CudaDeviceBuffer::allocate(*context_, kCopy * (4 * kGroups + 1));
  ASSERT_TRUE(device.ok());
  std::vector<uintptr_t> sources;
  auto copy = [&](size_t bytes, size_t at, int value) {
    std::vector<std::byte> host(bytes, std::byte(value));
    ASSERT_TRUE((*staging)->copy_in(device->pointer() + at, host).ok());
    sources.push_back(fake_.calls_named("cuMemcpyHtoDAsync").back().source);
  };
  for (size_t i = 0; i < 4 * kGroups; ++i) copy(kCopy, i * kCopy, static_cast<int>(i % 250));
  // Every byte of the ring used once, in order; an event as each group
  // filled; nothing waited.
  for (size_t i = 1; i < sources.size(); ++i) EXPECT_EQ(sources[i], sources[0] + i * kCopy);
  EXPECT_EQ(fake_.calls_named("cuEventRecord").size(), kGroups);
  EXPECT_TRUE(fake_.calls_named("cuEventSynchronize").empty());
  // Round again: group 0's event is waited for, once.
  copy(kCopy, 4 * kGroups * kCopy, 7);
  EXPECT_EQ(sources.back(), sources[0]);
  EXPECT_EQ(fake_.calls_named("cuEventSynchronize").size(), 1u);
  // The bytes arrived (the fake's device memory is host memory).
  const auto* bytes = reinterpret_cast<const unsigned char*>(device->pointer());
  for (size_t i = 0; i < 4 * kGroups; ++i) EXPECT_EQ(bytes[i * kCopy + kCopy - 1], i % 250);
  EXPECT_EQ(bytes[4 * kGroups * kCopy], 7);
  // Three quarters of a group do not fit after the quarter used: the ring
  // leaves group 0 (its event recorded) for group 1.
  copy(3 * kCopy + 1, 0, 9);
  EXPECT_EQ(sources.back(), sources[0] + kGroup);
  EXPECT_EQ(fake_.calls_named("cuEventRecord").size(), kGroups + 1);
  // Over kRingCopyBytes: through the chunk buffers.
  copy(CudaStaging::kRingCopyBytes + 1, 0, 3);
  EXPECT_TRUE(sources.back() < sources[0] || sources.back() >= sources[0] + kGroups * kGroup);
}

TEST_F(CudaLaunchCopyTest, LaunchPassesConfigurationAndEachArgumentsBytes) {
  CudaKernelArgs args;
  CUdeviceptr x = 0x7000, y = 0x8000;
  args.add(1000).add(0.5f).add(x).add(y);
  ASSERT_TRUE(launch_kernel(*context_, *saxpy_,
                            {.grid = {4, 2, 1}, .block = {256, 1, 1}, .shared_bytes = 128}, args)
                  .ok());
  auto launches = fake_.calls_named("cuLaunchKernel");
  ASSERT_EQ(launches.size(), 1u);
  const auto& launch = launches[0];
  EXPECT_EQ(launch.kernel, "saxpy");
  EXPECT_EQ(launch.stream, context_->stream());
  EXPECT_THAT(launch.grid, ElementsAre(4, 2, 1));
  EXPECT_THAT(launch.block, ElementsAre(256, 1, 1));
  EXPECT_EQ(launch.shared_bytes, 128u);
  ASSERT_EQ(launch.args.size(), 4u);
  int n;
  float a;
  CUdeviceptr px, py;
  std::memcpy(&n, launch.args[0].data(), 4);
  std::memcpy(&a, launch.args[1].data(), 4);
  std::memcpy(&px, launch.args[2].data(), 8);
  std::memcpy(&py, launch.args[3].data(), 8);
  EXPECT_EQ(n, 1000);
  EXPECT_EQ(a, 0.5f);
  EXPECT_EQ(px, x);
  EXPECT_EQ(py, y);
}

TEST_F(CudaLaunchCopyTest, ArgumentsNotMatchingTheKernelAreAnErrorAndNothingIsQueued) {
  CudaKernelArgs args;
  args.add(1000).add(0.5).add(CUdeviceptr{0}); // a double for the float, one missing
  absl::Status status = launch_kernel(*context_, *saxpy_, {}, args);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "cuda: kernel saxpy takes 4 (4 bytes at 0, 4 bytes at 4, 8 bytes at 8, 8 bytes at "
            "16) parameters; the launch passes 3 (4 bytes at 0, 8 bytes at 8, 8 bytes at 16)");
  EXPECT_TRUE(fake_.calls_named("cuLaunchKernel").empty());
}

TEST_F(CudaLaunchCopyTest, BadLaunchConfigurationsAreErrorsNamingTheKernel) {
  CudaKernelArgs args;
  args.add(1).add(1.0f).add(CUdeviceptr{0}).add(CUdeviceptr{0});
  absl::Status zero = launch_kernel(*context_, *saxpy_, {.grid = {0, 1, 1}}, args);
  EXPECT_THAT(std::string(zero.message()),
              HasSubstr("kernel saxpy: grid 0x1x1 and block 1x1x1 must have no "
                        "zero size"));
  absl::Status big = launch_kernel(*context_, *saxpy_, {.block = {64, 32, 1}}, args);
  EXPECT_THAT(std::string(big.message()),
              HasSubstr("kernel saxpy: block 64x32x1 has more than 1024 threads"));
  EXPECT_TRUE(fake_.calls_named("cuLaunchKernel").empty());
}

TEST_F(CudaLaunchCopyTest, DriverLaunchFailureNamesTheKernelAndConfiguration) {
  fake_.launch_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  CudaKernelArgs args;
  absl::Status status = launch_kernel(*context_, *module_->kernel("empty_kernel").value(),
                                      {.grid = {2, 1, 1}, .block = {32, 1, 1}}, args);
  EXPECT_EQ(status.message(), "cuLaunchKernel: CUDA_ERROR_ILLEGAL_ADDRESS (fake driver error), "
                              "kernel empty_kernel, grid 2x1x1, block 32x1x1");
}

TEST_F(CudaLaunchCopyTest, ContextAndBuffersReleaseWhatTheyTook) {
  {
    auto device = CudaDeviceBuffer::allocate(*context_, 1 << 20);
    auto staging = CudaStaging::create(*context_, 1024);
    ASSERT_TRUE(device.ok() && staging.ok());
    EXPECT_EQ(fake_.live_device, 1);
    EXPECT_EQ(fake_.live_pinned, 2);
  }
  EXPECT_EQ(fake_.live_device, 0);
  EXPECT_EQ(fake_.live_pinned, 0);
  module_.reset();
  context_.reset();
  EXPECT_EQ(fake_.retained_contexts, 0);
  EXPECT_EQ(fake_.calls_named("cuStreamDestroy").size(), 1u);
}

TEST_F(CudaLaunchCopyTest, DeviceInfoComesFromTheDriver) {
  EXPECT_EQ(context_->device().name, "Fake GPU");
  EXPECT_EQ(context_->device().arch(), "sm_90");
  EXPECT_EQ(context_->device().multiprocessor_count, 132);
  auto bad = CudaContext::create(fake_.driver(), 3);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("no device 3; the driver has 1 (ordinals 0 to 0)"));
}

} // namespace
} // namespace mstep::cuda
