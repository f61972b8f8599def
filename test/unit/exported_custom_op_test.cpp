// Exported graphs that call custom ops (Graph::save, load_graph): the file
// lists the ops (name, version); a process that has them replays it
// bitwise; one that lacks an op or has another version is refused at load
// naming the op, the versions and the plugin to load, and the op's kernel
// never runs; a file of format version 1 (no list) still loads. The
// cross-process test with mstep-run --plugin is test/export
// (exported_custom_op_round_trip_*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "lib/runtime/GraphArchive.h"
#include "mstep/core/ByteStream.h"
#include "mstep/mstep.h"
#include "mstep/runtime/LoadedGraph.h"
#include "test/unit/TestUtil.h"
#include "test/unit/TestFiles.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::filled;

constexpr char kOp[] = "export_test.affine";
std::atomic<int> kernel_runs{0};

/// kOp version `version`: y = x * 2 + version, counted in kernel_runs.
CustomOpDef affine_def(int64_t version) {
  auto kernel = host_kernel([version](const HostKernelCall& call) {
    ++kernel_runs;
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.input_types[0].shape.numel(); ++i)
      y[i] = x[i] * 2 + static_cast<float>(version);
    return absl::OkStatus();
  });
  return {.name = kOp,
          .version = version,
          .schema = {.inputs = {{"x", {DType::f32}}}},
          .shape_rule = same_type_as_input(),
          .kernels = {{"ref", kernel}, {"cpu", kernel}}};
}

using mstep::testing::read_file;
using mstep::testing::write_private_file;


/// A step y = affine(x) + 1 captured on the parameter's device and saved
/// with names x, y.
class ExportedCustomOp : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    CustomOpRegistry::global().remove_for_testing(kOp);
    register_custom_op(affine_def(1));
    std::string templ = (fs::temp_directory_path() / "mstep_export_custom_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    path_ = dir_ + "/step.mstep";
    set_default_device(Device{GetParam(), 0});
    x_ = filled({2, 3}, 1);
    {
      CaptureGuard capture(graph_);
      y_ = custom(kOp, {x_})[0] + 1.0;
      mark_step();
    }
    graph_.save(path_, {{"x", x_}, {"y", y_}});
  }
  void TearDown() override {
    CustomOpRegistry::global().remove_for_testing(kOp);
    register_custom_op(affine_def(1));
    set_default_device(Device{DeviceType::ref, 0});
    fs::remove_all(dir_);
  }

  std::string dir_, path_;
  Tensor x_, y_;
  Graph graph_;
};

TEST_P(ExportedCustomOp, ListsItsCustomOpsAndReplaysLikeTheGraph) {
  auto loaded = load_graph(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedGraph& g = **loaded;
  EXPECT_THAT(g.custom_ops(), ElementsAre(CustomOpNeed{kOp, 1}));
  const std::vector<float> x = filled({2, 3}, 5).to_vector<float>();
  ASSERT_TRUE(g.write("x", x.data(), x.size() * sizeof(float)).ok());
  ASSERT_TRUE(g.replay().ok());
  std::vector<float> y(6);
  ASSERT_TRUE(g.read("y", y.data(), y.size() * sizeof(float)).ok());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], x[i] * 2 + 1 + 1) << i;
}

TEST_P(ExportedCustomOp, RefusesItWhereTheOpIsNotRegisteredAndRunsNothing) {
  CustomOpRegistry::global().remove_for_testing(kOp);
  const int runs = kernel_runs;
  auto loaded = load_graph(path_);
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(loaded.status().message());
  EXPECT_THAT(message, HasSubstr(path_ + " needs custom op 'export_test.affine' version 1, "
                                         "which this process has not registered"));
  EXPECT_THAT(message, HasSubstr("load the plugin that registers it"));
  EXPECT_THAT(message, HasSubstr("mstep-run --plugin"));
  EXPECT_EQ(kernel_runs, runs);
}

TEST_P(ExportedCustomOp, RefusesAnotherVersionNamingBoth) {
  CustomOpRegistry::global().remove_for_testing(kOp);
  register_custom_op(affine_def(2));
  auto loaded = load_graph(path_);
  ASSERT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("needs custom op 'export_test.affine' version 1, which this process has "
                        "not registered (it has 'export_test.affine' version 2)"));
}

/// The same file in format version 1: no custom-op list (nor version 3's
/// world size) after the backend.
std::string as_version_1(const std::string& file) {
  auto archive = decode_graph_archive(file, "file");
  EXPECT_TRUE(archive.ok()) << archive.status();
  archive->custom_ops.clear();
  const std::string current = encode_graph_archive(*archive);
  auto body = unseal(current, "MSTEPXGR", kGraphArchiveVersion, "current");
  EXPECT_TRUE(body.ok()) << body.status();
  std::string v1_body(*body);
  const size_t list = 8 + archive->backend.size();  // after the backend's length and bytes
  // An empty list, then world size 0 (no collectives).
  EXPECT_EQ(v1_body.substr(list, 8), std::string(8, '\0'));
  v1_body.erase(list, 8);
  return seal("MSTEPXGR", 1, v1_body);
}

TEST_P(ExportedCustomOp, AVersion1FileWithoutTheListStillLoads) {
  write_private_file(path_, as_version_1(read_file(path_)));
  auto loaded = load_graph(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE((*loaded)->custom_ops().empty());
  ASSERT_TRUE((*loaded)->replay().ok());
  // Without the op, its executable does not load (no kernel): still never run.
  CustomOpRegistry::global().remove_for_testing(kOp);
  const int runs = kernel_runs;
  EXPECT_FALSE(load_graph(path_).ok());
  EXPECT_EQ(kernel_runs, runs);
}

TEST_P(ExportedCustomOp, RefusesAMalformedList) {
  auto archive = decode_graph_archive(read_file(path_), path_);
  ASSERT_TRUE(archive.ok()) << archive.status();
  archive->custom_ops[0].version = 0;
  write_private_file(path_, encode_graph_archive(*archive));
  auto loaded = load_graph(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(loaded.status().message()),
              HasSubstr("custom op 0 is 'export_test.affine' version 0"));
}

INSTANTIATE_TEST_SUITE_P(HostBackends, ExportedCustomOp,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) { return std::string(device_type_name(info.param)); });

}  // namespace
}  // namespace mstep
