// The cuda plan's memory plan: every intermediate value at an offset of
// one device arena (values whose lifetimes are disjoint share bytes), the
// arena allocated once per executable, and launches given base + offset.
// Offsets, sizes and lifetimes are checked here from the launches, not
// from the planner's own bookkeeping.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "mstep/core/Error.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/LinearReluStep.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

using testing::kFourChainStep;

/// Each value of kFourChainStep.
constexpr int64_t kValueBytes = 8 * 64 * 4;

using testing::plan_of;

/// The bytes a launch argument holds for device address `pointer`.
std::string address_bytes(CUdeviceptr pointer) {
  return std::string(reinterpret_cast<const char*>(&pointer), sizeof pointer);
}

TEST(CudaArenaPlan, IntermediatesHaveOffsetsAndDisjointLifetimesShareBytes) {
  auto plan = plan_of(kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->values.size(), 5u);
  ASSERT_EQ(plan->arena_offsets.size(), 5u);
  // The input and the output have buffers of their own.
  EXPECT_EQ(plan->arena_offsets[0], -1);
  EXPECT_EQ(plan->arena_offsets[4], -1);
  // Lifetimes in launches, read off the launches.
  std::vector<int> first(5, -1), last(5, -1);
  for (int l = 0; l < static_cast<int>(plan->launches.size()); ++l)
    for (const std::vector<int>* values : {&plan->launches[l].args, &plan->launches[l].writes})
      for (int v : *values) {
        if (first[v] < 0) first[v] = l;
        last[v] = l;
      }
  for (int v = 1; v <= 3; ++v) {
    const int64_t offset = plan->arena_offsets[v];
    EXPECT_GE(offset, 0) << "%" << v;
    EXPECT_EQ(offset % 256, 0) << "%" << v;
    EXPECT_LE(offset + kValueBytes, plan->arena_bytes) << "%" << v;
  }
  for (int a = 1; a <= 3; ++a)
    for (int b = a + 1; b <= 3; ++b) {
      const bool live_together = first[a] <= last[b] && first[b] <= last[a];
      const bool overlap = plan->arena_offsets[a] < plan->arena_offsets[b] + kValueBytes &&
                           plan->arena_offsets[b] < plan->arena_offsets[a] + kValueBytes;
      EXPECT_FALSE(live_together && overlap) << "%" << a << " and %" << b;
    }
  // Two values are live at every launch, never three: two slots, and %1
  // (dead after launch 1) shares its bytes with %3 (born at launch 2).
  EXPECT_EQ(plan->arena_bytes, 2 * kValueBytes);
  EXPECT_EQ(plan->arena_offsets[1], plan->arena_offsets[3]);
  EXPECT_TRUE(validate_cuda_arena(*plan).ok());
  const std::string text = describe_cuda_plan(*plan);
  EXPECT_THAT(text, HasSubstr("arena: 4096 bytes, allocated once"));
  EXPECT_THAT(text, HasSubstr("%2: f32[8, 64] at arena + "));
  EXPECT_THAT(text, HasSubstr("%4: f32[8, 64] (own buffer)"));
}

TEST(CudaArenaPlan, AMatmulsResultIsInTheArenaToo) {
  // linear + tanh: the matmul (its bias an epilogue) writes an intermediate.
  auto plan = plan_of(testing::kLinearTanhStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->values.size(), 5u);
  EXPECT_GE(plan->arena_offsets[3], 0);
  EXPECT_EQ(plan->arena_offsets[4], -1);
  EXPECT_EQ(plan->arena_bytes, 64 * 80 * 4);
}

TEST(CudaArenaPlan, APlanWhoseArenaDoesNotCheckIsRefusedNamingTheValues) {
  auto plan = plan_of(kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto refused = [&](auto change) {
    CudaPlan bad = *plan;
    change(bad);
    return std::string(validate_cuda_plan(bad).message());
  };
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[2] = p.arena_offsets[1]; }),
              HasSubstr("values %1 and %2 overlap in the arena"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[1] = 100; }),
              HasSubstr("not at an offset aligned to 256"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[1] = p.arena_bytes; }),
              HasSubstr("inside the 4096-byte arena"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[1] = -7; }),
              HasSubstr("value %1 has arena offset -7"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[4] = 0; }),
              HasSubstr("output %4 is placed in the arena"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets[0] = 0; }),
              HasSubstr("step input %0 is placed in the arena"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_offsets.pop_back(); }),
              HasSubstr("4 arena offsets for 5 values"));
  EXPECT_THAT(refused([](CudaPlan& p) { p.arena_bytes = -1; }), HasSubstr("an arena of -1 bytes"));
}

class CudaArenaExecutableTest : public testing::FakeCudaBackendTest {};

TEST_F(CudaArenaExecutableTest, LaunchesGetArenaBasePlusOffsetAndTheArenaIsAllocatedOnce) {
  auto plan = plan_of(kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  // The arena is one device allocation of its size, made at create().
  const CUdeviceptr base = (*exe)->arena_pointer();
  ASSERT_NE(base, 0u);
  int arena_allocations = 0;
  for (const testing::FakeCall& alloc : fake_.calls_named("cuMemAlloc"))
    if (alloc.target == base && alloc.bytes == 4096u) ++arena_allocations;
  EXPECT_EQ(arena_allocations, 1);

  auto x = backend_->allocate({Shape({8, 64}), DType::f32});
  ASSERT_TRUE(x.ok()) << x.status();
  for (int run = 0; run < 2; ++run) {
    const size_t calls_before = fake_.calls.size();
    const size_t requests_before = backend_->allocator().stats().requests;
    auto outputs = (*exe)->run({*x});
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    // Each run asks the allocator for its one output, nothing else.
    EXPECT_EQ(backend_->allocator().stats().requests, requests_before + 1) << "run " << run;
    std::vector<testing::FakeCall> launches;
    for (size_t i = calls_before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel") launches.push_back(fake_.calls[i]);
    ASSERT_EQ(launches.size(), 4u);
    auto at = [&](int value) { return address_bytes(base + plan->arena_offsets[value]); };
    const std::string input = address_bytes(CudaBackend::device_pointer(**x));
    const std::string output = address_bytes(CudaBackend::device_pointer(*(*outputs)[0]));
    EXPECT_THAT(launches[0].args, ::testing::ElementsAre(input, at(1)));
    EXPECT_THAT(launches[1].args, ::testing::ElementsAre(at(1), at(2)));
    EXPECT_THAT(launches[2].args, ::testing::ElementsAre(at(2), at(3)));
    EXPECT_THAT(launches[3].args, ::testing::ElementsAre(at(3), output));
  }
}

TEST_F(CudaArenaExecutableTest, AnArenaThatDoesNotFitIsAnErrorAtCreate) {
  auto plan = plan_of(kFourChainStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  fake_.device_memory = fake_.device_bytes + 1024; // less than the arena's 4096 bytes
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(exe.status().message(), HasSubstr("cuda executable: its 4096-byte arena"));
}

} // namespace
} // namespace mstep::cuda
