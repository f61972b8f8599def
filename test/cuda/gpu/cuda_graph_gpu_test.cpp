// CUDA Graphs on a real GPU (in cuda_driver_gpu_test's binary, label gpu;
// issue 22 §1): a small step (a device copy, saxpy, a cuBLASLt matmul,
// saxpy again) queued through the backend is run lazily, then recorded
// with CudaBackend::record_graph; each launch of the graph gives outputs
// bit for bit equal to the lazy run on the same inputs, an input changed
// in place between launches is seen by the next launch, and update() to
// another input buffer gives that input's lazy result without a new
// instantiation; rebind() patches moved buffers that the cuBLASLt node
// does not read. An allocation inside the capture fails with its name, a
// call the driver refuses invalidates the capture, and the backend keeps
// working after both. The host time of one launch is printed, not
// asserted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <utility>

#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaGraph.h"
#include "lib/backends/cuda/CudaModule.h"
#include "mstep/core/Error.h"
#include "test/cuda/EnqueueSaxpy.h"
#include "test/cuda/TestKernels.h"
#include "test/cuda/gpu/GpuBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRows = 16, kInner = 64, kCols = 32;

class CudaGraphGpuTest : public testing::GpuBackendTest {
protected:
  void SetUp() override {
    GpuBackendTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto module = testing::load_test_kernels(backend_->context(), {"saxpy"});
    ASSERT_TRUE(module.ok()) << module.status();
    module_ = std::move(*module);
    auto api = load_cublaslt();
    if (!api.ok()) GTEST_SKIP() << api.status().message();
    // Its workspace is allocated here, before any capture (CublasLt.h).
    auto matmul = CublasLtMatmul::create(backend_->context(), *api);
    ASSERT_TRUE(matmul.ok()) << matmul.status();
    matmul_ = std::move(*matmul);
    x_ = upload(values(kRows * kInner, 1));
    init_ = upload(values(kRows * kInner, 2));
    w_ = upload(values(kInner * kCols, 3));
    y_ = upload(values(kRows * kInner, 0));
    out_ = upload(values(kRows * kCols, 0));
  }
  void TearDown() override {
    x_ = init_ = w_ = y_ = out_ = nullptr;
    matmul_.reset();
    module_.reset();
    backend_.reset();
  }
  static std::vector<float> values(int64_t n, int seed) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7 + seed * 13) % 17) / 8.0f - 1.0f;
    return v;
  }
  BufferPtr upload(const std::vector<float>& host) {
    TensorType type{Shape{static_cast<int64_t>(host.size())}, DType::f32};
    auto buffer = backend_->allocate(type);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return nullptr;
    EXPECT_TRUE(backend_->copy_in(**buffer, host.data(), type.bytes()).ok());
    return *buffer;
  }
  std::vector<float> download(const BufferPtr& buffer) {
    std::vector<float> host(buffer->type().shape.numel());
    absl::Status s = backend_->copy_out(*buffer, host.data(), buffer->type().bytes());
    EXPECT_TRUE(s.ok()) << s;
    return host;
  }
  /// The step over input `x`: y = init; y += 2x; out = y . w; y += 0.5x.
  absl::Status step(const BufferPtr& x) {
    const CudaKernel& saxpy = **module_->kernel("saxpy");
    MSTEP_RETURN_IF_ERROR(backend_->copy_device(init_, y_));
    MSTEP_RETURN_IF_ERROR(testing::enqueue_saxpy(*backend_, saxpy, 2.0f, x, y_));
    const Buffer* reads[] = {y_.get(), w_.get()};
    const Buffer* writes[] = {out_.get()};
    MSTEP_RETURN_IF_ERROR(backend_->enqueue(
        "cublasLt step",
        [&] {
          return matmul_->run({.m = kRows, .n = kCols, .k = kInner}, CudaBackend::device_pointer(*y_),
                              CudaBackend::device_pointer(*w_), 0,
                              CudaBackend::device_pointer(*out_));
        },
        reads, writes));
    return testing::enqueue_saxpy(*backend_, saxpy, 0.5f, x, y_);
  }
  /// The lazy step's outputs over `x`.
  std::pair<std::vector<float>, std::vector<float>> lazy(const BufferPtr& x) {
    EXPECT_TRUE(step(x).ok());
    return {download(out_), download(y_)};
  }
  std::unique_ptr<CudaKernelModule> module_;
  std::unique_ptr<CublasLtMatmul> matmul_;
  BufferPtr x_, init_, w_, y_, out_;
};

