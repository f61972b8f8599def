// The driver layer on a real GPU (ctest label `gpu`; run by
// scripts/gpu_check.sh's bundle on a GPU machine, never by the normal
// suite): the driver loads and names the device; saxpy from the cubin for
// the device's architecture gives fmaf's results bit for bit; a cubin for
// another architecture falls back to the PTX and runs; a kernel name that
// does not exist is an error naming it; 256 MiB go in, across and out
// intact. Bandwidths and launch latencies are printed, not asserted.
//
// Without a GPU every test skips with the driver's "unavailable" reason
// and the binary exits 77 (ctest's SKIP_RETURN_CODE). The backend's and
// cuBLASLt's GPU tests are in the same binary (cuda_backend_gpu_test.cpp,
// cublaslt_gpu_test.cpp, and cuda_device_fault_gpu_test.cpp, last).
//   cuda_driver_gpu_test [--kernel_dir=DIR] [gtest flags]
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaStaging.h"
#include "lib/backends/cuda/PtxasReport.h"
#include "test/cuda/TestKernels.h"
#include "test/cuda/gpu/GpuDriver.h"

namespace mstep::cuda {

namespace testing {
namespace {
/// Whether a test asked for the driver (main's exit code says "skipped"
/// only then, so --gtest_list_tests exits 0).
bool g_driver_tried = false;
} // namespace

absl::StatusOr<std::shared_ptr<const CudaDriver>>& gpu_driver() {
  static absl::StatusOr<std::shared_ptr<const CudaDriver>> loaded = load_cuda_driver();
  g_driver_tried = true;
  return loaded;
}
} // namespace testing

namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

absl::StatusOr<std::shared_ptr<const CudaDriver>>& driver() { return testing::gpu_driver(); }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class CudaGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!driver().ok()) GTEST_SKIP() << driver().status().message();
    auto context = CudaContext::create(*driver());
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = std::move(*context);
    ASSERT_FALSE(ptx_.empty()) << "no PTX in " << testing::test_kernel_dir();
  }
  const CudaDeviceInfo& device() const { return context_->device(); }
  /// The cubin of `major`.x this device runs: sm_80 for 8.x, sm_90 for 9.x.
  std::string cubin_for_major(int major) const {
    return testing::read_test_kernel("test_kernels.sm_" + std::to_string(major) + "0.cubin");
  }
  /// Runs saxpy from `module` on n elements and checks y against fmaf.
  void run_saxpy(const CudaKernelModule& module, int n) {
    auto saxpy = module.kernel("saxpy");
    ASSERT_TRUE(saxpy.ok()) << saxpy.status();
    std::vector<float> x(n), y(n), expected(n);
    for (int i = 0; i < n; ++i) {
      x[i] = 0.5f * static_cast<float>(i % 1000) - 3.0f;
      y[i] = 1.0f - 0.25f * static_cast<float>(i % 777);
      expected[i] = std::fmaf(2.5f, x[i], y[i]); // the PTX's fma.rn.f32
    }
    auto staging = CudaStaging::create(*context_, 1 << 20);
    auto dx = CudaDeviceBuffer::allocate(*context_, n * sizeof(float));
    auto dy = CudaDeviceBuffer::allocate(*context_, n * sizeof(float));
    ASSERT_TRUE(staging.ok() && dx.ok() && dy.ok());
    ASSERT_TRUE((*staging)->copy_in(dx->pointer(), std::as_bytes(std::span(x))).ok());
    ASSERT_TRUE((*staging)->copy_in(dy->pointer(), std::as_bytes(std::span(y))).ok());
    CudaKernelArgs args;
    args.add(n).add(2.5f).add(dx->pointer()).add(dy->pointer());
    unsigned blocks = static_cast<unsigned>((n + 255) / 256);
    absl::Status launched =
        launch_kernel(*context_, **saxpy, {.grid = {blocks, 1, 1}, .block = {256, 1, 1}}, args);
    ASSERT_TRUE(launched.ok()) << launched;
    std::vector<float> result(n);
    absl::Status out =
        (*staging)->copy_out(std::as_writable_bytes(std::span(result)), dy->pointer());
    ASSERT_TRUE(out.ok()) << out;
    int wrong = 0;
    for (int i = 0; i < n; ++i)
      if (std::memcmp(&result[i], &expected[i], sizeof(float)) != 0 && wrong++ < 5)
        ADD_FAILURE() << "y[" << i << "] = " << result[i] << ", expected " << expected[i];
    EXPECT_EQ(wrong, 0);
  }

  std::unique_ptr<CudaContext> context_;
  std::string ptx_ = testing::read_test_kernel("test_kernels.compute_80.ptx");
  // Every kernel of test_kernels.cu: the register check reads each one's
  // ptxas report. write_out_of_bounds is loaded, never launched here.
  std::vector<std::string> names_ = {"saxpy", "empty_kernel", "write_out_of_bounds"};
};

