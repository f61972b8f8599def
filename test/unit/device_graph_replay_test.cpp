// Graph::replay through one device graph (DeviceReplay.h), on async_host's
// model of CUDA Graphs: buffers stay where they were captured; a data
// input is copied into the graph's own buffer at the head of the graph,
// and when it moves that copy is patched to read the new buffer (counted:
// an update, and the task patched); a moved parameter's tasks are patched
// likewise, or the step is recorded again where addresses cannot tell the
// uses apart (device_graph_rerecords); outputs shared with a snapshot move
// first;
// a ReplayError launches nothing. (GraphReplayOnDevice runs the training
// step, dropout included, bitwise equal to lazy mode the same way.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/AsyncHostGraphs.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class DeviceGraphReplay : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = default_device();
    set_default_device(Device{DeviceType::async_host, 0});
    testing::record_async_host_graphs(true);
    reset_metrics();
  }
  void TearDown() override {
    testing::record_async_host_graphs(false);
    set_default_device(previous_);
  }

 private:
  Device previous_;
};

TEST_F(DeviceGraphReplay, AStaticInputFilledByCopyIsReadByThePatchedHeadCopy) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x * 2.0 + 1.0;
  }
  ASSERT_TRUE(g.on_device_graph());
  for (float v : {5.0f, 7.0f}) {
    // copy_() makes x share the new tensor's buffer: the copy at the head
    // of the graph now reads that one (one task patched, nothing recorded).
    x.copy_(from_vector(std::vector<float>{v, v + 1, v + 2}, {3}));
    g.replay();
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2 * v + 1, 2 * v + 3, 2 * v + 5}));
  }
  EXPECT_EQ(metrics().device_graph_launches, 2);
  EXPECT_EQ(metrics().device_graph_updates, 2);
  EXPECT_EQ(metrics().device_graph_node_patches, 2);
  EXPECT_EQ(metrics().device_graph_rerecords, 0);
}

TEST_F(DeviceGraphReplay, TheStaticResultsPoolSizeIsInTheMetricsAndTheTrace) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("mstep_graph_pool_trace_" + std::to_string(getpid()) + ".json");
  set_trace_file(path.string());
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor a, b;
  {
    CaptureGuard capture(g);
    a = x + 4.0;
    b = x * 3.0;
  }
  set_trace_file("");  // writes the file
  ASSERT_TRUE(g.on_device_graph());
  // Two results of 3 floats and x's static buffer: async_host allocates
  // each (the default), 36 bytes.
  EXPECT_EQ(metrics().device_graph_pool_bytes, 36);
  EXPECT_THAT(metrics_report(), HasSubstr("\ngraph_pool_bytes    36\n"));
  std::ifstream in(path);
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(trace, HasSubstr("record device graph (pool of 2 static results and 1 static "
                               "input, 36 bytes)"));
  std::filesystem::remove(path);
  g.replay();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{5, 6, 7}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{3, 6, 9}));
}

TEST_F(DeviceGraphReplay, WithoutADeviceGraphNoPoolIsReported) {
  testing::record_async_host_graphs(false);
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x - 1.0;
  }
  EXPECT_FALSE(g.on_device_graph());
  EXPECT_EQ(metrics().device_graph_pool_bytes, 0);
  EXPECT_THAT(metrics_report(), Not(HasSubstr("graph_pool_bytes")));
}

TEST_F(DeviceGraphReplay, AnInputWhoseCapturedBufferIsStillReadMovesTheGraph) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x * 2.0;
  }
  Tensor old = zeros({3});
  old.copy_(x);  // shares the captured buffer: it must keep {1, 2, 3}
  x.copy_(from_vector(std::vector<float>{4, 5, 6}, {3}));
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(metrics().device_graph_updates, 1);
  EXPECT_EQ(metrics().device_graph_node_patches, 1) << "the head copy of x, patched";
  EXPECT_EQ(metrics().device_graph_rerecords, 0);
  // The graph now reads x's new buffer: the next replay needs no update.
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(metrics().device_graph_updates, 1);
  EXPECT_EQ(metrics().device_graph_node_patches, 1);
  EXPECT_EQ(metrics().device_graph_launches, 2);
  // Patched again: from the buffer it was patched to.
  Tensor older = zeros({3});
  older.copy_(x);
  x.copy_(from_vector(std::vector<float>{7, 8, 9}, {3}));
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{14, 16, 18}));
  EXPECT_EQ(older.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(metrics().device_graph_node_patches, 2);
}

