// Loading kernel modules against the fake driver (an sm_90 device): the
// cubin for the device loads as is; a cubin for another architecture falls
// back to the PTX; when both fail, the error names the kernels, the
// device's sm_XY, the cubin's architecture and the JIT log. The images
// are the real build outputs of test/cuda/kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/TestKernels.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using testing::read_test_kernel;

class CudaModuleTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto context = CudaContext::create(fake_.driver());
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = std::move(*context);
    ASSERT_FALSE(sm80_.empty());
    ASSERT_FALSE(sm90_.empty());
    ASSERT_FALSE(ptx_.empty());
  }
  testing::FakeCudaDriver fake_;
  std::unique_ptr<CudaContext> context_;
  std::string sm80_ = read_test_kernel("test_kernels.sm_80.cubin");
  std::string sm90_ = read_test_kernel("test_kernels.sm_90.cubin");
  std::string ptx_ = read_test_kernel("test_kernels.compute_80.ptx");
  std::vector<std::string> saxpy_ = {"saxpy"};
};

TEST(CudaCubinArchTest, ReadsTheArchitectureFromTheElfHeader) {
  EXPECT_EQ(describe_cubin_arch(read_test_kernel("test_kernels.sm_80.cubin")), "sm_80");
  EXPECT_EQ(describe_cubin_arch(read_test_kernel("test_kernels.sm_90.cubin")), "sm_90");
  EXPECT_EQ(describe_cubin_arch("not an elf"), "not a cubin (too short for an ELF header)");
  EXPECT_EQ(describe_cubin_arch(std::string(64, 'x')), "not a cubin (an ELF for NVIDIA GPUs)");
  EXPECT_EQ(describe_ptx_target(read_test_kernel("test_kernels.compute_80.ptx")), "compute_80");
}

TEST_F(CudaModuleTest, CubinForTheDeviceLoadsWithItsKernelsAndParameters) {
  auto module = CudaKernelModule::load(*context_, sm90_, ptx_, saxpy_);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->source(), CudaKernelModule::Source::kCubin);
  EXPECT_EQ(fake_.calls_named("cuLibraryLoadData").size(), 1u);
  auto saxpy = (*module)->kernel("saxpy");
  ASSERT_TRUE(saxpy.ok());
  // int n, float a, const float* x, float* y.
  ASSERT_EQ((*saxpy)->params.size(), 4u);
  EXPECT_EQ((*saxpy)->params[2].offset, 8u);
  EXPECT_EQ((*saxpy)->params[3].size, 8u);
}

TEST_F(CudaModuleTest, CubinForAnotherArchitectureFallsBackToThePtx) {
  auto module = CudaKernelModule::load(*context_, sm80_, ptx_, saxpy_);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->source(), CudaKernelModule::Source::kPtx);
  EXPECT_THAT((*module)->cubin_failure(), HasSubstr("CUDA_ERROR_NO_BINARY_FOR_GPU"));
  auto loads = fake_.calls_named("cuLibraryLoadData");
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].kernel, "cubin");
  EXPECT_EQ(loads[1].kernel, "ptx");
}

TEST_F(CudaModuleTest, WhenBothFailTheErrorNamesKernelsArchitecturesAndTheJitLog) {
  fake_.ptx_error = "ptxas fatal   : Unresolved extern function 'missing'";
  std::vector<std::string> names = {"saxpy", "empty_kernel"};
  auto module = CudaKernelModule::load(*context_, sm80_, ptx_, names);
  ASSERT_FALSE(module.ok());
  std::string message(module.status().message());
  EXPECT_THAT(message, HasSubstr("cannot load kernel(s) saxpy, empty_kernel on device 0 "
                                 "(Fake GPU, sm_90)"));
  EXPECT_THAT(message, HasSubstr("the cubin (built for sm_80) failed: cuLibraryLoadData: "
                                 "CUDA_ERROR_NO_BINARY_FOR_GPU"));
  EXPECT_THAT(message, HasSubstr("the PTX (for compute_80) failed: cuLibraryLoadData: "
                                 "CUDA_ERROR_INVALID_PTX"));
  EXPECT_THAT(message, HasSubstr("JIT log:\nptxas fatal   : Unresolved extern function 'missing'"));
  // Nothing stays loaded.
  EXPECT_EQ(fake_.calls_named("cuLibraryUnload").size(), 0u);
}

TEST_F(CudaModuleTest, UnknownKernelNameIsNotFoundNamingIt) {
  std::vector<std::string> names = {"saxpy", "no_such_kernel"};
  auto module = CudaKernelModule::load(*context_, sm90_, ptx_, names);
  ASSERT_FALSE(module.ok());
  EXPECT_EQ(module.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("cuLibraryGetKernel: CUDA_ERROR_NOT_FOUND (fake driver error), kernel "
                        "no_such_kernel"));
  // Both the cubin's and the PTX's library were unloaded again.
  EXPECT_EQ(fake_.calls_named("cuLibraryUnload").size(), 2u);
}

TEST_F(CudaModuleTest, NothingToLoadIsAnError) {
  auto module = CudaKernelModule::load(*context_, "", "", saxpy_);
  ASSERT_FALSE(module.ok());
  EXPECT_THAT(std::string(module.status().message()),
              HasSubstr("kernels saxpy: neither a cubin nor PTX"));
}

TEST_F(CudaModuleTest, AskingForAKernelNotLoadedNamesThoseThatAre) {
  auto module = CudaKernelModule::load(*context_, sm90_, ptx_, saxpy_);
  ASSERT_TRUE(module.ok());
  auto missing = (*module)->kernel("empty_kernel");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no kernel empty_kernel in this module (it has saxpy)"));
}

TEST_F(CudaModuleTest, ModuleUnloadsItsLibrary) {
  {
    auto module = CudaKernelModule::load(*context_, sm90_, ptx_, saxpy_);
    ASSERT_TRUE(module.ok());
  }
  EXPECT_EQ(fake_.calls_named("cuLibraryUnload").size(), 1u);
}

} // namespace
} // namespace mstep::cuda
