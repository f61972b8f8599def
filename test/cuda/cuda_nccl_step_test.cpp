// Collective steps in the cuda plan (issue 23), against the fake driver and
// the fake libnccl (fake_libnccl.cpp): the compiler lowers each collective
// node to one NCCL step; the executable makes the backend's communicator
// (a world of one: 1 rank, no MPI) once, queues each call on the backend's
// stream between the kernels around it, over the values' buffers, with
// the node's count, type and reduction; the calls are captured into a CUDA
// graph like kernels; NCCL's errors name the op and the rank. Not
// GPU-verified: no real NCCL runs here.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::plan_of;

/// exp, a mean all_reduce over a world of `world`, tanh.
std::string reduce_step(int world) {
  return absl::StrCat(R"(
func.func @step(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = mstep.exp %x : tensor<8x64xf32>
  %1 = mstep.all_reduce %0 {reduce_op = #mstep.reduce_op<mean>, world_size = )",
                      world, R"( : i64} : tensor<8x64xf32> -> tensor<8x64xf32>
  %2 = mstep.tanh %1 : tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}
)");
}

/// Every collective once, in a world of 2 (compiled only).
constexpr const char* kEveryCollective = R"(
func.func @step(%x: tensor<8x64xbf16>, %i: tensor<6xi64>) -> (tensor<8x64xbf16>, tensor<16x64xbf16>, tensor<6xi64>, tensor<4x64xbf16>) {
  %0 = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<max>, world_size = 2 : i64} : tensor<8x64xbf16> -> tensor<8x64xbf16>
  %1 = mstep.all_gather %x {dim = 0 : i64, world_size = 2 : i64} : tensor<8x64xbf16> -> tensor<16x64xbf16>
  %2 = mstep.broadcast %i {root = 1 : i64, world_size = 2 : i64} : tensor<6xi64> -> tensor<6xi64>
  %3 = mstep.reduce_scatter %x {dim = 0 : i64, reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x64xbf16> -> tensor<4x64xbf16>
  return %0, %1, %2, %3 : tensor<8x64xbf16>, tensor<16x64xbf16>, tensor<6xi64>, tensor<4x64xbf16>
}
)";

/// The fake libnccl's test hooks.
void* fake_nccl() { return dlopen(MSTEP_FAKE_LIBNCCL, RTLD_NOW); }
template <typename F> F* fake_nccl_fn(const char* name) {
  return reinterpret_cast<F*>(dlsym(fake_nccl(), name));
}
std::string fake_nccl_log() { return fake_nccl_fn<const char*()>("mstep_fake_nccl_log")(); }

/// Each NCCL collective as a call of the fake driver, so that its place
/// among the kernels on the stream (or in a captured graph) shows.
void record_in_driver(const char* fn, void* stream, const char* line) {
  testing::FakeCudaDriver::current().record_stream_call(fn, static_cast<CUstream>(stream), line);
}

/// "0x..." as the fake's log prints a device address.
std::string address_text(CUdeviceptr p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", reinterpret_cast<void*>(p));
  return text;
}

class CudaNcclStepTest : public testing::FakeCudaBackendTest {
 protected:
  void SetUp() override {
    CudaBackendOptions options;
    options.nccl_library = MSTEP_FAKE_LIBNCCL;
    auto backend = CudaBackend::create(fake_.driver(), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    fake_nccl_fn<void()>("mstep_fake_nccl_clear")();
    fake_nccl_fn<void(void (*)(const char*, void*, const char*))>("mstep_fake_nccl_set_hook")(
        record_in_driver);
  }
  void TearDown() override {
    fake_nccl_fn<void(int)>("mstep_fake_nccl_set_async_error")(ncclSuccess);
    fake_nccl_fn<void(void (*)(const char*, void*, const char*))>("mstep_fake_nccl_set_hook")(
        nullptr);
  }
  /// The work queued on the stream since call `before`: kernels by name,
  /// NCCL calls by function.
  std::vector<testing::FakeCall> stream_work(size_t before) const {
    std::vector<testing::FakeCall> work;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel" ||
          fake_.calls[i].name.rfind("nccl", 0) == 0)
        work.push_back(fake_.calls[i]);
    return work;
  }
};

