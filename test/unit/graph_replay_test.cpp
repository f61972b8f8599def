// mstep::Graph: capture once, replay many times, equal to lazy mode.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/AsyncHostGraphs.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

/// A two-layer model with dropout, trained with Adam: parameters, state,
/// RNG, and two mark_step() segments per step, as in the Gaudi example.
struct Model {
  explicit Model(uint64_t seed) {
    manual_seed(seed);
    fc1 = std::make_shared<nn::Linear>(8, 16);
    fc2 = std::make_shared<nn::Linear>(16, 3);
    std::vector<Tensor> params = fc1->parameters();
    for (const Tensor& p : fc2->parameters()) params.push_back(p);
    opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 0.01});
  }
  Tensor step(const Tensor& x, const Tensor& y) {
    opt->zero_grad();
    Tensor loss = cross_entropy((*fc2)(dropout(relu((*fc1)(x)), 0.3)), y);
    loss.backward();
    mark_step();
    opt->step();
    mark_step();
    return loss;
  }
  std::vector<std::vector<float>> weights() const {
    std::vector<std::vector<float>> w;
    for (const Tensor& p : opt->parameters()) w.push_back(p.to_vector<float>());
    return w;
  }
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::unique_ptr<optim::Adam> opt;
};

std::pair<Tensor, Tensor> batch(int i) {
  std::mt19937 rng(100 + i);
  std::normal_distribution<float> n;
  std::vector<float> x(4 * 8);
  for (float& v : x) v = n(rng);
  std::vector<int64_t> y = {i % 3, (i + 1) % 3, (i + 2) % 3, i % 2};
  return {from_vector(x, {4, 8}), from_vector(y, {4})};
}

class GraphReplayTest : public ::testing::Test {
 protected:
  void SetUp() override { reset_metrics(); }
};

TEST_F(GraphReplayTest, DropoutDrawsFreshNumbersOnEachReplay) {
  manual_seed(3);
  Tensor x = ones({64});
  Tensor out;
  Graph g;
  {
    CaptureGuard capture(g);
    out = dropout(x, 0.5);
  }
  std::vector<float> first = out.to_vector<float>();
  g.replay();
  std::vector<float> second = out.to_vector<float>();
  g.replay();
  std::vector<float> third = out.to_vector<float>();
  EXPECT_NE(first, second);
  EXPECT_NE(second, third);
  // The same seed reproduces the sequence lazily.
  manual_seed(3);
  std::vector<std::vector<float>> lazy;
  for (int i = 0; i < 3; ++i) {
    Tensor o = dropout(x, 0.5);
    mark_step();
    lazy.push_back(o.to_vector<float>());
  }
  EXPECT_EQ(lazy[0], first);
  EXPECT_EQ(lazy[1], second);
  EXPECT_EQ(lazy[2], third);
}

TEST_F(GraphReplayTest, StaticOutputsAndChainedSegments) {
  Tensor a = from_vector(std::vector<float>{1, 2, 3}, {3});
  Tensor acc = zeros({3});
  acc.copy_(acc + 0.0);
  mark_step();
  Graph g;
  Tensor doubled;
  g.capture_begin();
  doubled = a * 2.0;
  mark_step();  // segment 0
  acc.copy_(acc + doubled);
  g.capture_end();  // segment 1 reads segment 0's result
  ASSERT_EQ(g.num_segments(), 2u);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  a.copy_(from_vector(std::vector<float>{10, 20, 30}, {3}));
  g.replay();
  EXPECT_EQ(doubled.to_vector<float>(), (std::vector<float>{20, 40, 60}));
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{22, 44, 66}));
  g.replay();
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{42, 84, 126}));
}

