// An exported step replayed by LoadedGraph through one device graph
// (use_device_graph, mstep-run --device-graph), on async_host's model of
// CUDA Graphs: its static results come from one pool allocated before the
// recording (Backend::allocate_graph_pool, as Graph::capture_end does),
// whose size is metrics().device_graph_pool_bytes, and each replay gives
// what the same step gives lazily.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "mstep/mstep.h"
#include "mstep/runtime/LoadedGraph.h"
#include "test/unit/AsyncHostGraphs.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;

class LoadedDeviceGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_loaded_graph_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    previous_ = default_device();
    set_default_device(Device{DeviceType::async_host, 0});
  }
  void TearDown() override {
    testing::record_async_host_graphs(false);
    set_default_device(previous_);
    fs::remove_all(dir_);
  }
  std::string dir_;

 private:
  Device previous_;
};

TEST_F(LoadedDeviceGraph, ItsStaticResultsComeFromOnePoolSizedAtRecording) {
  // Captured and saved without device graphs (Graph's own pool stays out
  // of the metrics), then loaded and recorded with them.
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor a, b;
  {
    CaptureGuard capture(g);
    a = x + 4.0;
    b = x * 3.0;
  }
  ASSERT_FALSE(g.on_device_graph());
  const std::string path = dir_ + "/step.mstep";
  g.save(path, {{"x", x}, {"a", a}, {"b", b}});

  testing::record_async_host_graphs(true);
  reset_metrics();
  auto loaded = load_graph(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  LoadedGraph& graph = **loaded;
  EXPECT_EQ(metrics().device_graph_pool_bytes, 0);
  ASSERT_TRUE(graph.use_device_graph().ok());
  ASSERT_TRUE(graph.on_device_graph());
  // Two results of 3 floats (async_host allocates each in its pool: 24 bytes).
  EXPECT_EQ(metrics().device_graph_pool_bytes, 24);
  for (float v : {5.0f, -1.0f}) {
    const float in[3] = {v, v + 1, v + 2};
    ASSERT_TRUE(graph.write("x", in, sizeof in).ok());
    ASSERT_TRUE(graph.replay().ok());
    float got_a[3], got_b[3];
    ASSERT_TRUE(graph.read("a", got_a, sizeof got_a).ok());
    ASSERT_TRUE(graph.read("b", got_b, sizeof got_b).ok());
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(got_a[i], in[i] + 4.0f) << i;
      EXPECT_EQ(got_b[i], in[i] * 3.0f) << i;
    }
  }
}

}  // namespace
}  // namespace mstep