TEST_F(CudaGraphGpuTest, EachLaunchEqualsTheLazyStepBitForBit) {
  const auto first = lazy(x_);  // also the warm-up: cuBLASLt's heuristic is cached
  const std::vector<float> other = values(kRows * kInner, 5);
  ASSERT_TRUE(backend_->copy_in(*x_, other.data(), other.size() * 4).ok());
  const auto second = lazy(x_);
  ASSERT_NE(first, second);

  const std::vector<float> original = values(kRows * kInner, 1);
  ASSERT_TRUE(backend_->copy_in(*x_, original.data(), original.size() * 4).ok());
  ASSERT_TRUE(backend_->copy_in(*out_, values(kRows * kCols, 9).data(), kRows * kCols * 4).ok());
  auto graph = backend_->record_graph([&] { return step(x_); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(download(out_), values(kRows * kCols, 9)) << "recorded, not run";
  ASSERT_TRUE((*graph)->launch().ok());
  EXPECT_EQ(download(out_), first.first);
  EXPECT_EQ(download(y_), first.second);
  // The input changed in place: the next launch reads it.
  ASSERT_TRUE(backend_->copy_in(*x_, other.data(), other.size() * 4).ok());
  ASSERT_TRUE((*graph)->launch().ok());
  EXPECT_EQ(download(out_), second.first);
  EXPECT_EQ(download(y_), second.second);

  // Host time per launch (one cuGraphLaunch, its event and bookkeeping).
  constexpr int kLaunches = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i) ASSERT_TRUE((*graph)->launch().ok());
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      kLaunches;
  ASSERT_TRUE(backend_->synchronize().ok());
  std::printf("CUDA graph launch host time: %.2f us per launch (4 nodes) on %s\n", us,
              backend_->context().device().name.c_str());
}

TEST_F(CudaGraphGpuTest, AnUpdateToAnotherInputEqualsTheLazyStepOverIt) {
  BufferPtr moved = upload(values(kRows * kInner, 6));
  const auto expected = lazy(moved);
  (void)lazy(x_);
  auto recorded = CudaGraph::record(*backend_, [&] { return step(x_); });
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  ASSERT_TRUE((*recorded)->update([&] { return step(moved); }).ok());
  EXPECT_EQ((*recorded)->updates(), 1);
  EXPECT_EQ((*recorded)->reinstantiations(), 0) << "cuGraphExecUpdate accepted the new buffers";
  ASSERT_TRUE((*recorded)->launch().ok());
  EXPECT_EQ(download(out_), expected.first);
  EXPECT_EQ(download(y_), expected.second);
}

// DeviceReplay's way for a graph with library nodes (issue 22 §1): moved
// buffers that no cuBLASLt call reads are patched in place, the cuBLASLt
// nodes left alone: the copy node's source (init, as a data input's head
// copy into its static buffer) and the two saxpy nodes reading x. No
// capture, no exec update; the launch equals the lazy step over the new
// buffers.
TEST_F(CudaGraphGpuTest, MovedInputsArePatchedAroundACublasLtNode) {
  BufferPtr moved_x = upload(values(kRows * kInner, 6));
  BufferPtr moved_init = upload(values(kRows * kInner, 7));
  std::swap(init_, moved_init);
  const auto expected = lazy(moved_x);
  std::swap(init_, moved_init);
  (void)lazy(x_);
  auto recorded = CudaGraph::record(*backend_, [&] { return step(x_); });
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  std::printf("CUDA graph with a cuBLASLt step: %lld library nodes not read for patching\n",
              static_cast<long long>((*recorded)->opaque_nodes()));
  EXPECT_EQ((*recorded)->rebind({{x_, moved_x}, {init_, moved_init}}), 3)
      << "the copy node and the two saxpy nodes";
  EXPECT_EQ((*recorded)->updates(), 0);
  ASSERT_TRUE((*recorded)->launch().ok());
  EXPECT_EQ(download(out_), expected.first);
  EXPECT_EQ(download(y_), expected.second);
  // y, which cuBLASLt reads, cannot be patched: update() instead.
  EXPECT_EQ((*recorded)->rebind({{y_, upload(values(kRows * kInner, 8))}}), -1);
}

TEST_F(CudaGraphGpuTest, WhatCannotBeCapturedFailsAndTheBackendKeepsWorking) {
  const auto expected = lazy(x_);
  auto allocating = backend_->record_graph([&]() -> absl::Status {
    MSTEP_RETURN_IF_ERROR(step(x_));
    return backend_->allocate({Shape{4}, DType::f32}).status();
  });
  ASSERT_FALSE(allocating.ok());
  EXPECT_THAT(allocating.status().message(), HasSubstr("allocating a buffer of f32[4]"));
  // cuMemAlloc inside a thread-local capture: the driver refuses it.
  auto refused = backend_->record_graph([&]() -> absl::Status {
    (void)backend_->allocator().allocate(size_t{6} << 20);
    return step(x_);
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("CUDA_ERROR_STREAM_CAPTURE"));
  EXPECT_FALSE(backend_->capturing());
  EXPECT_TRUE(backend_->health().ok()) << backend_->health();
  EXPECT_EQ(lazy(x_), expected);
}

}  // namespace
}  // namespace mstep::cuda