TEST_F(GraphReplayTest, ASyncPointInsideTheCaptureKeepsReadingTheOldValue) {
  // y reads w before its update; a sync point runs the update first (its
  // own segment), so the next segment computes y from the buffer w had.
  Tensor w = from_vector(std::vector<float>{1, 2}, {2});
  w.copy_(w + 0.0);
  mark_step();
  Graph g;
  Tensor y;
  g.capture_begin();
  y = w + 100.0;
  w.copy_(w * 2.0);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{2, 4}));  // sync: segment 0
  g.capture_end();                                                // y: segment 1
  ASSERT_EQ(g.num_segments(), 2u);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{101, 102}));
  g.replay();
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{4, 8}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{102, 104})) << "y uses w before this update";
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{104, 108}));
}

TEST_F(GraphReplayTest, PendingStaticInputIsMaterializedFirst) {
  Tensor x = zeros({2});
  x.copy_(x + 0.0);
  mark_step();
  Graph g;
  Tensor y;
  g.capture_begin();
  y = x + 1.0;
  g.capture_end();
  x.copy_(from_vector(std::vector<float>{1, 2}, {2}) * 3.0);  // lazy
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{4, 7}));
}

TEST_F(GraphReplayTest, ErrorsAreTypedAndChangeNothing) {
  Graph g;
  try {
    g.replay();
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::not_captured);
  }
  auto x = std::make_unique<Tensor>(from_vector(std::vector<float>{1, 2}, {2}));
  Tensor y;
  g.capture_begin();
  {
    Graph inner;
    try {
      inner.capture_begin();
      FAIL();
    } catch (const ReplayError& e) {
      EXPECT_EQ(e.kind(), ReplayError::Kind::capture_active);
    }
  }
  y = *x * 5.0;
  g.capture_end();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 10}));
  x.reset();  // the static input is gone
  try {
    g.replay();
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::input_freed);
    EXPECT_THAT(e.what(), HasSubstr("f32[2]"));
    EXPECT_THAT(e.what(), HasSubstr("freed"));
  }
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 10})) << "nothing ran";
  EXPECT_EQ(metrics().replays, 0);
}

TEST_F(GraphReplayTest, ReplayInsideACaptureIsATypedErrorAndTheCaptureGoesOn) {
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor y, z;
  Graph g, other;
  {
    CaptureGuard capture(g);
    y = x * 5.0;
  }
  other.capture_begin();
  try {
    g.replay();
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::capture_active);
    EXPECT_THAT(e.what(), HasSubstr("inside a capture"));
    EXPECT_THAT(e.what(), HasSubstr("End the capture first"));
  }
  EXPECT_EQ(metrics().replays, 0);
  z = x + 1.0;
  other.capture_end();
  g.replay();
  other.replay();
  EXPECT_EQ(metrics().replays, 2);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 10}));
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST_F(GraphReplayTest, ATensorMovedToAnotherDeviceAfterCaptureIsADeviceMismatch) {
  // Captured on the default device (MSTEP_DEVICE), moved to another one.
  const Device home = default_device();
  const Device other{home.type == DeviceType::cpu ? DeviceType::ref : DeviceType::cpu, 0};
  Model m(9);
  for (int i = 0; i < 2; ++i) {
    auto [x, y] = batch(i);
    m.step(x, y);
  }
  auto [x, y] = batch(2);
  Tensor static_x = x, static_y = y, loss;
  Graph g;
  {
    CaptureGuard capture(g);
    loss = m.step(static_x, static_y);
  }
  const std::vector<std::vector<float>> captured = m.weights();
  m.fc1->to(other);
  try {
    g.replay();
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::device_mismatch);
    EXPECT_THAT(e.what(), HasSubstr("(parameter, captured as f32[16, 8] on " + home.to_string() + ")"));
    EXPECT_THAT(e.what(), HasSubstr("now lives on " + other.to_string()));
    EXPECT_THAT(e.what(), HasSubstr("Capture a new graph after the move, or move the tensor back to " +
                                    home.to_string()));
  }
  EXPECT_EQ(metrics().replays, 0) << "nothing ran";
  EXPECT_EQ(m.weights(), captured) << "nothing changed";
  // Moved back, the graph replays as captured.
  m.fc1->to(home);
  g.replay();
  EXPECT_EQ(metrics().replays, 1);
  EXPECT_NE(m.weights(), captured);
}

