// The NCCL layer (lib/backends/cuda/NcclApi.h) against a fake libnccl
// (fake_libnccl.cpp): the loader's errors, the call planned for each
// collective node, and that it is issued on the given stream with the
// node's buffers, count, type and reduction. Not GPU-verified.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/NcclApi.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

std::string fake_log() {
  void* lib = dlopen(MSTEP_FAKE_LIBNCCL, RTLD_NOW | RTLD_NOLOAD);
  auto log = reinterpret_cast<const char* (*)()>(dlsym(lib, "mstep_fake_nccl_log"));
  return log ? log() : "(no log)";
}

TEST(NcclFake, AMissingLibraryIsUnavailable) {
  auto api = load_nccl("/nonexistent/libnccl.so.2");
  ASSERT_FALSE(api.ok());
  EXPECT_THAT(api.status().message(), HasSubstr("nccl: unavailable: "));
}

TEST(NcclFake, PlansOneCallPerCollective) {
  const TensorType x{Shape{4, 6}, DType::f32};
  auto mean = plan_nccl_call(OpKind::all_reduce, 1, 0, 0, x, 2);
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->count, 24u);
  EXPECT_EQ(mean->reduce, ncclAvg);
  auto scatter = plan_nccl_call(OpKind::reduce_scatter, 2, 0, 0, x, 2);
  ASSERT_TRUE(scatter.ok());
  EXPECT_EQ(scatter->count, 12u);  // received per rank
  EXPECT_EQ(scatter->reduce, ncclMax);
  auto bf16 = plan_nccl_call(OpKind::broadcast, 0, 1, 0, TensorType{Shape{3}, DType::bf16}, 2);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->datatype, ncclBfloat16);
  EXPECT_EQ(bf16->root, 1);
  auto inner = plan_nccl_call(OpKind::all_gather, 0, 0, 1, x, 2);
  ASSERT_FALSE(inner.ok());
  EXPECT_THAT(inner.status().message(), HasSubstr("along dim 1 of f32[4, 6] is not yet lowered"));
}

TEST(NcclFake, AWorldOfOneIssuesTheCallOnTheStream) {
  auto api = load_nccl(MSTEP_FAKE_LIBNCCL);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->version, 22805);
  auto comm = NcclComm::world_of_one(**api);
  ASSERT_TRUE(comm.ok()) << comm.status();
  EXPECT_EQ((*comm)->world_size(), 1);
  EXPECT_THAT(fake_log(), HasSubstr("ncclCommInitRank nranks=1 rank=0"));
  auto call = plan_nccl_call(OpKind::all_reduce, 0, 0, 0, TensorType{Shape{8}, DType::f32}, 1);
  ASSERT_TRUE(call.ok());
  void* stream = reinterpret_cast<void*>(0xabc0);
  const void* in = reinterpret_cast<const void*>(0x1000);
  void* out = reinterpret_cast<void*>(0x2000);
  ASSERT_TRUE(issue_nccl_call(**api, **comm, *call, in, out, stream).ok());
  EXPECT_THAT(fake_log(), HasSubstr("ncclAllReduce in=0x1000 out=0x2000 count=8 type=7 op=0"));
  EXPECT_THAT(fake_log(), HasSubstr("stream=0xabc0"));
}

}  // namespace
}  // namespace mstep::cuda
