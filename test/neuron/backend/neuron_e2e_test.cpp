// The `neuron` device end to end: it is a production device (listed, with
// a compile half); the mnist_mlp model trains on it like on ref, in lazy
// mode and replaying a captured step; its executables round-trip through
// the disk cache and Graph::save/load; every run adds its simulated time
// to metrics() with sane engine figures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/models/Mlp.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/ref/RefKernels.h"
#include "lib/runtime/DiskCache.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::neuron {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr Device kNeuron{DeviceType::neuron, 0};
constexpr Device kRef{DeviceType::ref, 0};

/// A batch of `n` samples of `in` features and labels in [0, 10): fixed
/// values, the same on every device.
std::pair<Tensor, Tensor> batch(int64_t n, int64_t in, int step, Device device) {
  std::vector<float> x(n * in);
  std::vector<int64_t> y(n);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + step));
  for (int64_t i = 0; i < n; ++i) y[i] = (i * 7 + step) % 10;
  return {from_vector(x, {n, in}, std::nullopt, device), from_vector(y, {n}, std::nullopt, device)};
}

struct Losses {
  std::vector<float> losses;
  std::vector<std::vector<float>> parameters;
};

/// mnist_mlp's step (Linear, ReLU, Dropout(0.5), Linear, log_softmax, NLL,
/// Adadelta lr 0.1, mark_step after backward and after the update), at a
/// small size. replay: steps from the third replay one captured step.
Losses train(Device device, bool replay, int steps = 5) {
  constexpr int64_t kBatch = 24, kIn = 96;
  set_default_device(device);
  manual_seed(3);
  auto model = std::make_shared<examples::Mlp>(kIn, 48, 10, 0.5);
  optim::Adadelta opt(model->parameters(), {.lr = 0.1});
  auto lazy_step = [&](const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor loss = nll_loss(model->forward(x), y);
    loss.backward();
    mark_step();
    opt.step();
    mark_step();
    return loss;
  };
  Graph graph;
  Tensor static_x = zeros({kBatch, kIn}), static_y = zeros({kBatch}, DType::i64), static_loss;
  Losses run;
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch(kBatch, kIn, step, device);
    Tensor loss;
    if (!replay) {
      loss = lazy_step(x, y);
    } else {
      static_x.copy_(x);
      static_y.copy_(y);
      if (step < 2) {
        loss = lazy_step(static_x, static_y);
      } else if (!graph.captured()) {
        CaptureGuard capture(graph);
        static_loss = lazy_step(static_x, static_y);
        loss = static_loss;
      } else {
        graph.replay();
        loss = static_loss;
      }
    }
    run.losses.push_back(loss.item());
  }
  if (replay) EXPECT_TRUE(graph.captured());
  for (const Tensor& p : model->parameters()) run.parameters.push_back(p.to_vector<float>());
  set_default_device(Device{DeviceType::cpu, 0});
  return run;
}

/// f32 everywhere: neuron's matmuls accumulate K in fp32 PSUM in another
/// order than ref, so values differ by rounding (~1e-7 relative per op);
/// five steps of Adadelta keep them within 1e-4 (relative for the losses,
/// absolute for the parameters, which are O(0.1)).
void expect_close(const Losses& got, const Losses& want) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i)
    EXPECT_NEAR(got.losses[i], want.losses[i], 1e-4 * std::abs(want.losses[i])) << "step " << i;
  ASSERT_EQ(got.parameters.size(), want.parameters.size());
  for (size_t p = 0; p < want.parameters.size(); ++p) {
    ASSERT_EQ(got.parameters[p].size(), want.parameters[p].size());
    for (size_t i = 0; i < want.parameters[p].size(); ++i)
      ASSERT_NEAR(got.parameters[p][i], want.parameters[p][i], 1e-4)
          << "parameter " << p << "[" << i << "]";
  }
}

