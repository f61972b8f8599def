// A compiled step's launch plan run by CudaExecutable on the fake driver:
// each launch has the plan's grid and block, its arguments are the device
// addresses of the step's buffers in parameter order, launches are queued
// on the backend's one stream in program order, and the outputs are the
// buffers the launches wrote. Also: the "cuda" compiler reached through
// the registry, and plans that refer to what they do not have.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "mstep/compiler/BackendCompiler.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// The bytes of a device address, as the driver reads a pointer argument.
std::string pointer_bytes(const Buffer& buffer) {
  CUdeviceptr pointer = CudaBackend::device_pointer(buffer);
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

class CudaExecutableTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaExecutableTest, LaunchesRunInProgramOrderWithTheStepsBuffers) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = CudaExecutable::create(*backend_, compiled->plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  // The fake is an sm_90 device: the sm_90 cubin is what loads.
  for (const testing::FakeCall& load : fake_.calls_named("cuLibraryLoadData"))
    EXPECT_EQ(load.kernel, "cubin");

  const TensorType type{Shape({8, 64}), DType::f32};
  BufferPtr x = input(type), y = input(type);
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({x, y});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 2u);
  const BufferPtr& tanh_out = (*outputs)[0];
  const BufferPtr& exp_out = (*outputs)[1];
  EXPECT_EQ(tanh_out->type(), type);

  std::vector<testing::FakeCall> launches;
  for (size_t i = before; i < fake_.calls.size(); ++i)
    if (fake_.calls[i].name == "cuLaunchKernel") launches.push_back(fake_.calls[i]);
  ASSERT_EQ(launches.size(), 3u);
  const auto& plan = (*exe)->plan();
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_EQ(launches[l].kernel, plan.kernels[plan.launches[l].kernel].name);
    EXPECT_EQ(launches[l].stream, backend_->context().stream());
    EXPECT_THAT(launches[l].grid, ElementsAre(2u, 1u, 1u));
    EXPECT_THAT(launches[l].block, ElementsAre(256u, 1u, 1u));
  }
  // exp(x) -> e; mul(e, y) -> m; tanh(m) -> the first output.
  EXPECT_THAT(launches[0].args, ElementsAre(pointer_bytes(*x), pointer_bytes(*exp_out)));
  ASSERT_EQ(launches[1].args.size(), 3u);
  EXPECT_EQ(launches[1].args[0], pointer_bytes(*exp_out));
  EXPECT_EQ(launches[1].args[1], pointer_bytes(*y));
  EXPECT_EQ(launches[2].args[0], launches[1].args[2]);
  EXPECT_EQ(launches[2].args[1], pointer_bytes(*tanh_out));
  // Every computed value has a buffer of its own (no step input written).
  EXPECT_NE(launches[1].args[2], pointer_bytes(*x));
  EXPECT_NE(launches[1].args[2], pointer_bytes(*y));
  // copy_out waits for the launch that wrote the output (an event after
  // it), never the whole stream.
  std::vector<float> host(type.shape.numel());
  ASSERT_TRUE(backend_->copy_out(*tanh_out, host.data(), type.bytes()).ok());
  EXPECT_TRUE(fake_.calls_named("cuEventSynchronize").size() >= 1u);
}

TEST_F(CudaExecutableTest, AProfiledRunTimesEachStepBetweenEventsAroundIt) {
  // CudaBackendOptions::profile (MSTEP_CUDA_PROFILE=1): a timing event
  // before the first step and after each; the fake's clock is 1 ms per
  // kernel launch, so each of the chain's 3 steps takes 1 ms per run, and
  // a mark out of place would show as a step of 0 or 2 ms.
  CudaBackendOptions options;
  options.profile = true;
  auto profiled = CudaBackend::create(fake_.driver(), options);
  ASSERT_TRUE(profiled.ok()) << profiled.status();
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = CudaExecutable::create(**profiled, compiled->plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  ASSERT_NE((*exe)->profile(), nullptr);
  const TensorType type{Shape({8, 64}), DType::f32};
  for (int run = 0; run < 2; ++run) {
    BufferPtr x = *(*profiled)->allocate(type), y = *(*profiled)->allocate(type);
    auto outputs = (*exe)->run({x, y});
    ASSERT_TRUE(outputs.ok()) << outputs.status();
  }
  const CudaStepProfile& profile = *(*exe)->profile();
  EXPECT_EQ(profile.runs(), 2);
  for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(profile.total_ms(i), 2.0) << "step " << i;
  const std::string report = profile.report((*exe)->plan(), 2);
  EXPECT_THAT(report, HasSubstr("2 run(s), 3 steps, 3.000 ms per run"));
  EXPECT_THAT(report, HasSubstr("1000.0 us  33.3%  step 0: kernel "));
  EXPECT_THAT(report, HasSubstr("(mstep.exp #"));
  EXPECT_THAT(report, ::testing::Not(HasSubstr("step 2:")));  // the top 2 only
  EXPECT_THAT(report, HasSubstr("kernels: 3 steps, 3000.0 us (100.0%)"));
  // Not profiled unless asked.
  auto plain = CudaExecutable::create(*backend_, compiled->plan);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->profile(), nullptr);
}

