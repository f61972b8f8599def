// C API: statuses, version, contexts, devices, options and metrics.
#include <cstring>

#include "test/capi/CapiTestUtil.h"

namespace mstep::capi_test {
namespace {

TEST(CapiStatus, NullIsOkAndFreeingNullIsANoOp) {
  EXPECT_EQ(mstep_status_code_of(nullptr), MSTEP_OK);
  EXPECT_STREQ(mstep_status_message(nullptr), "");
  mstep_status_free(nullptr);
}

TEST(CapiStatus, VersionMatchesTheHeader) {
  EXPECT_EQ(mstep_c_api_version(), MSTEP_C_API_VERSION);
  EXPECT_EQ(MSTEP_C_API_VERSION, MSTEP_C_API_VERSION_MAJOR * 10000 +
                                     MSTEP_C_API_VERSION_MINOR * 100 + MSTEP_C_API_VERSION_PATCH);
}

TEST(CapiStatus, DtypeSizes) {
  EXPECT_EQ(mstep_dtype_size(MSTEP_F32), 4u);
  EXPECT_EQ(mstep_dtype_size(MSTEP_BF16), 2u);
  EXPECT_EQ(mstep_dtype_size(MSTEP_I64), 8u);
  EXPECT_EQ(mstep_dtype_size(MSTEP_BOOL), 1u);
  EXPECT_EQ(mstep_dtype_size(static_cast<mstep_dtype>(99)), 0u);
}

TEST(CapiContext, CreateNeedsAnOutPointer) {
  Outcome o = outcome(mstep_context_create(nullptr));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("out_context"), std::string::npos) << o.message;
}

TEST(CapiContext, ReleaseWithLiveHandlesFailsAndKeepsTheContext) {
  mstep_context* ctx = nullptr;
  MSTEP_ASSERT_OK(mstep_context_create(&ctx));
  const float v = 1;
  const int64_t shape[] = {1};
  mstep_tensor* t = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_from_host(ctx, nullptr, MSTEP_F32, shape, 1, &v, 4, &t));
  Outcome o = outcome(mstep_context_release(ctx));
  EXPECT_EQ(o.code, MSTEP_FAILED_PRECONDITION);
  EXPECT_NE(o.message.find("1 handle(s)"), std::string::npos) << o.message;
  // Still usable.
  double item = 0;
  MSTEP_EXPECT_OK(mstep_tensor_item(t, &item));
  EXPECT_EQ(item, 1.0);
  MSTEP_EXPECT_OK(mstep_tensor_release(t));
  MSTEP_EXPECT_OK(mstep_context_release(ctx));
  MSTEP_EXPECT_OK(mstep_context_release(nullptr));
}

TEST(CapiContext, UseAfterReleaseIsDetected) {
  mstep_context* ctx = nullptr;
  MSTEP_ASSERT_OK(mstep_context_create(&ctx));
  MSTEP_ASSERT_OK(mstep_context_release(ctx));
  EXPECT_EQ(outcome(mstep_context_manual_seed(ctx, 1)).code, MSTEP_FAILED_PRECONDITION);
  EXPECT_EQ(outcome(mstep_context_release(ctx)).code, MSTEP_FAILED_PRECONDITION);
}

using CapiContextTest = CapiTest;