TEST_F(CudaNcclStepTest, EachCollectiveIsOneNcclStepWithTheNodesAttributes) {
  auto plan = plan_of(kEveryCollective);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->collectives.size(), 4u);
  EXPECT_TRUE(plan->kernels.empty());  // no kernel: four NCCL calls
  ASSERT_EQ(plan->launches.size(), 4u);
  const CudaCollectiveInfo& reduce = plan->collectives[0];
  EXPECT_EQ(reduce.op, OpKind::all_reduce);
  EXPECT_EQ(reduce.reduce_op, 2);  // max
  EXPECT_EQ(reduce.world_size, 2);
  EXPECT_EQ(reduce.origin, "mstep.all_reduce #0");
  EXPECT_EQ(plan->collectives[1].op, OpKind::all_gather);
  EXPECT_EQ(plan->collectives[2].op, OpKind::broadcast);
  EXPECT_EQ(plan->collectives[2].root, 1);
  EXPECT_EQ(plan->collectives[3].op, OpKind::reduce_scatter);
  for (size_t l = 0; l < 4; ++l) {
    EXPECT_EQ(plan->launches[l].collective, static_cast<int>(l));
    EXPECT_EQ(plan->launches[l].writes.size(), 1u);
  }
  // The inputs: %0 (bf16) for all but the broadcast, which reads %1 (i64).
  EXPECT_THAT(plan->launches[2].args, ElementsAre(1));
  EXPECT_THAT(plan->launches[3].args, ElementsAre(0));
  // A world of 2 loads only where the communicator has 2 ranks.
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(),
              HasSubstr("mstep.all_reduce #0 was recorded in a world of 2 processes but this "
                        "backend's NCCL communicator has 1 ranks"));
}

TEST_F(CudaNcclStepTest, WhatOneNcclCallCannotDoIsAClearCompileError) {
  auto boolean = plan_of(R"(
func.func @step(%x: tensor<4xi1>) -> tensor<4xi1> {
  %0 = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<4xi1> -> tensor<4xi1>
  return %0 : tensor<4xi1>
}
)");
  ASSERT_FALSE(boolean.ok());
  EXPECT_EQ(boolean.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(boolean.status().message(),
              HasSubstr("op 'mstep.all_reduce' (mstep.all_reduce #0, bool[4]) is not lowered for "
                        "cuda: NCCL does not reduce bool"));
  auto inner = plan_of(R"(
func.func @step(%x: tensor<4x3xf32>) -> tensor<4x6xf32> {
  %0 = mstep.all_gather %x {dim = 1 : i64, world_size = 2 : i64} : tensor<4x3xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}
)");
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(inner.status().message(),
              HasSubstr("op 'mstep.all_gather' (mstep.all_gather #0, f32[4, 3]) along dim 1 is "
                        "not yet lowered for cuda"));
}

TEST_F(CudaNcclStepTest, TheCallRunsOnTheStreamBetweenTheKernelsOverTheirBuffers) {
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  // A world of one without MPI: a unique id and a 1-rank communicator.
  EXPECT_THAT(fake_nccl_log(),
              HasSubstr("ncclGetUniqueId\nncclCommInitRankConfig nranks=1 rank=0 id=7 blocking=0\n"));
  BufferPtr x = input({Shape({8, 64}), DType::f32});
  const size_t before = fake_.calls.size();
  auto out = (*exe)->run({x});
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<testing::FakeCall> work = stream_work(before);
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[0].name, "cuLaunchKernel");
  EXPECT_EQ(work[1].name, "ncclAllReduce");
  EXPECT_EQ(work[2].name, "cuLaunchKernel");
  for (const testing::FakeCall& call : work) EXPECT_EQ(call.stream, backend_->context().stream());
  // exp's result (the launch's last argument) in, tanh's operand out: 512
  // f32s averaged (ncclAvg: no scale kernel).
  auto pointer = [](const std::string& bytes) {
    CUdeviceptr p = 0;
    std::memcpy(&p, bytes.data(), sizeof p);
    return p;
  };
  const std::string expected = absl::StrCat(
      "ncclAllReduce in=", address_text(pointer(work[0].args.back())),
      " out=", address_text(pointer(work[2].args.front())), " count=512 type=",
      static_cast<int>(ncclFloat32), " op=", static_cast<int>(ncclAvg), " root=-1");
  EXPECT_THAT(work[1].args.front(), HasSubstr(expected));
  EXPECT_NE(work[0].args.back(), work[2].args.front());  // not in place
}

TEST_F(CudaNcclStepTest, OneCommunicatorPerBackendDestroyedWithIt) {
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto first = CudaExecutable::create(*backend_, *plan);
  auto second = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(first.ok() && second.ok());
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(fake_nccl_log(), "ncclCommInitRank"), 1u);
  EXPECT_EQ(count(fake_nccl_log(), "ncclCommDestroy"), 0u);
  first->reset();
  second->reset();
  backend_.reset();
  EXPECT_EQ(count(fake_nccl_log(), "ncclCommDestroy"), 1u);
}

