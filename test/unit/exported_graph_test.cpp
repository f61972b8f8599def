// Exported graphs in one process: Graph::save then load_graph (the runtime
// alone) replays bitwise like Graph::replay, on ref and cpu; a file that is
// not a good export for this runtime is refused with an error naming the
// file and the problem, and nothing runs. The cross-process round trip with
// mstep-run is test/export (exported_graph_round_trip_*).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lib/runtime/GraphArchive.h"
#include "mstep/mstep.h"
#include "mstep/runtime/LoadedGraph.h"
#include "test/unit/TestUtil.h"
#include "test/unit/TestFiles.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::filled;

using mstep::testing::read_file;
using mstep::testing::write_private_file;


/// A small training step (linear layer, MSE, SGD with momentum, dropout)
/// captured on `device` and saved with names w, x, t, loss.
class ExportedGraph : public ::testing::TestWithParam<DeviceType> {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_export_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    path_ = dir_ + "/step.mstep";
    set_default_device(Device{GetParam(), 0});
    manual_seed(3);
    w_ = filled({4, 3}, 1).requires_grad_();
    x_ = filled({5, 4}, 2);
    t_ = filled({5, 3}, 3);
    opt_ = std::make_unique<optim::SGD>(std::vector<Tensor>{w_},
                                        optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    for (int i = 0; i < 2; ++i) step();
    {
      CaptureGuard capture(graph_);
      step();
    }
    graph_.save(path_, {{"w", w_}, {"x", x_}, {"t", t_}, {"loss", loss_}});
  }
  void TearDown() override {
    set_default_device(Device{DeviceType::ref, 0});
    fs::remove_all(dir_);
  }

  void step() {
    opt_->zero_grad();
    loss_ = mse_loss(dropout(matmul(x_, w_), 0.25, true), t_);
    loss_.backward();
    opt_->step();
    mark_step();
  }

  /// load_graph's error for `bytes` written as the exported file.
  std::string load_error(const std::string& bytes) {
    write_private_file(path_, bytes);
    auto loaded = load_graph(path_);
    EXPECT_FALSE(loaded.ok());
    return loaded.ok() ? "" : std::string(loaded.status().message());
  }

  std::string dir_, path_;
  Tensor w_, x_, t_, loss_;
  std::unique_ptr<optim::SGD> opt_;
  Graph graph_;
};

TEST_P(ExportedGraph, ReplaysBitwiseLikeTheCapturedGraph) {
  auto loaded = load_graph(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedGraph& g = **loaded;
  EXPECT_EQ(g.backend(), device_type_name(GetParam()));
  EXPECT_EQ(g.num_segments(), graph_.num_segments());
  for (int i = 0; i < 3; ++i) {
    // New data each step, the same into both.
    std::vector<float> x = filled({5, 4}, 10 + i).to_vector<float>();
    x_.copy_(from_vector(x, {5, 4}));
    ASSERT_TRUE(g.write("x", x.data(), x.size() * sizeof(float)).ok());
    graph_.replay();
    ASSERT_TRUE(g.replay().ok());
    float loss = 0;
    ASSERT_TRUE(g.read("loss", &loss, sizeof loss).ok());
    EXPECT_EQ(loss, loss_.to_vector<float>()[0]) << "step " << i;
  }
  std::vector<float> w(12);
  ASSERT_TRUE(g.read("w", w.data(), w.size() * sizeof(float)).ok());
  EXPECT_EQ(w, w_.to_vector<float>());
}

TEST_P(ExportedGraph, NamesItsSlotsAndRefusesWrongAccess) {
  auto loaded = load_graph(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedGraph& g = **loaded;
  const LoadedGraph::SlotInfo& w = g.slots()[*g.find("w")];
  EXPECT_EQ(w.role, InputRole::parameter);
  EXPECT_TRUE(w.read && w.written);
  const LoadedGraph::SlotInfo& loss = g.slots()[*g.find("loss")];
  EXPECT_TRUE(loss.written && !loss.read);
  EXPECT_THAT(std::string(g.find("nope").status().message()),
              HasSubstr("has no tensor named 'nope'"));
  float one = 0;
  absl::Status wrong = g.write("x", &one, sizeof one);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(wrong.message()), HasSubstr("f32[5, 4] holds 80"));
}

TEST_P(ExportedGraph, RefusesTruncatedCorruptAndForeignFiles) {
  const std::string good = read_file(path_);
  ASSERT_GT(good.size(), 64u);
  for (size_t n : {size_t{0}, size_t{7}, size_t{20}, good.size() / 2, good.size() - 1})
    EXPECT_THAT(load_error(good.substr(0, n)), HasSubstr(path_)) << "truncated to " << n;
  EXPECT_THAT(load_error(good.substr(0, good.size() / 2)), HasSubstr("truncated"));

  std::string corrupt = good;
  corrupt[good.size() / 2] ^= 0x40;
  EXPECT_THAT(load_error(corrupt), HasSubstr("checksum"));

  std::string other_version = good;
  other_version[8] += 1;  // the u32 version after the 8-byte magic
  EXPECT_THAT(load_error(other_version), HasSubstr("version"));

  EXPECT_THAT(load_error("PK\x03\x04 a zip file"), HasSubstr("not an exported mstep graph"));

  auto archive = decode_graph_archive(good, path_);
  ASSERT_TRUE(archive.ok()) << archive.status();
  archive->backend = "tpu";
  const std::string foreign = load_error(encode_graph_archive(*archive));
  EXPECT_THAT(foreign, HasSubstr("exported for backend 'tpu'"));
  EXPECT_THAT(foreign, HasSubstr("ref, cpu"));

  auto bad_index = decode_graph_archive(good, path_);
  bad_index->segments.back().outputs.front().slot = 999;
  EXPECT_THAT(load_error(encode_graph_archive(*bad_index)), HasSubstr("does not exist"));
}

TEST_P(ExportedGraph, RefusesAFileOthersCanWrite) {
  ASSERT_EQ(::chmod(path_.c_str(), 0666), 0);
  auto loaded = load_graph(path_);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(path_));
}

// use_device_graph() where the backend records no device graphs: an
// error saying so, and replay() keeps running the executables one by one.
// (Its recording is checked on a GPU: scripts/gpu_check.sh replays the
// training steps with mstep-run --device-graph against ref.)
TEST_P(ExportedGraph, ADeviceGraphNeedsABackendThatRecordsOne) {
  auto loaded = load_graph(path_);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedGraph& g = **loaded;
  const absl::Status recorded = g.use_device_graph();
  EXPECT_EQ(recorded.code(), absl::StatusCode::kUnimplemented) << recorded;
  EXPECT_THAT(std::string(recorded.message()), HasSubstr("records no device graphs"));
  EXPECT_FALSE(g.on_device_graph());
  ASSERT_TRUE(g.replay().ok());
  graph_.replay();
  float loss = 0;
  ASSERT_TRUE(g.read("loss", &loss, sizeof loss).ok());
  EXPECT_EQ(loss, loss_.to_vector<float>()[0]);
}

INSTANTIATE_TEST_SUITE_P(Backends, ExportedGraph,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu),
                         [](const auto& info) { return std::string(device_type_name(info.param)); });

TEST(GraphSave, BeforeCaptureIsAnError) {
  Graph g;
  EXPECT_THAT(testing::error_of([&] { g.save("/tmp/never.mstep", {}); }),
              HasSubstr("nothing captured"));
}

}  // namespace
}  // namespace mstep