TEST_F(CapiContextTest, NullContextIsAnError) {
  mstep_device* d = nullptr;
  Outcome o = outcome(mstep_context_device(nullptr, "cpu", &d));
  EXPECT_EQ(o.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(o.message.find("context is NULL"), std::string::npos) << o.message;
  EXPECT_EQ(outcome(mstep_context_mark_step(nullptr)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_manual_seed(nullptr, 0)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_set_grad_enabled(nullptr, 1)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_set_option(nullptr, "fuse", "1")).code,
            MSTEP_INVALID_ARGUMENT);
}

TEST_F(CapiContextTest, Devices) {
  mstep_device* ref = nullptr;
  MSTEP_ASSERT_OK(mstep_context_device(ctx, "ref", &ref));
  EXPECT_STREQ(mstep_device_name(ref), "ref:0");
  EXPECT_STREQ(mstep_device_name(cpu), "cpu:0");
  mstep_device* again = nullptr;
  MSTEP_ASSERT_OK(mstep_context_device(ctx, "cpu:0", &again));
  EXPECT_EQ(again, cpu);
  mstep_device* def = nullptr;
  MSTEP_ASSERT_OK(mstep_context_default_device(ctx, &def));
  EXPECT_EQ(def, cpu);  // set by the fixture

  mstep_device* none = nullptr;
  Outcome o = outcome(mstep_context_device(ctx, "tpu", &none));
  EXPECT_EQ(o.code, MSTEP_NOT_FOUND);
  EXPECT_NE(o.message.find("available: ref, cpu"), std::string::npos)
      << "lists every registered backend: " << o.message;
  EXPECT_EQ(outcome(mstep_context_device(ctx, "cpu:7", &none)).code, MSTEP_NOT_FOUND);
  EXPECT_EQ(outcome(mstep_context_device(ctx, nullptr, &none)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_device(ctx, "cpu", nullptr)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(none, nullptr);
}

TEST_F(CapiContextTest, EveryRegisteredBackendNameIsADevice) {
  for (const char* name : {"ref", "cpu"}) {
    mstep_device* d = nullptr;
    MSTEP_ASSERT_OK(mstep_context_device(ctx, name, &d));
    EXPECT_EQ(std::string(mstep_device_name(d)), std::string(name) + ":0");
    MSTEP_ASSERT_OK(mstep_context_set_option(ctx, "device", name));
    mstep_device* def = nullptr;
    MSTEP_ASSERT_OK(mstep_context_default_device(ctx, &def));
    EXPECT_EQ(def, d);
  }
}

TEST_F(CapiContextTest, OptionsAreCheckedAndBadOnesChangeNothing) {
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "log_recompiles", "0"));
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "fuse", "1"));
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "max_graphs", "128"));
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "log_fallback", "0"));

  Outcome unknown = outcome(mstep_context_set_option(ctx, "colour", "blue"));
  EXPECT_EQ(unknown.code, MSTEP_NOT_FOUND);
  EXPECT_NE(unknown.message.find("max_graphs"), std::string::npos) << unknown.message;
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, "fuse", "maybe")).code,
            MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, "max_graphs", "0")).code,
            MSTEP_INVALID_ARGUMENT);
  Outcome device = outcome(mstep_context_set_option(ctx, "device", "gpu"));
  EXPECT_EQ(device.code, MSTEP_NOT_FOUND);
  EXPECT_NE(device.message.find("available: ref, cpu"), std::string::npos) << device.message;
  Outcome cache = outcome(mstep_context_set_option(ctx, "cache", "/tmp/x,sometimes"));
  EXPECT_EQ(cache.code, MSTEP_INVALID_ARGUMENT) << cache.message;
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, nullptr, "1")).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, "fuse", nullptr)).code,
            MSTEP_INVALID_ARGUMENT);
  mstep_device* def = nullptr;
  MSTEP_ASSERT_OK(mstep_context_default_device(ctx, &def));
  EXPECT_EQ(def, cpu) << "a rejected device option must not change the default";
}

// The option takes effect on the steps compiled after it: every compute op
// then runs its ref kernel, counted as a host fallback.
TEST_F(CapiContextTest, CpuDisableOptionRunsOpsOnTheRefKernels) {
  MSTEP_ASSERT_OK(mstep_context_set_option(ctx, "cpu_disable", "all"));
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  mstep_tensor* a = f32({1, 2, 3, 4, 5, 6, 7}, {7});  // a shape no other test compiles
  mstep_tensor* b = op("mul", {a, a});
  MSTEP_ASSERT_OK(mstep_context_mark_step(ctx));
  MSTEP_ASSERT_OK(mstep_context_set_option(ctx, "cpu_disable", ""));
  EXPECT_EQ(values(b), (std::vector<float>{1, 4, 9, 16, 25, 36, 49}));
  EXPECT_EQ(metric("fallbacks"), 1);
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, "cpu_profile", "often")).code,
            MSTEP_INVALID_ARGUMENT);
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "cpu_profile", "0"));
}