// The communicator's init is non-blocking and given up after the backend's
// collective timeout: a peer that never joins fails the executable's
// load, naming the op, the rank, the world and the timeout; the backend
// makes its communicator at the next load.
TEST_F(CudaNcclStepTest, ACommunicatorInitThatNeverEndsFailsTheLoadAfterTheTimeout) {
  CudaBackendOptions options;
  options.nccl_library = MSTEP_FAKE_LIBNCCL;
  options.collective_timeout_s = 0.05;
  auto backend = CudaBackend::create(fake_.driver(), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  fake_nccl_fn<void(int, int)>("mstep_fake_nccl_set_init")(-1, ncclSuccess);
  auto stuck = CudaExecutable::create(**backend, *plan);
  ASSERT_FALSE(stuck.ok());
  EXPECT_EQ(stuck.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(stuck.status().message(),
              HasSubstr("making the NCCL communicator for mstep.all_reduce #1: nccl: "
                        "ncclCommInitRankConfig (rank 0 of 1) not done within 0.05 s"));
  EXPECT_THAT(fake_nccl_log(), HasSubstr("ncclCommAbort"));
  auto next = CudaExecutable::create(**backend, *plan);
  EXPECT_TRUE(next.ok()) << next.status();
}

TEST_F(CudaNcclStepTest, ANcclErrorNamesTheOpTheRankAndNcclsText) {
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({8, 64}), DType::f32});
  fake_nccl_fn<void(int)>("mstep_fake_nccl_fail_next")(ncclInternalError);
  auto out = (*exe)->run({x});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("mstep.all_reduce #1 on rank 0 of 1: nccl: mstep.all_reduce failed: "
                        "ncclResult 3 (fake error)"));
  // The backend goes on: the next run queues the call again.
  auto again = (*exe)->run({x});
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(CudaNcclStepTest, ACapturedGraphHoldsTheCallBetweenTheKernels) {
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(*backend_, *plan);
  ASSERT_TRUE(exe.ok()) << exe.status();
  BufferPtr x = input({Shape({8, 64}), DType::f32});
  BufferPtr y = input({Shape({8, 64}), DType::f32});
  auto graph = backend_->record_graph(
      [&] { return (*exe)->run({x}, {.inputs = {}, .outputs = {y}}).status(); });
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::string> nodes;
  for (const testing::FakeCall& node : fake_.last_captured)
    if (node.name == "cuLaunchKernel" || node.name.rfind("nccl", 0) == 0)
      nodes.push_back(node.name);
  EXPECT_THAT(nodes, ElementsAre("cuLaunchKernel", "ncclAllReduce", "cuLaunchKernel"));
}

/// A backend whose waits give up on a collective after 50 ms, and an
/// executable of reduce_step(1) run once on it.
class CudaNcclTimeoutTest : public CudaNcclStepTest {
 protected:
  void SetUp() override {
    CudaNcclStepTest::SetUp();
    CudaBackendOptions options;
    options.nccl_library = MSTEP_FAKE_LIBNCCL;
    options.collective_timeout_s = 0.05;
    auto backend = CudaBackend::create(fake_.driver(), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    auto plan = plan_of(reduce_step(1).c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    add_kernels(*plan);
    auto exe = CudaExecutable::create(*backend_, *plan);
    ASSERT_TRUE(exe.ok()) << exe.status();
    exe_ = std::move(*exe);
    auto out = exe_->run({input({Shape({8, 64}), DType::f32})});
    ASSERT_TRUE(out.ok()) << out.status();
  }
  void TearDown() override {
    fake_.work_hangs = false;
    CudaNcclStepTest::TearDown();
  }
  std::unique_ptr<CudaExecutable> exe_;
};

TEST_F(CudaNcclTimeoutTest, AWaitThatNeverEndsAbortsTheCommunicatorAfterTheTimeout) {
  fake_.work_hangs = true;  // a peer that never joins the all_reduce
  absl::Status waited = backend_->synchronize();
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(waited.message(), HasSubstr("on rank 0 of 1: not done within 0.05 s "
                                          "(MSTEP_DIST_TIMEOUT)"));
  EXPECT_THAT(fake_nccl_log(), HasSubstr("ncclCommAbort"));
  // Later waits fail at once, naming the abort.
  absl::Status again = backend_->synchronize();
  EXPECT_THAT(again.message(), HasSubstr("the NCCL communicator was aborted"));
  fake_.work_hangs = false;
  exe_.reset();
  backend_.reset();
  EXPECT_THAT(fake_nccl_log(), Not(HasSubstr("ncclCommDestroy")));  // aborted, not destroyed
}

TEST_F(CudaNcclTimeoutTest, NcclsAsynchronousErrorEndsTheWaitAtOnce) {
  fake_.work_hangs = true;
  fake_nccl_fn<void(int)>("mstep_fake_nccl_set_async_error")(ncclRemoteError);
  absl::Status waited = backend_->synchronize();
  EXPECT_EQ(waited.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(waited.message(),
              HasSubstr(absl::StrCat("NCCL failed: ncclResult ", static_cast<int>(ncclRemoteError),
                                     " (fake error)")));
  EXPECT_THAT(fake_nccl_log(), HasSubstr("ncclCommAbort"));
}

TEST_F(CudaNcclStepTest, AMissingNcclFailsTheLoadNamingTheOp) {
  CudaBackendOptions options;
  options.nccl_library = "/nonexistent/libnccl.so.2";
  auto backend = CudaBackend::create(fake_.driver(), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto plan = plan_of(reduce_step(1).c_str());
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(**backend, *plan);
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(),
              HasSubstr("cuda: mstep.all_reduce #1 needs NCCL: nccl: unavailable: "));
}

}  // namespace
}  // namespace mstep::cuda
