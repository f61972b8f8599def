// Custom ops and the disk cache (lib/runtime/CustomOpNeeds.h): an entry
// with a custom op is reused by a process that registered the same op and
// version; a new version is another entry (recompiled); an entry whose op
// the loading process lacks is refused naming the op, and recompiled, its
// kernel never run.
#include <atomic>
#include <filesystem>
#include <string>
#include <vector>

#include "lib/runtime/CustomOpNeeds.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

constexpr Device kCpu{DeviceType::cpu, 0};
constexpr Device kRef{DeviceType::ref, 0};

std::atomic<int> kernel_runs{0};

/// `name` version `version`: y = x * 10 + version, counted in kernel_runs.
CustomOpDef scaled_def(const std::string& name, int64_t version) {
  auto kernel = host_kernel([version](const HostKernelCall& call) {
    ++kernel_runs;
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i)
      y[i] = x[i] * 10 + static_cast<float>(version);
    return absl::OkStatus();
  });
  return {.name = name,
          .version = version,
          .schema = {.inputs = {{"x"}}},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", kernel}, {"cpu", kernel}}};
}

/// A private disk cache for the test, and nothing cached in memory; the
/// warnings are collected.
class CustomOpDiskCache : public ::testing::TestWithParam<Device> {
protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("mstep_custom_op_disk_cache_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    saved_ = Tracer::get().options();
    Tracer::get().mutable_options().disk_cache = dir_ + ",false,64";
    Tracer::get().reset_disk_cache();
    Tracer::get().cache().clear();
    set_warning_handler([this](absl::string_view w) { warnings_.emplace_back(w); });
  }
  void TearDown() override {
    set_warning_handler(nullptr);
    Tracer::get().mutable_options() = saved_;
    Tracer::get().reset_disk_cache();
    Tracer::get().cache().clear();
    fs::remove_all(dir_);
  }
  /// Runs y = op(x) with x = [1, 2, 3], writes the entry to disk and forgets
  /// every compiled graph in memory, as a new process would start.
  std::vector<float> run(CustomOpRef op) {
    Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3}, DType::f32, GetParam());
    mark_step();
    Tensor y = custom(op, {x})[0];
    mark_step();
    Tracer::get().disk_cache()->flush();
    Tracer::get().cache().clear();
    return y.to_vector<float>();
  }

  std::string dir_;
  RuntimeOptions saved_;
  std::vector<std::string> warnings_;
};

TEST_P(CustomOpDiskCache, TheSameVersionIsReusedANewOneRecompiles) {
  const std::string name = std::string("disk_test.versions_") + (GetParam() == kRef ? "ref" : "cpu");
  register_custom_op(scaled_def(name, 1));
  reset_metrics();
  EXPECT_THAT(run(name), ElementsAre(11, 21, 31));
  EXPECT_EQ(metrics().compiles, 1);
  // Reused from disk: no compile, the kernel runs.
  reset_metrics();
  EXPECT_THAT(run(name), ElementsAre(11, 21, 31));
  EXPECT_EQ(metrics().compiles, 0);
  EXPECT_EQ(metrics().disk_hits, 1);
  // Version 2: another key, so another entry, compiled.
  register_custom_op(scaled_def(name, 2));
  reset_metrics();
  EXPECT_THAT(run(name), ElementsAre(12, 22, 32));
  EXPECT_EQ(metrics().compiles, 1);
  EXPECT_EQ(metrics().disk_hits, 0);
  // Version 1 by name still has its entry.
  reset_metrics();
  EXPECT_THAT(run({name, 1}), ElementsAre(11, 21, 31));
  EXPECT_EQ(metrics().compiles, 0);
  EXPECT_EQ(metrics().disk_hits, 1);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_P(CustomOpDiskCache, AnEntryWhoseOpIsNotRegisteredIsRecompiledNeverRun) {
  const std::string name = std::string("disk_test.gone_") + (GetParam() == kRef ? "ref" : "cpu");
  register_custom_op(scaled_def(name, 1));
  EXPECT_THAT(run(name), ElementsAre(11, 21, 31));

  // The same call again, but the op leaves the registry between the trace
  // and the step, as in a process that never registered it: the entry's
  // key matches, its list of custom ops does not.
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3}, DType::f32, GetParam());
  mark_step();
  Tensor y = custom(name, {x})[0];
  CustomOpRegistry::global().remove_for_testing(name);
  reset_metrics();
  const int runs = kernel_runs;
  const std::string error = error_of([] { mark_step(); });
  EXPECT_EQ(kernel_runs, runs); // the entry never ran
  EXPECT_EQ(metrics().disk_hits, 0);
  EXPECT_EQ(metrics().disk_misses, 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_THAT(warnings_[0], HasSubstr("is not used: it needs custom op '" + name +
                                      "' version 1, which this process has not registered"));
  EXPECT_THAT(warnings_[0], HasSubstr("recompiling it"));
  // Compiling it again fails too: the node's op is unknown.
  EXPECT_THAT(error, HasSubstr("no custom op with id"));

  // Registered again (equal definition), the entry is reused.
  register_custom_op(scaled_def(name, 1));
  Tracer::get().cache().clear();
  reset_metrics();
  EXPECT_THAT(run(name), ElementsAre(11, 21, 31));
  EXPECT_EQ(metrics().disk_hits, 1);
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, CustomOpDiskCache, ::testing::Values(kRef, kCpu),
                         [](const auto& info) {
                           return info.param.type == DeviceType::ref ? "ref" : "cpu";
                         });

TEST(CustomOpNeeds, TheListRoundTripsAndAMalformedOneIsDataLoss) {
  EXPECT_EQ(*check_custom_op_needs(with_custom_op_needs(TraceGraph{}, "payload")), "payload");
  EXPECT_EQ(check_custom_op_needs("payload").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(check_custom_op_needs("custom-ops 1\n1 99 x\npayload").status().code(),
            absl::StatusCode::kDataLoss);
  // A listed op this process lacks, by name or by version.
  absl::StatusOr<absl::string_view> missing =
      check_custom_op_needs("custom-ops 1\n3 12 disk_test.no\npayload");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(missing.status().message(), HasSubstr("custom op 'disk_test.no' version 3"));
}

} // namespace
} // namespace mstep