// The xla memory limit is checked when set: a value that is not a number
// of bytes is refused, naming the option and the value, and changes
// nothing; "" lifts the limit.
TEST_F(CapiContextTest, XlaMemoryLimitOptionIsCheckedWhenSet) {
  Outcome bad = outcome(mstep_context_set_option(ctx, "xla_memory_limit", "12kb"));
  EXPECT_EQ(bad.code, MSTEP_INVALID_ARGUMENT);
  EXPECT_NE(bad.message.find("option 'xla_memory_limit'"), std::string::npos) << bad.message;
  EXPECT_NE(bad.message.find("'12kb' is not a number of bytes above 0"), std::string::npos)
      << bad.message;
  EXPECT_EQ(outcome(mstep_context_set_option(ctx, "xla_memory_limit", "0")).code,
            MSTEP_INVALID_ARGUMENT);
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "xla_memory_limit", "1048576"));
  MSTEP_EXPECT_OK(mstep_context_set_option(ctx, "xla_memory_limit", ""));
}

TEST_F(CapiContextTest, MetricsCountersAndReport) {
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  mstep_tensor* a = f32({1, 2}, {2});
  mstep_tensor* b = op("add", {a, a});
  MSTEP_ASSERT_OK(mstep_context_mark_step(ctx));
  EXPECT_EQ(values(b), (std::vector<float>{2, 4}));
  EXPECT_EQ(metric("mark_steps"), 1);
  EXPECT_EQ(metric("graphs_executed"), 1);
  EXPECT_EQ(metric("thread_rebuilds"), 0);  // the thread count did not change

  size_t length = 0;
  MSTEP_ASSERT_OK(mstep_metrics_report(ctx, nullptr, 0, &length));
  ASSERT_GT(length, 20u);
  std::string full(length + 1, '\0');
  size_t again = 0;
  MSTEP_ASSERT_OK(mstep_metrics_report(ctx, full.data(), full.size(), &again));
  EXPECT_EQ(again, length);
  EXPECT_EQ(std::strlen(full.c_str()), length);
  EXPECT_NE(full.find("compile_time"), std::string::npos) << full;

  char small[8];
  MSTEP_ASSERT_OK(mstep_metrics_report(ctx, small, sizeof small, &again));
  EXPECT_EQ(std::strlen(small), 7u) << "truncated and NUL-terminated";
  EXPECT_EQ(std::string(small), full.substr(0, 7));

  double v = 0;
  Outcome o = outcome(mstep_metrics_get(ctx, "speed", &v));
  EXPECT_EQ(o.code, MSTEP_NOT_FOUND);
  EXPECT_NE(o.message.find("cache_hits"), std::string::npos) << o.message;
  EXPECT_EQ(outcome(mstep_metrics_get(ctx, "replays", nullptr)).code, MSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(outcome(mstep_metrics_report(ctx, nullptr, 4, &length)).code,
            MSTEP_INVALID_ARGUMENT);
}

TEST_F(CapiContextTest, TheNeuronDevicesSimulatedTime) {
  MSTEP_ASSERT_OK(mstep_metrics_reset(ctx));
  EXPECT_EQ(metric("simulated_seconds"), 0);  // nothing ran on a simulated device
  mstep_device* neuron = nullptr;
  MSTEP_ASSERT_OK(mstep_context_device(ctx, "neuron", &neuron));
  const float v[3] = {1, 2, 3};
  const int64_t shape[1] = {3};
  mstep_tensor* a = nullptr;
  MSTEP_ASSERT_OK(mstep_tensor_from_host(ctx, neuron, MSTEP_F32, shape, 1, v, sizeof v, &a));
  keep(a);
  mstep_tensor* b = op("add", {a, a});  // elementwise: a tile program
  MSTEP_ASSERT_OK(mstep_context_mark_step(ctx));
  EXPECT_EQ(values(b), (std::vector<float>{2, 4, 6}));
  EXPECT_GT(metric("simulated_seconds"), 0);
  EXPECT_EQ(metric("simulated_tensor_utilization"), 0);  // no matmul ran
}

}  // namespace
}  // namespace mstep::capi_test