TEST_F(GraphReplayTest, CaptureGuardAbortsOnException) {
  Graph g;
  Tensor x = ones({2});
  try {
    CaptureGuard capture(g);
    Tensor y = x + 1.0;
    throw std::runtime_error("user error");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(g.captured());
  EXPECT_FALSE(is_capturing());
  Graph other;  // a new capture can start
  other.capture_begin();
  Tensor z = x * 2.0;
  other.capture_end();
  EXPECT_TRUE(other.captured());
}

TEST_F(GraphReplayTest, EmptyCaptureIsAnError) {
  Graph g;
  g.capture_begin();
  EXPECT_THROW(g.capture_end(), ReplayError);
  EXPECT_FALSE(is_capturing());
}

TEST_F(GraphReplayTest, DynamicOpRunsEagerlyBetweenTwoGraphs) {
  // graph | dynamic op | graph, as in the HPU Graphs documentation.
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  Tensor count = zeros({1});
  count.copy_(count + 0.0);
  mark_step();
  Graph first, second;
  Tensor y, out;
  first.capture_begin();
  y = x * 2.0;
  EXPECT_THROW(nonzero(y), Error) << "a data-dependent shape cannot be captured";
  first.capture_end();
  second.capture_begin();
  out = count * 10.0;
  second.capture_end();
  for (float scale : {1.0f, 3.0f}) {
    x.copy_(from_vector(std::vector<float>{1 * scale, 2 * scale, 3 * scale, 4 * scale}, {4}));
    first.replay();
    Tensor hits = nonzero(gt(y, 3.0));  // eager, between the graphs
    count.copy_(from_vector(std::vector<float>{static_cast<float>(hits.shape()[0])}, {1}));
    second.replay();
    const float expected = scale == 1.0f ? 30.0f : 40.0f;  // 2 of {2,4,6,8} vs 4 of {6,..,24}
    EXPECT_EQ(out.to_vector<float>(), std::vector<float>{expected});
  }
}

TEST_F(GraphReplayTest, ChromeTraceShowsTraceCompileExecuteAndReplay) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("mstep_replay_trace_" + std::to_string(getpid()) + ".json");
  set_trace_file(path.string());
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  Tensor y = x * 7.0 + 1.0;  // a structure no other test compiles first
  mark_step();
  Graph g;
  g.capture_begin();
  Tensor z = x * 3.0 - 1.0;
  g.capture_end();
  g.replay();
  set_trace_file("");  // writes the file and stops recording
  std::ofstream(path.string() + ".py")
      << "import json,sys\n"
         "ev=json.load(open(sys.argv[1]))['traceEvents']\n"
         "names={e['name'] for e in ev}\n"
         "assert {'trace','compile','execute','replay'} <= names, names\n"
         "assert all(e['dur']>=0 for e in ev)\n";
  const std::string cmd = "/usr/bin/python3 " + path.string() + ".py " + path.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".py");
}

/// Where a replay runs: a backend, and whether replay launches one device
/// graph there (async_host's model of CUDA Graphs) or runs executables.
struct ReplayTarget {
  DeviceType device;
  bool device_graph = false;
};

/// The same checks on every host backend: the interpreter (ref) and the
/// compiled cpu backend update in place and reuse buffers differently, and
/// a device graph keeps every buffer where it was captured.
class GraphReplayOnDevice : public ::testing::TestWithParam<ReplayTarget> {
 protected:
  void SetUp() override {
    previous_ = default_device();
    set_default_device(Device{GetParam().device, 0});
    if (GetParam().device_graph) testing::record_async_host_graphs(true);
    reset_metrics();
  }
  void TearDown() override {
    if (GetParam().device_graph) testing::record_async_host_graphs(false);
    set_default_device(previous_);
  }

 private:
  Device previous_;
};

const Buffer* buffer_of(const Tensor& t) { return t.impl()->buffer().get(); }

