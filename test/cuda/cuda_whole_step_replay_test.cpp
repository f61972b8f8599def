// Whole training steps captured and replayed through the user's API on
// `--device cuda`, over the fake driver (issue 22 §1 and §2, without a
// GPU): the registry's cuda backend is built over the fake driver, cuBLASLt
// and attention runners (test/cuda/FakeRegistryCuda.h), so the steps are
// traced, compiled by the cuda compile half and run as they would be on a
// GPU, except that the fake runs no kernel. What that checks, for
// mnist_mlp's step and GPT-mini's (f32 with dropout; bf16 autocast with
// cuDNN attention and cuBLASLt epilogues):
//   - the capture of the whole step succeeds (nothing allocates or syncs
//     inside it: the first GPU run of whole steps failed there);
//   - a replay is one cuGraphLaunch, with the RNG state written before it
//     and no allocation, capture, instantiation or host sync, also back to
//     back with no read between replays; a lazy step does not wait for
//     the device either (before the pinned ring of CudaStaging.h, each
//     copy_in waited for the one before it);
//   - each launch of the graph runs the kernels and cuBLASLt calls a lazy
//     run of the same step queues, in the same order with the same grids;
//   - the Philox offset moves on by the same amount each replay, so each
//     replay draws new numbers (dropout), as lazy steps do;
//   - a custom op's CUDA kernels (GIoU, NVRTC) run inside the graph;
//   - a replay of a freed or moved input is refused before any driver call.
// A binary of its own: the registry creates the cuda backend once per
// process, and here it must be the fake's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"
#include "test/cuda/FakeRegistryCuda.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

/// The process's fake driver, which the registry's cuda backend uses.
testing::FakeCudaDriver& fake() { return testing::use_fakes_for_registry_cuda(); }

class FakeCudaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    (void)fake();
    set_default_device(Device{DeviceType::cuda, 0});
  }
};
[[maybe_unused]] const auto* const environment =
    ::testing::AddGlobalTestEnvironment(new FakeCudaEnvironment);

/// A kernel launch or cuBLASLt call as a comparable line.
std::string work_line(const testing::FakeCall& call) {
  if (call.name == "cuLaunchKernel")
    return call.kernel + " grid " + std::to_string(call.grid[0]) + "x" +
           std::to_string(call.grid[1]) + " block " + std::to_string(call.block[0]);
  return call.name;
}
bool is_work(const testing::FakeCall& call) {
  return call.name == "cuLaunchKernel" || call.name == "cublasLtMatmul" ||
         call.name.rfind("sdpa ", 0) == 0;
}

/// The kernels and cuBLASLt calls from call `from` on that ran outside any
/// graph launch (graph_launch 0) or in graph launch `launch`.
std::vector<std::string> work_since(size_t from, int launch) {
  std::vector<std::string> lines;
  for (size_t i = from; i < fake().calls.size(); ++i)
    if (is_work(fake().calls[i]) && fake().calls[i].graph_launch == launch)
      lines.push_back(work_line(fake().calls[i]));
  return lines;
}

/// The calls from `from` on made directly (not by a graph's nodes).
std::vector<testing::FakeCall> direct_since(size_t from) {
  std::vector<testing::FakeCall> calls;
  for (size_t i = from; i < fake().calls.size(); ++i)
    if (fake().calls[i].graph_launch == 0) calls.push_back(fake().calls[i]);
  return calls;
}

/// Two lazy steps (compiles, optimizer state), the lazy work of a third,
/// then a capture and `replays` replays, each checked as the file's
/// comment says (`draws`: the step has random ops, so each replay writes
/// the RNG state). Returns the Philox offsets written before each replay.
/// No call since `from` allocates, captures, instantiates, updates a graph
/// or waits for the device; `what` names the work for a failure.
void expect_no_allocation_capture_or_wait(size_t from, const std::string& what) {
  static const std::set<std::string> forbidden = {
      "cuMemAlloc",          "cuMemAllocAsync",       "cuMemHostAlloc",     "cuMemAllocHost",
      "cuStreamBeginCapture", "cuGraphInstantiateWithFlags", "cuGraphExecUpdate",
      "cuStreamSynchronize", "cuCtxSynchronize",      "cuEventSynchronize"};
  for (const testing::FakeCall& call : direct_since(from))
    EXPECT_EQ(forbidden.count(call.name), 0u) << what << " calls " << call.name;
}

