// cuda_fake_host_bench: mstep's own host work per training step on the
// cuda backend, lazy against replayed, without a GPU. The process's cuda
// backend is built over the tests' fake driver, cuBLASLt and attention
// runners (test/cuda/FakeRegistryCuda.h), whose calls only record
// themselves (a graph launch runs none of its nodes here), so what is timed is
// mstep's part of a step's host time: lazy, tracing, hashing, the cache
// lookup and the plan's steps queued call by call; replayed, Graph::replay
// (input checks, the RNG state, one graph launch, the results bound). A
// real driver adds its own time per call on top: the driver calls per step
// are printed, to multiply by a GPU's per-call cost (README: 3.7 us per
// kernel launch and 3.8 us per graph launch on an H200).
//
//   cuda_fake_host_bench [--model mlp|gpt] [--autocast bf16] [--steps N] [--replays N]
//
// mlp: mnist_mlp's step (784-128-10, Dropout(0.5), batch 200, Adadelta; two
// segments). gpt: GPT-mini at the peers' size (dim 256, 4 layers, 4 heads,
// seq 256, batch 8, vocabulary 1024, AdamW): in f32 with dropout 0.1
// (attention composed of our kernels), or with --autocast bf16 the GPU
// check's bench step (no dropout; cuDNN attention, here the fake's calls).
//
// Each step is timed on its own and the median printed; the loss is read
// after each step, outside the timing, so each step starts from an idle
// stream. One summary line:
//   lazy_host_us <a> replay_host_us <b> lazy_driver_calls <c> replay_driver_calls <d> ratio <a/b>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"
#include "test/cuda/FakeRegistryCuda.h"

using namespace mstep;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Times `steps` runs of `run` (each followed, untimed, by `after`): the
/// median in microseconds, and the fake's direct driver calls per run.
std::pair<double, double> time_runs(cuda::testing::FakeCudaDriver& fake, int steps,
                                    const std::function<void()>& run,
                                    const std::function<void()>& after) {
  std::vector<double> us;
  size_t calls = 0;
  for (int i = 0; i < steps; ++i) {
    fake.calls.clear();
    const auto t0 = Clock::now();
    run();
    const auto t1 = Clock::now();
    calls += fake.calls.size();
    after();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  return {median(us), static_cast<double>(calls) / steps};
}

} // namespace

int main(int argc, char** argv) {
  std::string model_name = "mlp";
  int steps = 30, replays = 0;  // replays: as many as steps unless set
  std::optional<DType> autocast;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") model_name = argv[i + 1];
    else if (flag == "--steps") steps = std::max(3, std::atoi(argv[i + 1]));
    else if (flag == "--replays") replays = std::max(3, std::atoi(argv[i + 1]));
    else if (flag == "--autocast" && std::string(argv[i + 1]) == "bf16") autocast = DType::bf16;
    else {
      std::fprintf(stderr, "cuda_fake_host_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (model_name != "mlp" && model_name != "gpt") {
    std::fprintf(stderr, "cuda_fake_host_bench: --model is mlp or gpt\n");
    return 2;
  }
  cuda::testing::FakeCudaDriver& fake = cuda::testing::use_fakes_for_registry_cuda();
  fake.run_graph_nodes = false;  // a launch's copies are device work
  set_default_device(Device{DeviceType::cuda, 0});
  manual_seed(0);

  std::function<Tensor()> step;
  std::shared_ptr<examples::Mlp> mlp;
  std::shared_ptr<examples::GptMini> gpt;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor x, y;
  if (model_name == "mlp") {
    mlp = std::make_shared<examples::Mlp>(784, 128, 10);
    opt = std::make_unique<optim::Adadelta>(mlp->parameters(), optim::AdadeltaOptions{.lr = 0.1});
    x = from_vector(std::vector<float>(200 * 784, 0.25f), Shape({200, 784}));
    y = from_vector(std::vector<int64_t>(200, 3), Shape({200}));
    step = [&] {
      opt->zero_grad();
      Tensor loss = nll_loss(mlp->forward(x), y);
      loss.backward();
      mark_step();
      opt->step();
      mark_step();
      return loss;
    };
  } else {
    examples::GptConfig config{.vocab = 1024, .dim = 256, .heads = 4, .layers = 4,
                               .max_seq = 256, .dropout = autocast ? 0.0 : 0.1};
    gpt = std::make_shared<examples::GptMini>(config);
    opt = std::make_unique<optim::AdamW>(gpt->parameters(),
                                         optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1});
    std::vector<int64_t> ids(8 * 256);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * 37) % 1024);
    x = from_vector(ids, Shape({8, 256}));
    y = from_vector(ids, Shape({8, 256}));
    step = [&] {
      opt->zero_grad();
      Tensor loss;
      {
        AutocastScope scope(autocast);
        Tensor logits = gpt->forward(x, Tensor());
        loss = cross_entropy(logits.reshape({-1, 1024}), y.reshape({-1}));
      }
      loss.backward();
      opt->step();
      mark_step();
      return loss;
    };
  }

  for (int i = 0; i < 3; ++i) (void)step().item();  // compiles, optimizer state
  Tensor loss;
  auto [lazy_us, lazy_calls] =
      time_runs(fake, steps, [&] { loss = step(); }, [&] { (void)loss.item(); });
  Graph graph;
  {
    CaptureGuard capture(graph);
    loss = step();
  }
  graph.replay();
  (void)loss.item();
  auto [replay_us, replay_calls] =
      time_runs(fake, replays > 0 ? replays : steps, [&] { graph.replay(); },
                [&] { (void)loss.item(); });
  if (!graph.on_device_graph()) {
    std::fprintf(stderr, "cuda_fake_host_bench: the step is not on one CUDA graph\n");
    return 1;
  }
  std::printf("cuda backend over the fake driver, model %s%s, median of %d lazy steps and %d "
              "replays; driver calls are those made directly (a graph's nodes are not calls)\n",
              model_name.c_str(), autocast ? " (autocast bf16)" : "", steps,
              replays > 0 ? replays : steps);
  std::printf("lazy_host_us %.1f replay_host_us %.2f lazy_driver_calls %.0f "
              "replay_driver_calls %.0f ratio %.0f\n",
              lazy_us, replay_us, lazy_calls, replay_calls, lazy_us / replay_us);
  return 0;
}
