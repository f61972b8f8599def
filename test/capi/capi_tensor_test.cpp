// C API: tensors — host data in and out (copied and zero-copy), type
// queries, references, use after release, sync points and in-place writes.
#include <cstdlib>
#include <cstring>

#include "test/capi/CapiTestUtil.h"

namespace mstep::capi_test {
namespace {

using CapiTensorTest = CapiTest;

TEST_F(CapiTensorTest, FromHostRoundTripsEveryQuery) {
  mstep_tensor* t = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(shape(t), (std::vector<int64_t>{2, 3}));
  mstep_dtype dtype;
  MSTEP_ASSERT_OK(mstep_tensor_dtype(t, &dtype));
  EXPECT_EQ(dtype, MSTEP_F32);
  int64_t n = 0;
  MSTEP_ASSERT_OK(mstep_tensor_numel(t, &n));
  EXPECT_EQ(n, 6);
  mstep_device* d = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_device(t, &d));
  EXPECT_EQ(d, cpu);
  int pending = 1;
  MSTEP_ASSERT_OK(mstep_tensor_is_pending(t, &pending));
  EXPECT_EQ(pending, 0);
  EXPECT_EQ(values(t), (std::vector<float>{1, 2, 3, 4, 5, 6}));

  // A rank larger than the capacity: the rank is still reported.
  int64_t one_dim[1];
  size_t rank = 0;
  MSTEP_ASSERT_OK(mstep_tensor_shape(t, one_dim, 1, &rank));
  EXPECT_EQ(rank, 2u);
  EXPECT_EQ(one_dim[0], 2);

  mstep_tensor* ids = i64({7, -1}, {2});
  std::vector<int64_t> back(2);
  MSTEP_ASSERT_OK(mstep_tensor_copy_to_host(ids, back.data(), 16));
  EXPECT_EQ(back, (std::vector<int64_t>{7, -1}));
}

TEST_F(CapiTensorTest, BadHostDataIsRejected) {
  const float v[4] = {};
  const int64_t shape2[] = {2, 2};
  const int64_t negative[] = {2, -1};
  const int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  mstep_tensor* t = nullptr;
  Outcome size = outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, shape2, 2, v, 12, &t));
  EXPECT_EQ(size.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(size.message.find("f32[2, 2]"), std::string::npos) << size.message;
  EXPECT_NE(size.message.find("16 bytes"), std::string::npos) << size.message;
  EXPECT_EQ(outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, shape2, 2, nullptr, 16, &t)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(
      outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, negative, 2, v, 16, &t)).code,
      MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, big, 9, v, 4, &t)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, nullptr, 2, v, 16, &t)).code,
            MSTEP_INVALID_ARGUMENT);
  Outcome dtype = outcome(mstep_tensor_from_host(ctx, cpu, static_cast<mstep_dtype>(42),
                                                 shape2, 2, v, 16, &t));
  EXPECT_EQ(dtype.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(dtype.message.find("42"), std::string::npos) << dtype.message;
  EXPECT_EQ(outcome(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, shape2, 2, v, 16, nullptr)).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr) << "no out-parameter is written on failure";
}

struct ReleaseLog {
  int calls = 0;
  void* data = nullptr;
};
void log_release(void* user, void* data) {
  auto* log = static_cast<ReleaseLog*>(user);
  ++log->calls;
  log->data = data;
}

TEST_F(CapiTensorTest, WrapHostIsZeroCopyForAlignedMemory) {
  auto* data = static_cast<float*>(std::aligned_alloc(64, 64 * sizeof(float)));
  for (int i = 0; i < 4; ++i) data[i] = float(i);
  ReleaseLog log;
  const int64_t shape4[] = {4};
  mstep_tensor* t = nullptr;
  int zero_copy = -1;
  MSTEP_ASSERT_OK(mstep_tensor_wrap_host(ctx, cpu, MSTEP_F32, shape4, 1, data, 16, log_release,
                                         &log, &t, &zero_copy));
  EXPECT_EQ(zero_copy, 1);
  data[2] = 42;  // the tensor reads the host's memory itself
  EXPECT_EQ(values(t), (std::vector<float>{0, 1, 42, 3}));

  // fill_ writes through to the host's memory (nothing else holds it).
  MSTEP_ASSERT_OK(mstep_tensor_fill_(t, 5));
  EXPECT_EQ(data[0], 5);

  mstep_tensor* doubled = op("mul", {t, t});
  EXPECT_EQ(values(doubled), (std::vector<float>{25, 25, 25, 25}));
  EXPECT_EQ(log.calls, 0);
  MSTEP_ASSERT_OK(mstep_tensor_release(t));
  EXPECT_EQ(log.calls, 1) << "released with the last reference";
  EXPECT_EQ(log.data, data);
  std::free(data);
}