std::vector<int64_t> check_capture_and_replays(const std::function<Tensor()>& step, int replays,
                                               bool draws = true) {
  for (int i = 0; i < 2; ++i) (void)step().item();
  size_t before = fake().calls.size();
  Tensor lazy_loss = step();
  // A lazy step queues its work and returns: no wait for the device
  // until its loss is read.
  expect_no_allocation_capture_or_wait(before, "a lazy step");
  (void)lazy_loss.item();
  const std::vector<std::string> lazy = work_since(before, 0);
  EXPECT_FALSE(lazy.empty());

  const Metrics start = metrics();
  Graph graph;
  Tensor loss;
  {
    CaptureGuard capture(graph);
    loss = step();
  }
  EXPECT_TRUE(graph.on_device_graph()) << "the whole step is not on one CUDA graph";

  std::vector<int64_t> offsets;
  for (int r = 1; r <= replays; ++r) {
    before = fake().calls.size();
    const int launches_before = static_cast<int>(fake().calls_named("cuGraphLaunch").size());
    graph.replay();
    expect_no_allocation_capture_or_wait(before, "replay " + std::to_string(r));
    const std::vector<testing::FakeCall> direct = direct_since(before);
    std::vector<std::string> names;
    const testing::FakeCall* rng = nullptr;
    for (const testing::FakeCall& call : direct) {
      // The RNG state (seed, offset: two i64) goes in before the launch.
      const bool launched = std::count(names.begin(), names.end(), "cuGraphLaunch") > 0;
      if (call.name == "cuMemcpyHtoDAsync" && call.bytes == 16 && !launched) rng = &call;
      names.push_back(call.name);
    }
    // Issue 22: a replay's host work is one graph launch and its
    // bookkeeping: here the RNG state's copy, the launch, and events
    // (the launch's, and the staging ring's when it leaves a group).
    std::vector<std::string> besides_events;
    for (const std::string& name : names)
      if (name != "cuEventRecord") besides_events.push_back(name);
    const std::vector<std::string> expected =
        draws ? std::vector<std::string>{"cuMemcpyHtoDAsync", "cuGraphLaunch"}
              : std::vector<std::string>{"cuGraphLaunch"};
    EXPECT_EQ(besides_events, expected) << "replay " << r << ": " << ::testing::PrintToString(names);
    EXPECT_LE(names.size() - besides_events.size(), 2u)
        << "replay " << r << ": " << ::testing::PrintToString(names);
    (void)loss.item();  // waits: the fake has run the graph's nodes
    EXPECT_EQ(work_since(before, launches_before + 1), lazy)
        << "replay " << r << " ran other work than a lazy step";
    if (rng != nullptr) {
      int64_t state[2];
      std::memcpy(state, reinterpret_cast<const void*>(rng->target), sizeof state);
      offsets.push_back(state[1]);
    }
  }
  // Replays back to back, with no read between them (a loop that reads
  // the loss now and then): none waits for the device.
  before = fake().calls.size();
  for (int r = 0; r < 3; ++r) graph.replay();
  expect_no_allocation_capture_or_wait(before, "a back-to-back replay");
  (void)loss.item();
  const Metrics end = metrics();
  EXPECT_EQ(end.device_graph_launches - start.device_graph_launches, replays + 3);
  EXPECT_EQ(end.device_graph_rerecords - start.device_graph_rerecords, 0);
  EXPECT_EQ(end.compiles, start.compiles) << "a replay compiled";
  return offsets;
}

/// mnist_mlp's training step: forward and backward, then the update, each
/// cut by mark_step (two segments).
Tensor mlp_step(examples::Mlp& model, optim::Optimizer& opt, const Tensor& x, const Tensor& y) {
  opt.zero_grad();
  Tensor loss = nll_loss(model.forward(x), y);
  loss.backward();
  mark_step();
  opt.step();
  mark_step();
  return loss;
}

/// The offsets advance by one positive stride, a multiple of 4 (Philox
/// draws four words per counter), replay after replay.
void expect_offsets_advance(const std::vector<int64_t>& offsets, int replays) {
  ASSERT_THAT(offsets, SizeIs(replays)) << "no RNG state written before a replay";
  const int64_t stride = offsets[1] - offsets[0];
  EXPECT_GT(stride, 0);
  EXPECT_EQ(stride % 4, 0);
  for (size_t i = 1; i < offsets.size(); ++i)
    EXPECT_EQ(offsets[i] - offsets[i - 1], stride) << "replay " << i + 1;
}

TEST(CudaWholeStepReplay, TheMnistStepReplaysAsOneGraphLaunchOfTheLazyStepsWork) {
  manual_seed(0);
  auto model = std::make_shared<examples::Mlp>(64, 32, 10);  // Dropout(0.5)
  optim::Adadelta opt(model->parameters(), optim::AdadeltaOptions{.lr = 0.1});
  std::vector<float> pixels(16 * 64);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i % 7) / 7.0f;
  std::vector<int64_t> classes(16);
  for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(i % 10);
  Tensor x = from_vector(pixels, Shape({16, 64}));
  Tensor y = from_vector(classes, Shape({16}));
  auto step = [&] { return mlp_step(*model, opt, x, y); };
  expect_offsets_advance(check_capture_and_replays(step, 4), 4);
}