TEST(CudaGpuDriverTest, DriverLoads) {
  if (!driver().ok()) GTEST_SKIP() << driver().status().message();
  const CudaDriverInfo& info = (*driver())->info;
  std::printf("driver: CUDA %d.%d, %d device(s)\n", info.driver_version / 1000,
              info.driver_version % 1000 / 10, info.device_count);
  auto context = CudaContext::create(*driver());
  ASSERT_TRUE(context.ok()) << context.status();
  const CudaDeviceInfo& device = (*context)->device();
  std::printf("device 0: %s, compute capability %d.%d (%s), %d SMs, %.1f GiB\n",
              device.name.c_str(), device.compute_major, device.compute_minor,
              device.arch().c_str(), device.multiprocessor_count,
              static_cast<double>(device.total_memory) / (1 << 30));
  EXPECT_GE(device.compute_major, 7);
  EXPECT_GT(device.multiprocessor_count, 0);
}

TEST_F(CudaGpuTest, SaxpyFromTheCubinForThisDevice) {
  std::string cubin = cubin_for_major(device().compute_major);
  if (cubin.empty()) GTEST_SKIP() << "no test cubin for " << device().arch();
  auto module = CudaKernelModule::load(*context_, cubin, ptx_, names_);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->source(), CudaKernelModule::Source::kCubin)
      << "cubin failed: " << (*module)->cubin_failure();
  run_saxpy(**module, (1 << 20) + 3);
  // The driver's register count for the loaded kernel is ptxas's.
  std::string arch = describe_cubin_arch(cubin);
  auto reports =
      parse_ptxas_report(testing::read_test_kernel("test_kernels." + arch + ".ptxas.txt"));
  ASSERT_TRUE(reports.ok()) << reports.status();
  for (const PtxasKernelReport& report : *reports) {
    auto kernel = (*module)->kernel(report.kernel);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    int registers = -1;
    ASSERT_EQ(context_->api().cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS,
                                                 (*kernel)->function),
              CUDA_SUCCESS);
    std::printf("%s (%s): %d registers (ptxas: %d)\n", report.kernel.c_str(), arch.c_str(),
                registers, report.registers);
    EXPECT_EQ(registers, report.registers) << report.kernel;
  }
}

TEST_F(CudaGpuTest, CubinForAnotherArchitectureFallsBackToPtx) {
  int other = device().compute_major == 8 ? 9 : 8;
  std::string cubin = cubin_for_major(other);
  ASSERT_FALSE(cubin.empty());
  auto module = CudaKernelModule::load(*context_, cubin, ptx_, names_);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->source(), CudaKernelModule::Source::kPtx);
  std::printf("sm_%d0 cubin on %s: %s; PTX JIT log: %s\n", other, device().arch().c_str(),
              (*module)->cubin_failure().c_str(), (*module)->jit_log().c_str());
  run_saxpy(**module, 4099);
}

TEST_F(CudaGpuTest, UnknownKernelNameIsAnErrorNamingIt) {
  std::vector<std::string> names = {"saxpy", "no_such_kernel"};
  auto module =
      CudaKernelModule::load(*context_, cubin_for_major(device().compute_major), ptx_, names);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(module.status().message()), HasSubstr("kernel no_such_kernel"));
  std::printf("error: %s\n", std::string(module.status().message()).c_str());
  // The context is still usable.
  ASSERT_TRUE(context_->synchronize().ok());
}