TEST_F(CudaExecutableTest, TheCudaCompilerIsRegisteredAndBuildsTheExecutable) {
  testing::CudaStepContext step(testing::kFusionStep);
  auto compiler = CompilerRegistry::get("cuda");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  EXPECT_EQ((*compiler)->backend_name(), "cuda");
  // The kernel names are the compiler's (op0_kernel): known to the fake first.
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = (*compiler)->compile(step.module(), *backend_, RuntimeOptions{});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->num_kernels(), 1u);
  // The wrong number of inputs is an error before anything is queued.
  auto outputs = (*exe)->run({});
  ASSERT_FALSE(outputs.ok());
  EXPECT_THAT(outputs.status().message(), HasSubstr("expected 2 inputs, got 0"));
}

TEST_F(CudaExecutableTest, AnInputOfTheWrongTypeIsNamed) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  auto exe = CudaExecutable::create(*backend_, compiled->plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({8, 64}), DType::f32}), y = input({Shape({8, 65}), DType::f32});
  auto outputs = (*exe)->run({x, y});
  ASSERT_FALSE(outputs.ok());
  EXPECT_THAT(outputs.status().message(), HasSubstr("input 1 must be"));
  EXPECT_TRUE(fake_.calls_named("cuLaunchKernel").empty());
}

TEST_F(CudaExecutableTest, AKernelThatLoadsNeitherWayNamesTheOpAndTheCubins) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  add_kernels(compiled->plan);
  // An sm_86 device: no cubin of its own, and the PTX JIT fails.
  fake_.compute_minor = 6;
  fake_.compute_major = 8;
  fake_.ptx_error = "ptxas fatal: something the JIT says";
  auto other = CudaBackend::create(fake_.driver());
  ASSERT_TRUE(other.ok()) << other.status();
  auto exe = CudaExecutable::create(**other, compiled->plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(), HasSubstr("loading the kernel of mstep.exp #0"));
  EXPECT_THAT(exe.status().message(), HasSubstr("cubins for sm_80, sm_90"));
  EXPECT_THAT(exe.status().message(), HasSubstr("something the JIT says"));
}

TEST_F(CudaExecutableTest, CompilingForAnotherBackendIsAnError) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiler = CompilerRegistry::get("cuda");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  auto cpu = BackendRegistry::get("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto exe = (*compiler)->compile(step.module(), **cpu, RuntimeOptions{});
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(), HasSubstr("the backend is 'cpu', not a cuda backend"));
}

TEST_F(CudaExecutableTest, APlanNamingWhatItLacksIsRefused) {
  CudaPlan plan;
  plan.values = {TensorType{Shape({4}), DType::f32}};
  plan.num_inputs = 1;
  plan.launches.push_back({.kernel = 0, .args = {0}, .writes = {}});
  EXPECT_THAT(validate_cuda_plan(plan).message(), HasSubstr("names kernel 0 of 0"));
  plan.kernels.push_back({});
  plan.launches[0].args = {3};
  EXPECT_THAT(validate_cuda_plan(plan).message(), HasSubstr("uses value 3 of 1"));
  plan.launches[0].args = {0};
  plan.launches[0].writes = {0};
  EXPECT_THAT(validate_cuda_plan(plan).message(), HasSubstr("writes step input 0"));
}

}  // namespace
}  // namespace mstep::cuda
