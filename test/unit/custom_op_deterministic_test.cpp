// CustomOpSchema::deterministic = false is what a NaN-guard reproducer
// reports: a step that calls such an op may not fail the same way when the
// reproducer re-runs it, so Reproducer::nondeterministic_custom_ops() names
// the ops; a step with deterministic ops only names none.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

absl::Status plus_one(const HostKernelCall& call) {
  const auto* x = static_cast<const float*>(call.inputs[0]);
  auto* y = static_cast<float*>(call.outputs[0]);
  for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i) y[i] = x[i] + 1;
  return absl::OkStatus();
}

/// x + 1, registered as deterministic or not.
std::string plus_one_op(bool deterministic) {
  const std::string name = deterministic ? "nd_test.plus_one" : "nd_test.plus_one_racy";
  if (!CustomOpRegistry::global().find(name).ok())
    register_custom_op({.name = name,
                        .schema = {.inputs = {{"x", {DType::f32}}},
                                   .deterministic = deterministic},
                        .shape_rule = same_type_as_input(),
                        .kernels = {{"ref", host_kernel(plus_one)}, {"cpu", host_kernel(plus_one)}}});
  return name;
}

class CustomOpDeterministic : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("mstep_custom_nd_" + std::to_string(::getpid()) + "_" +
             std::to_string(GetParam()));
    fs::remove_all(root_);
  }
  void TearDown() override {
    enable_nan_guard("");
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  fs::path root_;
};

TEST_P(CustomOpDeterministic, TheReproducerNamesTheNondeterministicOps) {
  const bool deterministic = GetParam();
  enable_nan_guard(root_.string());
  Tensor w = from_vector(std::vector<float>{1, 2, 3, 4}, {4}, DType::f32).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  // A NaN in the (constant) input makes w's gradient non-finite.
  Tensor x = from_vector(
      std::vector<float>{1, std::numeric_limits<float>::quiet_NaN(), 0, 2}, {4}, DType::f32);
  Tensor loss = sum(w * custom(plus_one_op(deterministic), {x})[0]);
  loss.backward();
  std::string dir;
  try {
    opt.step();
    ADD_FAILURE() << "the guard did not stop the step";
  } catch (const NanGuardError& e) {
    dir = e.reproducer_dir();
  }
  ASSERT_FALSE(dir.empty());
  Reproducer r = load_reproducer(dir);
  if (deterministic)
    EXPECT_THAT(r.nondeterministic_custom_ops(), IsEmpty());
  else
    EXPECT_THAT(r.nondeterministic_custom_ops(), ElementsAre("nd_test.plus_one_racy"));
}

INSTANTIATE_TEST_SUITE_P(DeterministicOrNot, CustomOpDeterministic, ::testing::Bool());

} // namespace
} // namespace mstep
