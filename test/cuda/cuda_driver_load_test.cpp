// Loading the driver: "cuda: unavailable: <reason>" for a missing
// library, an old driver, a missing function, a failing cuInit and no
// device; the entry points asked for by their unversioned names and this
// header's CUDA_VERSION. Through the real loader (dlopen of a fake
// libcuda, MSTEP_FAKE_LIBCUDA) and through init_cuda_driver on a fake table.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaDriverApi.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CudaDriverLoadTest, MissingLibraryIsUnavailableNamingIt) {
  auto driver = load_cuda_driver({.library = "libcuda-not-here.so.1"});
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(driver.status().message()),
              HasSubstr("cuda: unavailable: cannot load the NVIDIA "
                        "driver library libcuda-not-here.so.1"));
}

/// The fake libcuda, configured before each load.
class FakeLibcudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    handle_ = dlopen(MSTEP_FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    configure_ = reinterpret_cast<void (*)(int, int, int, const char*)>(
        dlsym(handle_, "mstep_fake_libcuda_configure"));
    requested_ =
        reinterpret_cast<const char* (*)()>(dlsym(handle_, "mstep_fake_libcuda_requested"));
    ASSERT_NE(configure_, nullptr);
    ASSERT_NE(requested_, nullptr);
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  absl::StatusOr<std::shared_ptr<const CudaDriver>> load(int version, CUresult init, int devices,
                                                         const char* missing = "") {
    configure_(version, init, devices, missing);
    return load_cuda_driver({.library = MSTEP_FAKE_LIBCUDA});
  }
  void* handle_ = nullptr;
  void (*configure_)(int, int, int, const char*) = nullptr;
  const char* (*requested_)() = nullptr;
};

TEST_F(FakeLibcudaTest, LoadsAndReportsVersionAndDevices) {
  auto driver = load(13000, CUDA_SUCCESS, 2);
  ASSERT_TRUE(driver.ok()) << driver.status();
  EXPECT_EQ((*driver)->info.driver_version, 13000);
  EXPECT_EQ((*driver)->info.device_count, 2);
}

TEST_F(FakeLibcudaTest, AsksForUnversionedNamesAtThisHeadersVersion) {
  // cuda.h renames cuMemAlloc to cuMemAlloc_v2; cuGetProcAddress wants the
  // base name and picks the version from the CUDA version passed.
  ASSERT_TRUE(load(13000, CUDA_SUCCESS, 1).ok());
  std::string requested = requested_();
  std::string at = "@" + std::to_string(CUDA_VERSION) + " ";
  EXPECT_THAT(requested, HasSubstr("cuMemAlloc" + at));
  EXPECT_THAT(requested, HasSubstr("cuMemcpyHtoDAsync" + at));
  EXPECT_THAT(requested, HasSubstr("cuStreamDestroy" + at));
  EXPECT_THAT(requested, HasSubstr("cuLaunchKernel" + at));
  // CUDA Graphs (issue 22): cuda.h renames these two to _v2 as well.
  EXPECT_THAT(requested, HasSubstr("cuStreamBeginCapture" + at));
  EXPECT_THAT(requested, HasSubstr("cuGraphExecUpdate" + at));
  EXPECT_THAT(requested, HasSubstr("cuGraphLaunch" + at));
  EXPECT_THAT(requested, Not(HasSubstr("_v2")));
  EXPECT_THAT(requested, Not(HasSubstr("_ptsz")));
}

TEST_F(FakeLibcudaTest, OldDriverIsUnavailableNamingBothVersions) {
  auto driver = load(11080, CUDA_SUCCESS, 1);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(driver.status().message()),
              HasSubstr("cuda: unavailable: the NVIDIA driver supports CUDA 11.8; mstep needs "
                        "CUDA 12.4 or newer"));
}

TEST_F(FakeLibcudaTest, MissingFunctionIsUnavailableNamingIt) {
  auto driver = load(13000, CUDA_SUCCESS, 1, "cuLibraryLoadData");
  ASSERT_FALSE(driver.ok());
  EXPECT_THAT(std::string(driver.status().message()),
              HasSubstr("cuda: unavailable: the NVIDIA driver has no cuLibraryLoadData"));
}

TEST_F(FakeLibcudaTest, FailingInitIsUnavailableWithItsErrorName) {
  auto driver = load(13000, CUDA_ERROR_NO_DEVICE, 0);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(driver.status().message()),
              HasSubstr("cuda: unavailable: cuInit failed: CUDA_ERROR_NO_DEVICE (no "
                        "CUDA-capable device is detected)"));
}

TEST(CudaDriverInitTest, FakeTableInitializes) {
  testing::FakeCudaDriver fake;
  auto info = init_cuda_driver(fake.api());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->driver_version, 13000);
  EXPECT_EQ(info->device_count, 1);
  ASSERT_EQ(fake.calls_named("cuInit").size(), 1u);
}

TEST(CudaDriverInitTest, NoDeviceIsUnavailable) {
  testing::FakeCudaDriver fake;
  fake.device_count = 0;
  auto info = init_cuda_driver(fake.api());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("cuda: unavailable: the driver reports no CUDA device"));
}

TEST(CudaDriverInitTest, InitFailureNamesTheError) {
  testing::FakeCudaDriver fake;
  fake.init_result = CUDA_ERROR_NO_DEVICE;
  auto info = init_cuda_driver(fake.api());
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("cuInit failed: CUDA_ERROR_NO_DEVICE"));
}

TEST(CudaDriverInitTest, NullFunctionIsUnavailableNamingIt) {
  testing::FakeCudaDriver fake;
  CudaDriverApi api = fake.api();
  api.cuKernelGetParamInfo = nullptr;
  auto info = init_cuda_driver(api);
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(std::string(info.status().message()), HasSubstr("has no cuKernelGetParamInfo"));
}

TEST(CudaDriverErrorTest, ErrorsNameTheCallTheResultAndTheContext) {
  testing::FakeCudaDriver fake;
  CudaDriverApi api = fake.api();
  absl::Status status = cuda_error(api, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "allocating 1 MiB");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (fake driver error), allocating 1 MiB");
  // A result the driver has no name for is given by its number.
  EXPECT_EQ(cuda_error(api, static_cast<CUresult>(12345), "cuInit").message(),
            "cuInit: CUresult 12345");
}

} // namespace
} // namespace mstep::cuda
