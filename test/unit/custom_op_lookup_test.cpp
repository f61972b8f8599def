// A custom-op call reuses the op it looked up last time (a per-thread
// cache, lib/api/CustomOps.cpp) only while the registry is unchanged: a
// new version, a removed op and another thread's lookup all see the
// registry as it is now.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

/// Version `version` of `name`: x + version.
CustomOpDef plus_version(const std::string& name, int64_t version) {
  auto kernel = host_kernel([version](const HostKernelCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.input_types[0].numel(); ++i) y[i] = x[i] + version;
    return absl::OkStatus();
  });
  return {.name = name,
          .version = version,
          .schema = {.inputs = {{"x"}}},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", kernel}, {"cpu", kernel}}};
}

Tensor ones3() { return from_vector(std::vector<float>{1, 1, 1}, {3}); }

TEST(CustomOpLookup, ARemovedOpIsAnErrorAtTheNextCall) {
  const std::string name = "lookup_test.removed";
  register_custom_op(plus_version(name, 1));
  Tensor x = ones3();
  for (int i = 0; i < 3; ++i) custom(name, {x}); // looked up, then reused
  CustomOpRegistry::global().remove_for_testing(name);
  EXPECT_THAT(error_of([&] { custom(name, {x}); }),
              HasSubstr("no custom op named 'lookup_test.removed' is registered"));
  register_custom_op(plus_version(name, 1)); // back: the process keeps working
  Tensor y = custom(name, {x})[0];
  mark_step();
  EXPECT_THAT(y.to_vector<float>(), ElementsAre(2, 2, 2));
}

TEST(CustomOpLookup, TheNameCallsTheNewestVersionRightAfterItIsRegistered) {
  const std::string name = "lookup_test.versions";
  register_custom_op(plus_version(name, 1));
  Tensor x = ones3();
  Tensor v1 = custom(name, {x})[0];
  register_custom_op(plus_version(name, 2));
  Tensor v2 = custom(name, {x})[0];
  Tensor pinned = custom({name, 1}, {x})[0];
  mark_step();
  EXPECT_THAT(v1.to_vector<float>(), ElementsAre(2, 2, 2));
  EXPECT_THAT(v2.to_vector<float>(), ElementsAre(3, 3, 3));
  EXPECT_THAT(pinned.to_vector<float>(), ElementsAre(2, 2, 2));
}

TEST(CustomOpLookup, MoreOpsThanTheCacheHoldsAllResolve) {
  // Eight ops called in turn, twice: every call finds its own op.
  std::vector<std::string> names;
  for (int i = 1; i <= 8; ++i) {
    names.push_back("lookup_test.many_" + std::to_string(i));
    register_custom_op(plus_version(names.back(), i));
  }
  Tensor x = ones3();
  std::vector<Tensor> out;
  for (int round = 0; round < 2; ++round)
    for (const std::string& n : names) out.push_back(custom(n, {x})[0]);
  mark_step();
  for (size_t k = 0; k < out.size(); ++k)
    EXPECT_EQ(out[k].to_vector<float>()[0], 1.0f + static_cast<float>(k % 8 + 1)) << k;
}

TEST(CustomOpLookup, AThreadSeesARegistrationAnotherThreadMadeAfterItsLastCall) {
  const std::string name = "lookup_test.threads";
  register_custom_op(plus_version(name, 1));
  std::promise<void> called, registered;
  std::vector<float> before, after;
  std::thread worker([&] {
    Tensor x = ones3();
    auto run = [&] {
      Tensor y = custom(name, {x})[0];
      mark_step();
      return y.to_vector<float>();
    };
    before = run(); // the worker's cache now holds version 1
    called.set_value();
    registered.get_future().wait();
    after = run();
  });
  called.get_future().wait();
  register_custom_op(plus_version(name, 3)); // on this thread
  registered.set_value();
  worker.join();
  EXPECT_THAT(before, ElementsAre(2, 2, 2));
  EXPECT_THAT(after, ElementsAre(4, 4, 4));
}

} // namespace
} // namespace mstep