/// Busy fractions in [0, 1], a utilization in [0, 1], time > 0, a bottleneck.
void expect_sane(const SimulatedTime& t) {
  EXPECT_GT(t.runs, 0);
  EXPECT_GT(t.programs, 0);
  EXPECT_GT(t.seconds, 0);
  for (const char* engine : {"Tensor", "Vector", "Scalar", "GpSimd", "Sync", "DMA", "HBM"}) {
    ASSERT_TRUE(t.busy_seconds.count(engine)) << engine;
    EXPECT_GE(t.busy_fraction(engine), 0) << engine;
    EXPECT_LE(t.busy_fraction(engine), 1 + 1e-9) << engine;
  }
  EXPECT_GT(t.tensor_utilization(), 0); // every step has matmuls
  EXPECT_LE(t.tensor_utilization(), 1 + 1e-9);
  EXPECT_THAT(
      (std::vector<std::string>{"Tensor", "Vector", "Scalar", "GpSimd", "Sync", "DMA", "HBM"}),
      Contains(t.bottleneck()));
}

TEST(NeuronEndToEnd, IsAProductionDeviceWithACompileHalf) {
  EXPECT_THAT(BackendRegistry::registered_backends(), Contains("neuron"));
  EXPECT_EQ(*BackendRegistry::device_type("neuron"), DeviceType::neuron);
  absl::StatusOr<BackendCompiler*> compiler = CompilerRegistry::get("neuron");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  EXPECT_EQ((*compiler)->backend_name(), "neuron");
}

TEST(NeuronEndToEnd, MlpTrainingMatchesRefInLazyMode) {
  const Losses want = train(kRef, false);
  reset_metrics();
  const Losses got = train(kNeuron, false);
  expect_close(got, want);
  const Metrics m = metrics();
  expect_sane(m.simulated);
  // Two graphs a step, both with tile programs: forward and backward
  // (matmuls) and the update (one multi_tensor_update node).
  EXPECT_EQ(m.simulated.runs, 10);
}

TEST(NeuronEndToEnd, MlpTrainingMatchesRefWhenReplayed) {
  const Losses want = train(kRef, false);
  reset_metrics();
  const Losses got = train(kNeuron, true);
  expect_close(got, want);
  const Metrics m = metrics();
  EXPECT_EQ(m.replays, 2);
  expect_sane(m.simulated);
}

TEST(NeuronEndToEnd, OtherDevicesAddNoSimulatedTime) {
  reset_metrics();
  train(kRef, false, 2);
  const Metrics m = metrics();
  EXPECT_EQ(m.simulated.runs, 0);
  EXPECT_EQ(m.simulated.seconds, 0);
  EXPECT_THAT(metrics_report(), ::testing::Not(HasSubstr("simulated")));
}

TEST(NeuronEndToEnd, EveryRunAddsItsExecutablesSimulatedTime) {
  set_default_device(kNeuron);
  Tensor a = from_vector(std::vector<float>(64 * 96, 0.5f), {64, 96});
  Tensor b = from_vector(std::vector<float>(96 * 80, 0.25f), {96, 80});
  Tensor c = relu(matmul(a, b));
  mark_step(); // compiles (and runs) once
  reset_metrics();
  SimulatedTime after_first;
  for (int i = 0; i < 3; ++i) {
    Tensor d = relu(matmul(a, b));
    mark_step();
    EXPECT_FLOAT_EQ(d.to_vector<float>()[0], 96 * 0.125f);
    if (i == 0) after_first = metrics().simulated;
  }
  const Metrics m = metrics();
  set_default_device(Device{DeviceType::cpu, 0});
  EXPECT_EQ(m.compiles, 0);
  EXPECT_EQ(m.simulated.runs, 3);
  expect_sane(m.simulated);
  // The same executable each run: two snapshots' difference is two runs.
  const SimulatedTime two = m.simulated.minus(after_first);
  EXPECT_EQ(two.runs, 2);
  EXPECT_NEAR(two.seconds, 2 * after_first.seconds, 1e-12);
  EXPECT_NEAR(two.busy_seconds.at("Tensor"), 2 * after_first.busy_seconds.at("Tensor"), 1e-12);
  EXPECT_EQ(two.bottleneck(), after_first.bottleneck());
  EXPECT_THAT(metrics_report(), HasSubstr("simulated"));
  EXPECT_THAT(metrics_report(), HasSubstr("bottleneck"));
}