TEST_F(CudaGpuTest, Copies256MiBAndPrintsBandwidths) {
  constexpr size_t kBytes = size_t{256} << 20;
  const CudaDriverApi& api = context_->api();
  CUstream stream = context_->stream();
  std::vector<std::byte> host(kBytes), back(kBytes);
  for (size_t i = 0; i < kBytes; ++i)
    host[i] = static_cast<std::byte>((i * 131 + (i >> 20)) & 0xff);
  auto staging = CudaStaging::create(*context_);
  auto a = CudaDeviceBuffer::allocate(*context_, kBytes);
  auto b = CudaDeviceBuffer::allocate(*context_, kBytes);
  auto pinned = CudaPinnedBuffer::allocate(*context_, kBytes);
  auto start = CudaEvent::create(*context_, true);
  auto stop = CudaEvent::create(*context_, true);
  ASSERT_TRUE(staging.ok() && a.ok() && b.ok() && pinned.ok() && start.ok() && stop.ok());
  auto gbps = [&](double seconds) { return static_cast<double>(kBytes) / seconds / 1e9; };
  auto device_seconds = [&]() {
    EXPECT_TRUE(stop->synchronize().ok());
    return static_cast<double>(*CudaEvent::elapsed_ms(*start, *stop)) / 1e3;
  };

  // Pageable host memory through the staging buffers (host memcpy included).
  Clock::time_point t = Clock::now();
  ASSERT_TRUE((*staging)->copy_in(a->pointer(), host).ok());
  ASSERT_TRUE(context_->synchronize().ok());
  double in = seconds_since(t);
  // Device to device.
  ASSERT_TRUE(start->record().ok());
  ASSERT_TRUE((*staging)->copy_device(b->pointer(), a->pointer(), kBytes).ok());
  ASSERT_TRUE(stop->record().ok());
  double d2d = device_seconds();
  t = Clock::now();
  ASSERT_TRUE((*staging)->copy_out(back, b->pointer()).ok());
  double out = seconds_since(t);
  EXPECT_TRUE(back == host) << "256 MiB did not come back intact";

  // Straight from and to one pinned buffer (the bus alone).
  std::memcpy(pinned->data(), host.data(), kBytes);
  ASSERT_TRUE(start->record().ok());
  ASSERT_EQ(api.cuMemcpyHtoDAsync(a->pointer(), pinned->data(), kBytes, stream), CUDA_SUCCESS);
  ASSERT_TRUE(stop->record().ok());
  double h2d_pinned = device_seconds();
  ASSERT_TRUE(start->record().ok());
  ASSERT_EQ(api.cuMemcpyDtoHAsync(pinned->data(), a->pointer(), kBytes, stream), CUDA_SUCCESS);
  ASSERT_TRUE(stop->record().ok());
  double d2h_pinned = device_seconds();
  EXPECT_EQ(std::memcmp(pinned->data(), host.data(), kBytes), 0);

  std::printf("256 MiB: copy_in (pageable via staging) %.1f GB/s, copy_out %.1f GB/s, "
              "H2D pinned %.1f GB/s, D2H pinned %.1f GB/s, D2D %.1f GB/s (read+write %.1f GB/s)\n",
              gbps(in), gbps(out), gbps(h2d_pinned), gbps(d2h_pinned), gbps(d2d), 2 * gbps(d2d));
}

TEST_F(CudaGpuTest, PrintsLaunchLatency) {
  std::string cubin = cubin_for_major(device().compute_major);
  auto module = CudaKernelModule::load(*context_, cubin, ptx_, names_);
  ASSERT_TRUE(module.ok()) << module.status();
  const CudaKernel& empty = **(*module)->kernel("empty_kernel");
  CudaKernelArgs none;
  CudaLaunchConfig config{.grid = {1, 1, 1}, .block = {32, 1, 1}};
  const CudaDriverApi& api = context_->api();
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(launch_kernel(*context_, empty, config, none).ok());
  ASSERT_TRUE(context_->synchronize().ok());

  constexpr int kLaunches = 10000;
  Clock::time_point t = Clock::now();
  for (int i = 0; i < kLaunches; ++i)
    ASSERT_TRUE(launch_kernel(*context_, empty, config, none).ok());
  double enqueue = seconds_since(t);
  ASSERT_TRUE(context_->synchronize().ok());
  double drained = seconds_since(t);

  constexpr int kRoundTrips = 1000;
  t = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i) {
    ASSERT_TRUE(launch_kernel(*context_, empty, config, none).ok());
    ASSERT_EQ(api.cuStreamSynchronize(context_->stream()), CUDA_SUCCESS);
  }
  double round_trip = seconds_since(t);
  t = Clock::now();
  for (int i = 0; i < kRoundTrips; ++i)
    ASSERT_EQ(api.cuStreamSynchronize(context_->stream()), CUDA_SUCCESS);
  double idle_sync = seconds_since(t);
  std::printf("empty kernel: launch (host, mean of %d) %.2f us; %d launches drained in %.2f us "
              "each; launch + cuStreamSynchronize %.2f us; cuStreamSynchronize on an idle "
              "stream %.2f us\n",
              kLaunches, enqueue / kLaunches * 1e6, kLaunches, drained / kLaunches * 1e6,
              round_trip / kRoundTrips * 1e6, idle_sync / kRoundTrips * 1e6);
}

} // namespace
} // namespace mstep::cuda

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::StartsWith(arg, "--kernel_dir=")) {
      mstep::cuda::testing::test_kernel_dir() = std::string(arg.substr(13));
    } else {
      std::fprintf(stderr, "cuda_driver_gpu_test: unknown argument %s (use --kernel_dir=DIR)\n",
                   argv[i]);
      return 2;
    }
  }
  int status = RUN_ALL_TESTS();
  // No GPU: every test skipped, which ctest reports as skipped, not passed.
  if (status == 0 && mstep::cuda::testing::g_driver_tried && !mstep::cuda::testing::gpu_driver().ok())
    return 77;
  return status;
}