/// GPT-mini's training step on a fixed batch of `batch` x max_seq tokens
/// (next-token targets), AdamW, under `autocast` when set.
struct GptStep {
  GptStep(const examples::GptConfig& config, int64_t batch, std::optional<DType> autocast)
      : config(config), model(config), autocast(autocast),
        opt(model.parameters(), optim::AdamWOptions{.lr = 1e-3, .weight_decay = 0.1}) {
    std::vector<int64_t> ids(batch * config.max_seq), next(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = static_cast<int64_t>((i * 7) % config.vocab);
      next[i] = static_cast<int64_t>((i * 7 + 7) % config.vocab);
    }
    tokens = from_vector(ids, Shape({batch, config.max_seq}));
    targets = from_vector(next, Shape({batch, config.max_seq}));
  }
  Tensor operator()() {
    opt.zero_grad();
    Tensor loss;
    {
      AutocastScope scope(autocast);
      Tensor logits = model.forward(tokens, Tensor());
      loss = cross_entropy(logits.reshape({-1, config.vocab}), targets.reshape({-1}));
    }
    loss.backward();
    opt.step();
    mark_step();
    return loss;
  }
  examples::GptConfig config;
  examples::GptMini model;
  std::optional<DType> autocast;
  optim::AdamW opt;
  Tensor tokens, targets;
};

/// How many calls from `from` on that graph launches ran are named `name`.
int in_launches(size_t from, const std::string& name) {
  int n = 0;
  for (size_t i = from; i < fake().calls.size(); ++i)
    n += fake().calls[i].graph_launch > 0 && fake().calls[i].name == name;
  return n;
}
/// How many graph launches were made from call `from` on.
int graph_launches_since(size_t from) {
  int n = 0;
  for (size_t i = from; i < fake().calls.size(); ++i) n += fake().calls[i].name == "cuGraphLaunch";
  return n;
}

TEST(CudaWholeStepReplay, TheGptMiniStepWithDropoutReplaysAsOneGraphLaunchOfTheLazyStepsWork) {
  manual_seed(0);
  GptStep step({.vocab = 32, .dim = 32, .heads = 2, .layers = 2, .max_seq = 16, .dropout = 0.1},
               4, std::nullopt);
  expect_offsets_advance(check_capture_and_replays(std::ref(step), 3), 3);
}

// The bench's form of GPT-mini (bf16 autocast: cuBLASLt bf16 matmuls with
// bias epilogues, cuDNN attention at the heads' strides, the casts in
// batches), smaller: each replay runs its cuDNN steps inside the graph.
TEST(CudaWholeStepReplay, TheGptMiniBf16StepWithCudnnAttentionReplaysAsOneGraphLaunch) {
  manual_seed(0);
  GptStep step({.vocab = 64, .dim = 64, .heads = 2, .layers = 2, .max_seq = 16}, 2, DType::bf16);
  const size_t before = fake().calls.size();
  EXPECT_THAT(check_capture_and_replays(std::ref(step), 2, /*draws=*/false), SizeIs(0));
  const int launches = graph_launches_since(before);
  EXPECT_EQ(launches, 2 + 3);  // the checked replays and the back-to-back ones
  EXPECT_EQ(in_launches(before, "sdpa forward"), 2 * launches) << "a cuDNN forward per layer";
  EXPECT_EQ(in_launches(before, "sdpa backward"), 2 * launches) << "a cuDNN backward per layer";
  int epilogues = 0;
  for (cublasLtEpilogue_t e : testing::fake_cublaslt_state().matmul_epilogues)
    epilogues += e != CUBLASLT_EPILOGUE_DEFAULT;
  EXPECT_GT(epilogues, 0) << "no cuBLASLt call with an epilogue (bias, bias gradient)";
}