TEST(NeuronEndToEnd, TheDiskCacheRoundTripsAStepBitForBit) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("mstep_neuron_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace);
  const RuntimeOptions saved = Tracer::get().options();
  Tracer::get().mutable_options().disk_cache = dir.string() + ",false,64";
  Tracer::get().reset_disk_cache();
  ASSERT_NE(Tracer::get().disk_cache(), nullptr);
  Tracer::get().cache().clear();
  reset_metrics();
  const Losses first = train(kNeuron, false, 3);
  const Metrics compiled = metrics();
  ASSERT_GT(compiled.compiles, 1);
  Tracer::get().disk_cache()->flush();

  Tracer::get().cache().clear();
  reset_metrics();
  const Losses second = train(kNeuron, false, 3);
  const Metrics loaded = metrics();
  Tracer::get().mutable_options() = saved;
  Tracer::get().reset_disk_cache();
  Tracer::get().cache().clear();
  fs::remove_all(dir);

  EXPECT_EQ(loaded.compiles, 0) << metrics_report();
  EXPECT_EQ(loaded.disk_hits, compiled.compiles);
  EXPECT_EQ(first.losses, second.losses);
  EXPECT_EQ(first.parameters, second.parameters);
  // Loaded executables are lowered again: the same tile programs.
  EXPECT_EQ(loaded.simulated.programs, compiled.simulated.programs);
  EXPECT_DOUBLE_EQ(loaded.simulated.seconds, compiled.simulated.seconds);
}

TEST(NeuronEndToEnd, AnExecutablesRunAndItsNativeFormCarryItsSimulatedTime) {
  const TensorType t{Shape({300}), DType::f32};
  TraceGraph g;
  g.input_types = {t};
  GraphNode p{OpKind::parameter, {}, {}, {t}, nullptr};
  p.attrs.push_back({AttrName::index, AttrValue(int64_t{0})});
  g.nodes.push_back(p);
  g.nodes.push_back(GraphNode{OpKind::tanh, {}, {ValueRef{0, 0}}, {t}, nullptr});
  g.nodes.push_back(GraphNode{OpKind::log, {}, {ValueRef{1, 0}}, {t}, nullptr}); // host
  g.outputs = {ValueRef{2, 0}};
  absl::StatusOr<std::unique_ptr<Executable>> exe = make_neuron_executable(g);
  ASSERT_TRUE(exe.ok()) << exe.status();
  const SimulatedTime per_run = simulated_per_run(**exe);
  EXPECT_EQ(per_run.runs, 1);
  EXPECT_EQ(per_run.programs, 1); // tanh; log falls back
  // The timeline's time is the lowering's own estimate of its program.
  EXPECT_DOUBLE_EQ(per_run.seconds * 1e9, lowering_stats(**exe).estimated_ns);

  Backend& b = **BackendRegistry::get("neuron");
  BufferPtr in = *b.allocate(t);
  const std::vector<float> ones(300, 1.0f);
  ASSERT_TRUE(b.copy_in(*in, ones.data(), 300 * sizeof(float)).ok());
  reset_metrics();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*exe)->run({in}).ok());
  EXPECT_EQ(metrics().simulated.runs, 2);
  EXPECT_DOUBLE_EQ(metrics().simulated.seconds, 2 * per_run.seconds);

  absl::StatusOr<std::string> blob = (*exe)->serialize("");
  ASSERT_TRUE(blob.ok()) << blob.status();
  absl::StatusOr<std::unique_ptr<Executable>> loaded = b.deserialize(*blob, RuntimeOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(simulated_per_run(**loaded).programs, 1);
  EXPECT_DOUBLE_EQ(simulated_per_run(**loaded).seconds, per_run.seconds);
  EXPECT_EQ(simulated_per_run(**loaded).runs, 1);
  // Any other backend's executable has none.
  absl::StatusOr<std::unique_ptr<Executable>> on_ref = ref::make_ref_executable(g);
  ASSERT_TRUE(on_ref.ok()) << on_ref.status();
  EXPECT_EQ(simulated_per_run(**on_ref).runs, 0);
}

TEST(NeuronEndToEnd, ACorruptNativeFormIsDataLoss) {
  Backend& b = **BackendRegistry::get("neuron");
  absl::StatusOr<std::unique_ptr<Executable>> bad =
      b.deserialize("MSTEPNRN garbage", RuntimeOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("neuron executable"));
  // Module text (no magic) is for the compile half, as on every backend.
  EXPECT_EQ(b.deserialize("module {}", RuntimeOptions{}).status().code(),
            absl::StatusCode::kUnimplemented);
}

} // namespace
} // namespace mstep::neuron
