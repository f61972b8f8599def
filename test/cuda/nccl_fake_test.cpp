// The NCCL layer (lib/backends/cuda/NcclApi.h) against a fake libnccl
// (fake_libnccl.cpp): the loader's errors, the call planned for each
// collective node (refused where the plan's check refuses it), that it is
// issued on the given stream with the node's buffers, count, type and
// reduction, and the communicator's non-blocking init with its timeout.
// Not GPU-verified.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "lib/backends/cuda/NcclApi.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

std::string fake_log() {
  void* lib = dlopen(MSTEP_FAKE_LIBNCCL, RTLD_NOW | RTLD_NOLOAD);
  auto log = reinterpret_cast<const char* (*)()>(dlsym(lib, "mstep_fake_nccl_log"));
  return log ? log() : "(no log)";
}

/// The fake's hooks (fake_libnccl.cpp), once it is loaded.
template <typename F> F* fake_fn(const char* name) {
  return reinterpret_cast<F*>(dlsym(dlopen(MSTEP_FAKE_LIBNCCL, RTLD_NOW), name));
}
void clear_fake_log() { fake_fn<void()>("mstep_fake_nccl_clear")(); }
/// The next init answers ncclInProgress to `polls` polls (-1: forever),
/// then ends with `result`.
void set_fake_init(int polls, ncclResult_t result) {
  fake_fn<void(int, int)>("mstep_fake_nccl_set_init")(polls, result);
}
size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(NcclFake, AMissingLibraryIsUnavailable) {
  auto api = load_nccl("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("nccl: unavailable: "));
}

/// A collective step of `op` in a world of 2.
CudaCollectiveInfo step(OpKind op, int64_t reduce_op = 0, int64_t root = 0, int64_t dim = 0) {
  return CudaCollectiveInfo{"mstep.test #0", op, reduce_op, root, dim, /*world_size=*/2};
}

TEST(NcclFake, PlansOneCallPerCollective) {
  const TensorType x{Shape{4, 6}, DType::f32};
  auto mean = plan_nccl_call(step(OpKind::all_reduce, 1), x, x);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->count, 24u);
  EXPECT_EQ(mean->reduce, ncclAvg);
  auto scatter =
      plan_nccl_call(step(OpKind::reduce_scatter, 2), x, TensorType{Shape{2, 6}, DType::f32});
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  EXPECT_EQ(scatter->count, 12u);  // received per rank
  EXPECT_EQ(scatter->reduce, ncclMax);
  const TensorType bf16{Shape{3}, DType::bf16};
  auto broadcast = plan_nccl_call(step(OpKind::broadcast, 0, 1), bf16, bf16);
  ASSERT_TRUE(broadcast.ok()) << broadcast.status();
  EXPECT_EQ(broadcast->datatype, ncclBfloat16);
  EXPECT_EQ(broadcast->root, 1);
}

// What one NCCL call cannot do is refused by the plan's own check
// (check_cuda_collective), with its words: one implementation.
TEST(NcclFake, RefusesWhatThePlanCheckRefuses) {
  const TensorType x{Shape{4, 6}, DType::f32};
  const TensorType gathered{Shape{4, 12}, DType::f32};
  auto inner = plan_nccl_call(step(OpKind::all_gather, 0, 0, 1), x, gathered);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status(), check_cuda_collective(step(OpKind::all_gather, 0, 0, 1), x, gathered));
  EXPECT_THAT(inner.status().message(), HasSubstr("along dim 1 is not yet lowered"));
  const TensorType flags{Shape{5}, DType::boolean};
  auto reduced_bool = plan_nccl_call(step(OpKind::all_reduce), flags, flags);
  ASSERT_FALSE(reduced_bool.ok());
  EXPECT_EQ(reduced_bool.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(reduced_bool.status().message(), HasSubstr("NCCL does not reduce bool"));
  auto moved_bool = plan_nccl_call(step(OpKind::broadcast), flags, flags);
  ASSERT_TRUE(moved_bool.ok()) << moved_bool.status();
  EXPECT_EQ(moved_bool->datatype, ncclUint8);
  auto bad_code = plan_nccl_call(step(OpKind::all_reduce, 7), x, x);
  ASSERT_FALSE(bad_code.ok());
  EXPECT_THAT(bad_code.status().message(), HasSubstr("reduce_op 7"));
}

TEST(NcclFake, AWorldOfOneIssuesTheCallOnTheStream) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->version, 22805);
  auto comm = NcclComm::world_of_one(**api, /*timeout_s=*/60);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->world_size(), 1);
  EXPECT_THAT(fake_log(), HasSubstr("ncclCommInitRankConfig nranks=1 rank=0 id=7 blocking=0"));
  const TensorType x{Shape{8}, DType::f32};
  auto call = plan_nccl_call(CudaCollectiveInfo{"mstep.all_reduce #0", OpKind::all_reduce}, x, x);
  ASSERT_TRUE(call.ok());
  void* stream = reinterpret_cast<void*>(0xabc0);
  const void* in = reinterpret_cast<const void*>(0x1000);
  void* out = reinterpret_cast<void*>(0x2000);
  ASSERT_TRUE(issue_nccl_call(**api, **comm, *call, in, out, stream).ok());
  EXPECT_THAT(fake_log(), HasSubstr("ncclAllReduce in=0x1000 out=0x2000 count=8 type=7 op=0"));
  EXPECT_THAT(fake_log(), HasSubstr("stream=0xabc0"));
}

