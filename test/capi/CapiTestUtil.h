// Helpers for the C API tests: status checks that free what they read, and
// small tensor constructors over the C API.
#pragma once

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mstep-c/mstep.h"

namespace mstep::capi_test {

/// The code and message of `status`, which it frees.
struct Outcome {
  mstep_status_code code;
  std::string message;
};
inline Outcome outcome(mstep_status* status) {
  Outcome o{mstep_status_code_of(status), mstep_status_message(status)};
  mstep_status_free(status);
  return o;
}

#define MSTEP_ASSERT_OK(expr)                                        \
  do {                                                               \
    ::mstep::capi_test::Outcome o_ = ::mstep::capi_test::outcome(expr); \
    ASSERT_EQ(o_.code, MSTEP_OK) << #expr << ": " << o_.message;     \
  } while (0)

#define MSTEP_EXPECT_OK(expr)                                        \
  do {                                                               \
    ::mstep::capi_test::Outcome o_ = ::mstep::capi_test::outcome(expr); \
    EXPECT_EQ(o_.code, MSTEP_OK) << #expr << ": " << o_.message;     \
  } while (0)

inline mstep_attr attr_int(const char* name, int64_t v) {
  mstep_attr a{};
  a.name = name;
  a.kind = MSTEP_ATTR_INT;
  a.i = v;
  return a;
}
inline mstep_attr attr_float(const char* name, double v) {
  mstep_attr a{};
  a.name = name;
  a.kind = MSTEP_ATTR_FLOAT;
  a.f = v;
  return a;
}
inline mstep_attr attr_bool(const char* name, bool v) {
  mstep_attr a = attr_int(name, v ? 1 : 0);
  a.kind = MSTEP_ATTR_BOOL;
  return a;
}
/// `values` must outlive the attribute.
inline mstep_attr attr_ints(const char* name, const std::vector<int64_t>& values) {
  mstep_attr a{};
  a.name = name;
  a.kind = MSTEP_ATTR_INTS;
  a.ints = values.data();
  a.num_ints = values.size();
  return a;
}

/// A context on `device` ("cpu" or "ref") for one test, released (and
/// checked for leaked handles) at the end.
class CapiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MSTEP_ASSERT_OK(mstep_context_create(&ctx));
    MSTEP_ASSERT_OK(mstep_context_device(ctx, "cpu", &cpu));
    MSTEP_ASSERT_OK(mstep_context_set_option(ctx, "device", "cpu"));
  }
  void TearDown() override {
    for (mstep_tensor* t : owned) MSTEP_EXPECT_OK(mstep_tensor_release(t));
    Outcome o = outcome(mstep_context_release(ctx));
    EXPECT_EQ(o.code, MSTEP_OK) << "handles leaked by the test: " << o.message;
  }

  /// An f32 / i64 tensor from values on cpu, released at the end of the test.
  mstep_tensor* f32(const std::vector<float>& values, const std::vector<int64_t>& shape) {
    return from_host(MSTEP_F32, values, shape);
  }
  mstep_tensor* i64(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
    return from_host(MSTEP_I64, values, shape);
  }
  template <typename T>
  mstep_tensor* from_host(mstep_dtype dtype, const std::vector<T>& values,
                          const std::vector<int64_t>& shape) {
    mstep_tensor* t = nullptr;
    Outcome o = outcome(mstep_tensor_from_host(ctx, cpu, dtype, shape.data(), shape.size(),
                                               values.data(), values.size() * sizeof(T), &t));
    EXPECT_EQ(o.code, MSTEP_OK) << o.message;
    return keep(t);
  }
  /// Releases `t` at the end of the test.
  mstep_tensor* keep(mstep_tensor* t) {
    if (t) owned.push_back(t);
    return t;
  }
  /// One-result op; the result is released at the end of the test.
  mstep_tensor* op(const char* name, std::vector<mstep_tensor*> inputs,
                   std::vector<mstep_attr> attrs = {}) {
    mstep_tensor* out = nullptr;
    size_t n = 0;
    Outcome o = outcome(mstep_op(ctx, name, inputs.data(), inputs.size(), attrs.data(),
                                 attrs.size(), &out, 1, &n));
    EXPECT_EQ(o.code, MSTEP_OK) << name << ": " << o.message;
    EXPECT_EQ(n, o.code == MSTEP_OK ? 1u : 0u);
    return keep(out);
  }
  std::vector<float> values(mstep_tensor* t) {
    int64_t n = 0;
    EXPECT_EQ(outcome(mstep_tensor_numel(t, &n)).code, MSTEP_OK);
    std::vector<float> v(static_cast<size_t>(n));
    Outcome o = outcome(mstep_tensor_copy_to_host(t, v.data(), v.size() * sizeof(float)));
    EXPECT_EQ(o.code, MSTEP_OK) << o.message;
    return v;
  }
  std::vector<int64_t> shape(mstep_tensor* t) {
    int64_t dims[MSTEP_MAX_RANK];
    size_t rank = 0;
    EXPECT_EQ(outcome(mstep_tensor_shape(t, dims, MSTEP_MAX_RANK, &rank)).code, MSTEP_OK);
    return std::vector<int64_t>(dims, dims + rank);
  }
  double metric(const char* name) {
    double v = -1;
    EXPECT_EQ(outcome(mstep_metrics_get(ctx, name, &v)).code, MSTEP_OK);
    return v;
  }

  mstep_context* ctx = nullptr;
  mstep_device* cpu = nullptr;
  std::vector<mstep_tensor*> owned;
};

}  // namespace mstep::capi_test
