// The async_host test backend's stream: queued work runs late and in order,
// copy_out waits for the work that writes a buffer, copy_in for the work
// that reads it, deferred errors surface at the next sync point, and no
// host pointer is handed out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "lib/backends/async_host/AsyncHostBackend.h"
#include "mstep/mstep.h"

namespace mstep::async_host {
namespace {

using ::testing::HasSubstr;

const TensorType kType{Shape{3}, DType::f32};
constexpr int64_t kDelayUs = 20000;  // long enough that the host runs ahead

Backend& backend() { return **BackendRegistry::get(DeviceType::async_host); }
AsyncHostBackend& stream() { return static_cast<AsyncHostBackend&>(backend()); }

BufferPtr buffer_of(std::vector<float> v) {
  BufferPtr b = *backend().allocate(kType);
  EXPECT_TRUE(backend().copy_in(*b, v.data(), v.size() * sizeof(float)).ok());
  return b;
}

std::vector<float> read(const Buffer& b) {
  std::vector<float> v(3);
  absl::Status s = backend().copy_out(b, v.data(), v.size() * sizeof(float));
  EXPECT_TRUE(s.ok()) << s;
  return v;
}

/// Work computing out = in * factor, on host memory.
HostWork scale(float factor, std::atomic<int>* runs = nullptr) {
  return [factor, runs](const std::vector<BufferPtr>& in) -> absl::StatusOr<std::vector<BufferPtr>> {
    const auto& x = static_cast<const host::HostBuffer&>(*in[0]);
    auto y = std::make_shared<host::HostBuffer>(x.type());
    for (int64_t i = 0; i < x.numel(); ++i) y->data<float>()[i] = x.data<float>()[i] * factor;
    if (runs) ++*runs;
    return std::vector<BufferPtr>{y};
  };
}

TEST(AsyncHostBackendTest, RunsLateAndCopyOutWaitsForTheWriter) {
  BufferPtr x = buffer_of({1, 2, 3});
  BufferPtr y = *backend().allocate(kType), z = *backend().allocate(kType);
  std::atomic<int> runs{0};
  stream().enqueue({x}, {y}, scale(2, &runs), kDelayUs);
  stream().enqueue({y}, {z}, scale(10, &runs), kDelayUs);  // reads y before it is written
  EXPECT_EQ(runs.load(), 0);  // enqueue returned before the work ran
  EXPECT_EQ(read(*z), (std::vector<float>{20, 40, 60}));
  EXPECT_EQ(runs.load(), 2);
}

TEST(AsyncHostBackendTest, CopyInWaitsForQueuedReaders) {
  BufferPtr x = buffer_of({1, 2, 3});
  BufferPtr y = *backend().allocate(kType);
  stream().enqueue({x}, {y}, scale(1), kDelayUs);
  std::vector<float> next{7, 8, 9};
  ASSERT_TRUE(backend().copy_in(*x, next.data(), 3 * sizeof(float)).ok());
  EXPECT_EQ(read(*y), (std::vector<float>{1, 2, 3}));  // the work read the old x
  EXPECT_EQ(read(*x), next);
}

TEST(AsyncHostBackendTest, DeferredErrorSurfacesAtSyncPoints) {
  ASSERT_TRUE(backend().synchronize().ok());
  BufferPtr x = buffer_of({1, 2, 3});
  BufferPtr y = *backend().allocate(kType), z = *backend().allocate(kType);
  stream().enqueue({x}, {y},
                   [](const std::vector<BufferPtr>&) -> absl::StatusOr<std::vector<BufferPtr>> {
                     return absl::InvalidArgumentError("kernel failed");
                   },
                   0);
  stream().enqueue({y}, {z}, scale(2), 0);  // depends on the failed work
  std::vector<float> out(3);
  EXPECT_THAT(backend().copy_out(*z, out.data(), 12).message(), HasSubstr("kernel failed"));
  EXPECT_THAT(backend().copy_out(*y, out.data(), 12).message(), HasSubstr("kernel failed"));
  EXPECT_THAT(backend().synchronize().message(), HasSubstr("kernel failed"));
  EXPECT_TRUE(backend().synchronize().ok());  // reported once
  // The stream keeps working, and writing the buffer clears its error.
  ASSERT_TRUE(backend().copy_in(*y, out.data(), 12).ok());
  BufferPtr w = *backend().allocate(kType);
  stream().enqueue({x}, {w}, scale(3), 0);
  EXPECT_EQ(read(*w), (std::vector<float>{3, 6, 9}));
}

TEST(AsyncHostBackendTest, MemoryStaysOpaque) {
  std::vector<float> host(3);
  absl::StatusOr<BufferPtr> wrapped = backend().wrap_host(kType, host.data(), [] {});
  EXPECT_EQ(wrapped.status().code(), absl::StatusCode::kUnimplemented);
  BufferPtr x = buffer_of({1, 2, 3});
  EXPECT_THAT(backend().copy_out(*x, host.data(), 4).message(), HasSubstr("copy_out of 4 bytes"));
  EXPECT_THAT(backend().copy_in(*x, host.data(), 4).message(), HasSubstr("copy_in of 4 bytes"));
  BufferPtr on_ref = *(*BackendRegistry::get(DeviceType::ref))->allocate(kType);
  EXPECT_THAT(backend().copy_out(*on_ref, host.data(), 12).message(), HasSubstr("ref:0 buffer"));
}

TEST(AsyncHostBackendTest, TensorStepsRunThroughTheStream) {
  const Device dev{DeviceType::async_host, 0};
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3}).to(dev);
  Tensor y = (x * 2.0f + 1.0f).sum();
  EXPECT_EQ(y.device(), dev);
  EXPECT_DOUBLE_EQ(y.item(), 15.0);
}

}  // namespace
}  // namespace mstep::async_host