// NCCL counts are size_t: a collective above 2 GiB (MPI's per-call limit,
// which the cpu path slices around) is one NCCL call with its full count.
// Plans and calls only: the fake touches no memory.
TEST(NcclFake, CollectivesAbove2GiBAreOneCallWithTheirFullCount) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  auto comm = NcclComm::world_of_one(**api, /*timeout_s=*/60);
  ASSERT_TRUE(comm.ok()) << comm.status();
  const int64_t n = int64_t{3} << 30;  // 12 GiB of f32
  const TensorType big{Shape{n}, DType::f32};
  auto reduce = plan_nccl_call(CudaCollectiveInfo{"mstep.all_reduce #0", OpKind::all_reduce}, big, big);
  ASSERT_TRUE(reduce.ok()) << reduce.status();
  EXPECT_EQ(reduce->count, static_cast<size_t>(n));
  auto scatter = plan_nccl_call(step(OpKind::reduce_scatter), big, TensorType{Shape{n / 2}, DType::f32});
  ASSERT_TRUE(scatter.ok()) << scatter.status();
  EXPECT_EQ(scatter->count, static_cast<size_t>(n / 2));
  clear_fake_log();
  const void* in = reinterpret_cast<const void*>(0x1000);
  void* out = reinterpret_cast<void*>(0x2000);
  ASSERT_TRUE(issue_nccl_call(**api, **comm, *reduce, in, out, reinterpret_cast<void*>(0xabc0)).ok());
  EXPECT_EQ(count(fake_log(), "ncclAllReduce "), 1u);
  EXPECT_THAT(fake_log(), HasSubstr("count=3221225472 "));
}

// ncclCommInitRankConfig with blocking = 0, then ncclCommGetAsyncError
// until the init leaves ncclInProgress.
TEST(NcclFake, TheCommunicatorInitIsNonBlockingAndPolled) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  clear_fake_log();
  set_fake_init(3, ncclSuccess);
  ncclUniqueId id;
  std::memset(&id, 7, sizeof id);
  auto comm = NcclComm::join(**api, id, 1, 2, /*timeout_s=*/60);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->rank(), 1);
  EXPECT_EQ((*comm)->world_size(), 2);
  const std::string log = fake_log();
  EXPECT_THAT(log, HasSubstr("ncclCommInitRankConfig nranks=2 rank=1 id=7 blocking=0\n"));
  EXPECT_EQ(count(log, "ncclCommGetAsyncError"), 4u) << log;  // 3 in progress, then done
  EXPECT_EQ(count(log, "ncclCommAbort"), 0u) << log;
}

// A peer that never joins: the init never ends here; it is aborted after
// the timeout, and the error names the rank, the world and the timeout.
TEST(NcclFake, AnInitThatNeverEndsIsAbortedAfterTheTimeout) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  clear_fake_log();
  set_fake_init(-1, ncclSuccess);
  ncclUniqueId id;
  std::memset(&id, 7, sizeof id);
  auto comm = NcclComm::join(**api, id, 1, 2, /*timeout_s=*/0.05);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(comm.status().message(), HasSubstr("ncclCommInitRankConfig (rank 1 of 2)"));
  EXPECT_THAT(comm.status().message(), HasSubstr("not done within 0.05 s"));
  EXPECT_THAT(comm.status().message(), HasSubstr("aborted"));
  EXPECT_EQ(count(fake_log(), "ncclCommAbort"), 1u) << fake_log();
  // The fake is ready for the next init.
  auto next = NcclComm::world_of_one(**api, /*timeout_s=*/60);
  EXPECT_TRUE(next.ok()) << next.status();
}

// An init that ends in an error is aborted and reported with NCCL's text.
TEST(NcclFake, AFailedInitIsAbortedAndNamed) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  clear_fake_log();
  set_fake_init(2, ncclSystemError);
  auto comm = NcclComm::world_of_one(**api, /*timeout_s=*/60);
  ASSERT_FALSE(comm.ok());
  EXPECT_THAT(comm.status().message(), HasSubstr("ncclCommInitRankConfig (rank 0 of 1) failed"));
  EXPECT_THAT(comm.status().message(), HasSubstr("fake error"));
  EXPECT_EQ(count(fake_log(), "ncclCommAbort"), 1u) << fake_log();
}

}  // namespace
}  // namespace mstep::cuda