TEST_F(DeviceGraphReplay, AnInputMovedOntoAnotherInputsBufferIsPatchedAndToldApartLater) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor w = from_vector(std::vector<float>{2, 2, 2}, {3});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x * w;
  }
  Tensor old = zeros({3});
  old.copy_(x);  // keeps x's captured buffer read: x's head copy must move
  x.copy_(w);    // x now shares w's buffer: both head copies read it
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(metrics().device_graph_node_patches, 1);
  EXPECT_EQ(metrics().device_graph_rerecords, 0);
  // w moves on, x stays: patching that buffer's uses by address would move
  // x's head copy too, so the step is recorded again.
  w.copy_(from_vector(std::vector<float>{3, 3, 3}, {3}));
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, 6, 6}));
  EXPECT_EQ(metrics().device_graph_updates, 2);
  EXPECT_EQ(metrics().device_graph_rerecords, 1);
  EXPECT_EQ(old.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST_F(DeviceGraphReplay, AnInputMovedOntoAParametersBufferIsRecordedAgainNotPatched) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor w = from_vector(std::vector<float>{2, 2, 2}, {3});
  w.requires_grad_(true);  // a parameter: read where it is, no head copy
  NoGradGuard no_grad;
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x * w;
  }
  Tensor old = zeros({3});
  old.copy_(x);
  x.copy_(w);  // x now shares w's buffer, which the step reads as w
  g.replay();
  // Patching by address would move w's uses too; the step is recorded again.
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 4, 4}));
  EXPECT_EQ(metrics().device_graph_updates, 1);
  EXPECT_EQ(metrics().device_graph_rerecords, 1);
  EXPECT_EQ(metrics().device_graph_node_patches, 0);
}

TEST_F(DeviceGraphReplay, AParameterUpdatedInPlaceKeepsItsBufferAndASnapshotItsValue) {
  Tensor w = from_vector(std::vector<float>{1, 1}, {2});
  Graph g;
  {
    CaptureGuard capture(g);
    w.copy_(w * 3.0);  // the capture run: w = 3
  }
  const Buffer* buffer = w.impl()->buffer().get();
  g.replay();  // 9
  EXPECT_EQ(w.impl()->buffer().get(), buffer) << "written back in place";
  Tensor before = zeros({2});
  before.copy_(w);  // shares w's buffer
  g.replay();  // 27
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{27, 27}));
  EXPECT_EQ(before.to_vector<float>(), (std::vector<float>{9, 9}));
  EXPECT_EQ(metrics().device_graph_updates, 1);
  // The step reads w and the copy back writes it: both tasks patched.
  EXPECT_EQ(metrics().device_graph_node_patches, 2);
}

TEST_F(DeviceGraphReplay, AFreedInputIsAReplayErrorAndNothingIsLaunched) {
  auto x = std::make_unique<Tensor>(from_vector(std::vector<float>{1, 2}, {2}));
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = *x + 1.0;
  }
  x.reset();
  try {
    g.replay();
    FAIL() << "replayed over a freed input";
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::input_freed);
    EXPECT_THAT(e.what(), HasSubstr("was freed"));
  }
  EXPECT_EQ(metrics().device_graph_launches, 0);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST_F(DeviceGraphReplay, WithoutDeviceGraphsTheBackendReplaysExecutables) {
  testing::record_async_host_graphs(false);
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x + 1.0;
  }
  EXPECT_FALSE(g.on_device_graph());
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3}));
  EXPECT_EQ(metrics().device_graph_launches, 0);
}

}  // namespace
}  // namespace mstep