// Issue 22 §3: a custom op's CUDA C++ kernels (GIoU's, compiled by NVRTC)
// run inside the captured graph, as in a lazy step.
TEST(CudaWholeStepReplay, TheGiouCustomKernelsRunInsideTheCapturedGraph) {
  std::vector<float> boxes, targets;
  for (int i = 0; i < 8; ++i) {
    const float x = static_cast<float>(i);
    boxes.insert(boxes.end(), {x, x, x + 2.0f, x + 3.0f});
    targets.insert(targets.end(), {x + 0.5f, x, x + 2.5f, x + 2.0f});
  }
  Tensor pred = from_vector(boxes, Shape({8, 4}));
  pred.requires_grad_();
  Tensor target = from_vector(targets, Shape({8, 4}));
  optim::SGD opt({pred}, optim::SGDOptions{.lr = 0.1});
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = examples::giou_loss(pred, target, "mean");
    loss.backward();
    opt.step();
    mark_step();
    return loss;
  };
  const size_t before = fake().calls.size();
  EXPECT_THAT(check_capture_and_replays(step, 2, /*draws=*/false), SizeIs(0));
  const int launches = graph_launches_since(before);
  int forward = 0, backward = 0;
  for (size_t i = before; i < fake().calls.size(); ++i) {
    const testing::FakeCall& call = fake().calls[i];
    if (call.graph_launch > 0 && call.name == "cuLaunchKernel") {
      forward += call.kernel.find("giou_forward") != std::string::npos;
      backward += call.kernel.find("giou_backward") != std::string::npos;
    }
  }
  EXPECT_EQ(launches, 2 + 3);  // the checked replays and the back-to-back ones
  EXPECT_EQ(forward, launches) << "one forward kernel per graph launch";
  EXPECT_EQ(backward, launches) << "one backward kernel per graph launch";
}

// Issue 22's bad input: a replay whose input was freed, or whose
// parameters Module::to moved to another device, is a ReplayError naming
// it, raised before anything is queued on the device; moved back, the
// graph follows the new buffers. A new batch shared by copy_() patches the
// graph's head copy instead.
TEST(CudaWholeStepReplay, ANewBatchPatchesTheHeadCopyAndAFreedOrMovedInputFailsBeforeAnyDeviceWork) {
  manual_seed(0);
  auto model = std::make_shared<examples::Mlp>(64, 32, 10);
  optim::Adadelta opt(model->parameters(), optim::AdadeltaOptions{.lr = 0.1});
  auto x = std::make_unique<Tensor>(from_vector(std::vector<float>(16 * 64, 0.5f), Shape({16, 64})));
  Tensor y = from_vector(std::vector<int64_t>(16, 3), Shape({16}));
  auto step = [&] { return mlp_step(*model, opt, *x, y); };
  (void)step().item();
  Graph graph;
  {
    CaptureGuard capture(graph);
    (void)step();
  }
  graph.replay();
  auto expect_refused = [&](ReplayError::Kind kind, const std::string& why) {
    const size_t before = fake().calls.size();
    const int64_t launches = metrics().device_graph_launches;
    try {
      graph.replay();
      ADD_FAILURE() << why << ": the replay ran";
    } catch (const ReplayError& e) {
      EXPECT_EQ(e.kind(), kind) << why << ": " << e.what();
    }
    EXPECT_THAT(direct_since(before), SizeIs(0)) << why << ": the refused replay called the driver";
    EXPECT_EQ(metrics().device_graph_launches, launches) << why;
  };
  // A new batch by copy_() from a materialized tensor shares its buffer:
  // the graph's head copy of the batch is patched to read it (no new
  // capture, no graph update), and the copy runs at the next launch.
  {
    Tensor next = from_vector(std::vector<float>(16 * 64, 0.75f), Shape({16, 64}));
    x->copy_(next);
    const Metrics m0 = metrics();
    const size_t before = fake().calls.size();
    graph.replay();
    const Metrics m1 = metrics();
    EXPECT_EQ(m1.device_graph_updates - m0.device_graph_updates, 1);
    EXPECT_EQ(m1.device_graph_rerecords - m0.device_graph_rerecords, 0);
    EXPECT_GE(m1.device_graph_node_patches - m0.device_graph_node_patches, 1);
    int patches = 0;
    for (const testing::FakeCall& call : direct_since(before)) {
      EXPECT_NE(call.name, "cuStreamBeginCapture");
      EXPECT_NE(call.name, "cuGraphExecUpdate");
      patches += call.name == "cuGraphExecMemcpyNodeSetParams";
    }
    EXPECT_EQ(patches, 1) << "the batch's head copy, once";
  }
  model->to(Device{DeviceType::cpu, 0});
  expect_refused(ReplayError::Kind::device_mismatch, "parameters moved to the cpu");
  // Back on cuda (in other buffers): the graph follows them and replays.
  model->to(Device{DeviceType::cuda, 0});
  const int64_t updates = metrics().device_graph_updates;
  graph.replay();
  EXPECT_EQ(metrics().device_graph_updates, updates + 1);
  x.reset();
  expect_refused(ReplayError::Kind::input_freed, "the batch freed");
}

} // namespace
} // namespace mstep::cuda