/// Every parameter and optimizer-state tensor of the model, in a fixed order.
std::vector<Tensor> training_state(const Model& m) {
  std::vector<Tensor> state = m.opt->parameters();
  for (size_t i = 0; i < m.opt->parameters().size(); ++i)
    for (const char* name : {"step", "exp_avg", "exp_avg_sq"}) state.push_back(m.opt->state(i, name));
  return state;
}

TEST_P(GraphReplayOnDevice, EqualsLazyModeAndUpdatesTheStateInPlace) {
  constexpr int kSteps = 6;
  Model lazy(11);
  std::vector<float> lazy_losses;
  for (int i = 0; i < kSteps; ++i) {
    auto [x, y] = batch(i);
    lazy_losses.push_back(static_cast<float>(lazy.step(x, y).item()));
  }
  const std::vector<std::vector<float>> lazy_weights = lazy.weights();
  auto [x9, y9] = batch(9);
  const auto lazy_next = static_cast<float>(lazy.step(x9, y9).item());

  Model replayed(11);
  std::vector<float> losses;
  auto [x0, y0] = batch(0);
  losses.push_back(static_cast<float>(replayed.step(x0, y0).item()));  // warmup: creates the state
  Tensor static_x = zeros({4, 8});
  Tensor static_y = zeros({4}, DType::i64);
  auto [x1, y1] = batch(1);
  static_x.copy_(x1);
  static_y.copy_(y1);
  Graph g;
  Tensor static_loss;
  {
    CaptureGuard capture(g);
    static_loss = replayed.step(static_x, static_y);
  }
  EXPECT_EQ(g.num_segments(), 2u);
  EXPECT_GT(g.num_kernels(), 2u);
  EXPECT_EQ(g.on_device_graph(), GetParam().device_graph);
  losses.push_back(static_cast<float>(static_loss.item()));
  const Metrics before = metrics();
  std::vector<const Buffer*> state_buffers, loss_buffers;
  for (int i = 2; i < kSteps; ++i) {
    auto [x, y] = batch(i);
    static_x.copy_(x);
    static_y.copy_(y);
    g.replay();
    if (i == 2)
      for (const Tensor& t : training_state(replayed)) state_buffers.push_back(buffer_of(t));
    loss_buffers.push_back(buffer_of(static_loss));
    losses.push_back(static_cast<float>(static_loss.item()));
  }
  const Metrics after = metrics();
  EXPECT_EQ(after.replays - before.replays, kSteps - 2);
  EXPECT_EQ(after.cache_hits, before.cache_hits) << "replay does no cache lookup";
  EXPECT_EQ(after.cache_misses, before.cache_misses);
  EXPECT_EQ(after.graphs_executed, before.graphs_executed) << "replay does not trace";
  EXPECT_EQ(after.replay_time.count - before.replay_time.count, kSteps - 2);
  EXPECT_EQ(after.device_graph_launches - before.device_graph_launches,
            GetParam().device_graph ? kSteps - 2 : 0);
  // Each replay's batch is in new buffers (copy_() shares x's): the device
  // graph's head copies of static_x and static_y are patched to read them,
  // and the step is never recorded again.
  EXPECT_EQ(after.device_graph_node_patches - before.device_graph_node_patches,
            GetParam().device_graph ? 2 * (kSteps - 2) : 0);
  EXPECT_EQ(after.device_graph_rerecords, before.device_graph_rerecords);
  // Bitwise equal: the same executables on the same inputs and RNG offsets.
  EXPECT_EQ(losses, lazy_losses);
  EXPECT_EQ(replayed.weights(), lazy_weights);
  // Replays after the first write parameters, optimizer state and the
  // static loss into the buffers they already hold.
  std::vector<const Buffer*> now;
  for (const Tensor& t : training_state(replayed)) now.push_back(buffer_of(t));
  EXPECT_EQ(now, state_buffers);
  EXPECT_THAT(loss_buffers, ::testing::Each(loss_buffers.front()));
  // A lazy step after the replays continues the same RNG stream.
  EXPECT_EQ(static_cast<float>(replayed.step(x9, y9).item()), lazy_next);
}