TEST_F(CapiTensorTest, WrapHostCopiesUnalignedMemoryAndReleasesAtOnce) {
  std::vector<float> storage(9, 1.0f);
  float* unaligned = storage.data() + 1;
  if (reinterpret_cast<uintptr_t>(unaligned) % 64 == 0) unaligned = storage.data() + 2;
  ReleaseLog log;
  const int64_t shape4[] = {4};
  mstep_tensor* t = nullptr;
  int zero_copy = -1;
  MSTEP_ASSERT_OK(mstep_tensor_wrap_host(ctx, cpu, MSTEP_F32, shape4, 1, unaligned, 16,
                                         log_release, &log, &t, &zero_copy));
  keep(t);
  EXPECT_EQ(zero_copy, 0);
  EXPECT_EQ(log.calls, 1) << "a copy frees the host's memory before returning";
  unaligned[0] = 9;
  EXPECT_EQ(values(t), (std::vector<float>{1, 1, 1, 1})) << "a copy does not see later writes";

  // A bad call runs no callback.
  EXPECT_EQ(outcome(mstep_tensor_wrap_host(ctx, cpu, MSTEP_F32, shape4, 1, unaligned, 15,
                                           log_release, &log, &t, nullptr))
                .code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(log.calls, 1);
}

TEST_F(CapiTensorTest, FullMakesEveryDtype) {
  const int64_t shape3[] = {3};
  mstep_tensor* t = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_full(ctx, cpu, MSTEP_I32, shape3, 1, 7, &t));
  keep(t);
  int32_t out[3];
  MSTEP_ASSERT_OK(mstep_tensor_copy_to_host(t, out, sizeof out));
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[2], 7);
  mstep_tensor* s = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_full(ctx, nullptr, MSTEP_F64, nullptr, 0, 2.5, &s));
  keep(s);
  double item = 0;
  MSTEP_ASSERT_OK(mstep_tensor_item(s, &item));
  EXPECT_EQ(item, 2.5);
}

TEST_F(CapiTensorTest, ReferencesAndUseAfterRelease) {
  mstep_tensor* t = nullptr;
  const float v = 3;
  MSTEP_ASSERT_OK(mstep_tensor_from_host(ctx, cpu, MSTEP_F32, nullptr, 0, &v, 4, &t));
  MSTEP_ASSERT_OK(mstep_tensor_retain(t));
  MSTEP_ASSERT_OK(mstep_tensor_release(t));  // one reference left
  double item = 0;
  MSTEP_ASSERT_OK(mstep_tensor_item(t, &item));
  EXPECT_EQ(item, 3);
  MSTEP_ASSERT_OK(mstep_tensor_release(t));  // freed

  Outcome use = outcome(mstep_tensor_item(t, &item));
  EXPECT_EQ(use.code, MSTEP_FAILED_PRECONDITION);
  EXPECT_NE(use.message.find("already released"), std::string::npos) << use.message;
  EXPECT_EQ(outcome(mstep_tensor_release(t)).code, MSTEP_FAILED_PRECONDITION)
      << "a double release is detected";
  mstep_tensor* inputs[] = {t, t};
  mstep_tensor* out = nullptr;
  size_t n = 0;
  EXPECT_EQ(outcome(mstep_op(ctx, "add", inputs, 2, nullptr, 0, &out, 1, &n)).code,
            MSTEP_FAILED_PRECONDITION);
  MSTEP_EXPECT_OK(mstep_tensor_release(nullptr));
}

TEST_F(CapiTensorTest, WrongHandleKindIsRejected) {
  int64_t n = 0;
  // A context passed where a tensor is expected (a host's cast gone wrong).
  Outcome o = outcome(mstep_tensor_numel(reinterpret_cast<mstep_tensor*>(ctx), &n));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("mstep_context"), std::string::npos) << o.message;
}

TEST_F(CapiTensorTest, SyncPointsCheckSizes) {
  mstep_tensor* t = f32({1, 2}, {2});
  float out[2];
  Outcome size = outcome(mstep_tensor_copy_to_host(t, out, 4));
  EXPECT_EQ(size.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(size.message.find("8 bytes"), std::string::npos) << size.message;
  EXPECT_EQ(outcome(mstep_tensor_copy_to_host(t, nullptr, 8)).code, MSTEP_INVALID_ARGUMENT);
  double item = 0;
  Outcome many = outcome(mstep_tensor_item(t, &item));
  EXPECT_EQ(many.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(many.message.find("exactly one element"), std::string::npos) << many.message;
  EXPECT_EQ(outcome(mstep_tensor_item(nullptr, &item)).code, MSTEP_INVALID_ARGUMENT);
}

TEST_F(CapiTensorTest, CopyAndFillInPlace) {
  mstep_tensor* dst = f32({0, 0}, {2});
  mstep_tensor* src = f32({3, 4}, {2});
  MSTEP_ASSERT_OK(mstep_tensor_copy_(dst, src));
  EXPECT_EQ(values(dst), (std::vector<float>{3, 4}));
  mstep_tensor* wrong = f32({1, 2, 3}, {3});
  Outcome o = outcome(mstep_tensor_copy_(dst, wrong));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT) << o.message;
  EXPECT_EQ(values(dst), (std::vector<float>{3, 4})) << "a failed copy_ changes nothing";
  MSTEP_ASSERT_OK(mstep_tensor_fill_(dst, -1));
  EXPECT_EQ(values(dst), (std::vector<float>{-1, -1}));
}

}  // namespace
}  // namespace mstep::capi_test