TEST_P(GraphReplayOnDevice, AStaticOutputAnotherTensorSharesKeepsItsValue) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, {3});
  Graph g;
  Tensor y;
  {
    CaptureGuard capture(g);
    y = x * 2.0;
  }
  g.replay();  // y's buffer now has no other owner: the next replay rewrites it
  Tensor kept = zeros({3});
  kept.copy_(y);  // shares y's buffer (no copy)
  x.copy_(from_vector(std::vector<float>{5, 6, 7}, {3}));
  g.replay();
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{10, 12, 14}));
  EXPECT_EQ(kept.to_vector<float>(), (std::vector<float>{2, 4, 6})) << "not overwritten";
  EXPECT_NE(buffer_of(kept), buffer_of(y));
}

TEST_P(GraphReplayOnDevice, AReplayThatFailsInAKernelKeepsParametersAndState) {
  Model m(5);
  auto [x0, y0] = batch(0);
  m.step(x0, y0);
  Tensor static_x = zeros({4, 8});
  Tensor static_y = zeros({4}, DType::i64);
  static_x.copy_(x0);
  static_y.copy_(y0);
  Graph g;
  Tensor static_loss;
  {
    CaptureGuard capture(g);
    static_loss = m.step(static_x, static_y);
  }
  g.replay();
  const std::vector<std::vector<float>> weights = m.weights();
  std::vector<std::vector<float>> state;
  for (const Tensor& t : training_state(m)) state.push_back(t.to(DType::f32).to_vector<float>());
  // Class 7 of 3: the loss kernel rejects the batch before the optimizer runs.
  static_y.copy_(from_vector(std::vector<int64_t>{0, 7, 1, 2}, {4}));
  // A synchronous backend fails in replay(); an asynchronous one at the
  // first read of what the failed work wrote (Backend.h's protocol).
  const bool asynchronous = GetParam().device == DeviceType::async_host;
  try {
    g.replay();
    if (asynchronous) static_cast<void>(static_loss.item());
    FAIL() << "an out-of-range class was accepted";
  } catch (const Error& e) {
    if (!asynchronous) EXPECT_THAT(e.what(), HasSubstr("captured graph 0"));
    EXPECT_THAT(e.what(), HasSubstr("7"));
  }
  EXPECT_EQ(m.weights(), weights);
  std::vector<std::vector<float>> state_after;
  for (const Tensor& t : training_state(m)) state_after.push_back(t.to(DType::f32).to_vector<float>());
  EXPECT_EQ(state_after, state);
  // A good batch replays as if the failed replay had not happened. A
  // synchronous backend failed before it advanced the RNG offset; an
  // asynchronous one had queued the work, and the offset moved on as it
  // does for the same failed step in lazy mode.
  auto [x3, y3] = batch(3);
  static_x.copy_(x3);
  static_y.copy_(y3);
  g.replay();
  Model lazy(5);
  for (int i = 0; i < 3; ++i) lazy.step(x0, y0);  // warmup, capture, first replay
  if (asynchronous) {
    const std::vector<std::vector<float>> before = lazy.weights();
    EXPECT_THROW(static_cast<void>(lazy.step(x0, from_vector(std::vector<int64_t>{0, 7, 1, 2}, {4})).item()),
                 Error);
    EXPECT_EQ(lazy.weights(), before);
  }
  EXPECT_EQ(static_cast<float>(static_loss.item()), static_cast<float>(lazy.step(x3, y3).item()));
  EXPECT_EQ(m.weights(), lazy.weights());
}

INSTANTIATE_TEST_SUITE_P(
    HostBackends, GraphReplayOnDevice,
    ::testing::Values(ReplayTarget{DeviceType::ref}, ReplayTarget{DeviceType::cpu},
                      ReplayTarget{DeviceType::async_host},
                      ReplayTarget{DeviceType::async_host, true}),
    [](const auto& info) {
      return absl::StrCat(device_type_name(info.param.device),
                          info.param.device_graph ? "_device_graph" : "");
    });

}  // namespace
}  // namespace mstep
