// replay_bench: host time per training step of the mnist_mlp model
// (examples::Mlp, Adadelta lr 0.1, batch 200, random data; zero_grad,
// forward, NLL loss, backward, mark_step, step, mark_step) in lazy mode
// and replayed from an mstep::Graph.
//
// Host time is the wall time of the steps minus the time spent inside
// executables, so it does not depend on how fast the backend computes:
//   lazy:   trace + hash + cache lookup + bind  = wall - execute_seconds
//   replay: input checks + bind + RNG update    = wall - replay_execute_seconds
// Each step is timed on its own; a rep's figure is its median step (a
// step preempted on a busy machine moves it little). Lazy mode and replay
// train two copies of the model and their --reps reps of --steps steps
// alternate, so both modes see the same conditions on a shared machine:
// the printed times are the medians over the reps, the ratio the median of
// the adjacent pairs' ratios. The batches are made before timing and
// reused in turn, so no data preparation (nor freeing of a batch) is timed.
//
//   replay_bench [--steps N] [--reps N] [--tiny] [--device cpu|ref] [--save step.mstep]
//
// --save writes the captured step (Graph::save) for mstep-run, whose host
// time per replay bench/export_bench.sh compares with this one's.
//
// The default device is mnist_mlp's, the cpu backend; --device ref runs the
// interpreter, whose ~13 ms of naive kernels per step evict the host's
// data between replays (see the README's performance notes).
//
// Prints one explanatory line, then exactly one summary line:
//   lazy_host_us <a> replay_host_us <b> kernels <k> ratio <r>
// Targets (issue 5): replay host <= 5 us + 50 ns x kernels, and >= 20x
// less than lazy.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "examples/models/DeviceFlag.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"

namespace {

using namespace mstep;
using Clock = std::chrono::steady_clock;

constexpr int64_t kClasses = 10, kBatches = 8;
// The model's size: mnist_mlp's by default; --tiny shrinks the tensors but
// keeps every op (the same kernels), separating the fixed per-kernel
// cost from the memory traffic that large host kernels cause.
int64_t kPixels = 784, kHidden = 128, kBatch = 200;

struct Batch {
  Tensor x, y;
};

std::vector<Batch> random_batches() {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, kClasses - 1);
  std::vector<Batch> batches;
  for (int64_t b = 0; b < kBatches; ++b) {
    std::vector<float> x(kBatch * kPixels);
    std::vector<int64_t> y(kBatch);
    for (float& v : x) v = normal(rng);
    for (int64_t& v : y) v = label(rng);
    batches.push_back({from_vector(x, {kBatch, kPixels}), from_vector(y, {kBatch})});
  }
  return batches;
}

double median(std::vector<double> v);

struct HostTime {
  double median_step = 0; // median over the steps of (wall - executing)
  double mean_step = 0;   // (total wall - total executing) / steps
  double executing_per_step = 0;
};

/// Times `steps` calls of step(i), each on its own, so that a step the
/// scheduler preempted (this machine is shared) moves the median little.
template <typename StepFn> HostTime time_steps(int64_t steps, StepFn&& step) {
  std::vector<double> host(steps);
  double wall_total = 0, executing_total = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const double e0 = executing_seconds();
    const auto t0 = Clock::now();
    step(i);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const double executing = executing_seconds() - e0;
    host[i] = wall - executing;
    wall_total += wall;
    executing_total += executing;
  }
  return {median(host), (wall_total - executing_total) / steps, executing_total / steps};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t parse_positive(const char* flag, const std::string& value) {
  int64_t n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end || n <= 0) {
    std::fprintf(stderr, "replay_bench: %s wants a positive integer, got '%s'\n", flag,
                 value.c_str());
    std::exit(2);
  }
  return n;
}

} // namespace

int main(int argc, char** argv) {
  int64_t steps = 200, reps = 5;
  std::string save_path;
  set_default_device(Device{DeviceType::cpu, 0});  // mnist_mlp's default
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "--tiny") {
      kPixels = 8, kHidden = 8, kBatch = 4;
      continue;
    }
    if (const size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    }
    if (flag == "--steps")
      steps = parse_positive("--steps", value);
    else if (flag == "--reps")
      reps = parse_positive("--reps", value);
    else if (flag == "--save" && !value.empty())
      save_path = value;
    else if (flag == "--device" && examples::parse_device(value))
      set_default_device(*examples::parse_device(value));
    else {
      std::fprintf(stderr,
                   "replay_bench: unknown flag %s (use --steps N, --reps N, --tiny, "
                   "--device cpu|ref, --save FILE)\n",
                   flag.c_str());
      return 2;
    }
  }

  /// One model with its optimizer; lazy mode and replay train their own.
  struct Trainer {
    std::shared_ptr<examples::Mlp> model;
    std::unique_ptr<optim::Adadelta> opt;
    Tensor step(const Tensor& x, const Tensor& y) {
      opt->zero_grad();
      Tensor loss = nll_loss(model->forward(x), y);
      loss.backward();
      mark_step();
      opt->step();
      mark_step();
      return loss;
    }
  };
  auto make_trainer = [] {
    manual_seed(0);
    auto model = std::make_shared<examples::Mlp>(kPixels, kHidden, kClasses);
    auto opt = std::make_unique<optim::Adadelta>(model->parameters(), optim::AdadeltaOptions{.lr = 0.1});
    return Trainer{std::move(model), std::move(opt)};
  };
  const std::vector<Batch> batches = random_batches();
  Trainer lazy_trainer = make_trainer(), replay_trainer = make_trainer();

  // Lazy mode; the warmup compiles both graphs and creates the optimizer state.
  auto lazy_step = [&](int64_t i) {
    lazy_trainer.step(batches[i % kBatches].x, batches[i % kBatches].y);
  };
  for (int64_t i = 0; i < 5; ++i) lazy_step(i);

  // Replay: capture one step on static inputs, then copy the batch in and replay.
  for (int64_t i = 0; i < 5; ++i)
    replay_trainer.step(batches[i % kBatches].x, batches[i % kBatches].y);
  Tensor static_x = zeros({kBatch, kPixels});
  Tensor static_y = zeros({kBatch}, DType::i64);
  static_x.copy_(batches[0].x);
  static_y.copy_(batches[0].y);
  Graph graph;
  Tensor static_loss;
  {
    CaptureGuard capture(graph);
    static_loss = replay_trainer.step(static_x, static_y);
  }
  if (!save_path.empty()) {
    std::map<std::string, Tensor> names{{"x", static_x}, {"y", static_y}, {"loss", static_loss}};
    for (auto& [name, p] : replay_trainer.model->named_parameters()) names.emplace(name, p);
    graph.save(save_path, names);
  }
  auto replay_step = [&](int64_t i) {
    static_x.copy_(batches[i % kBatches].x);
    static_y.copy_(batches[i % kBatches].y);
    graph.replay();
  };
  for (int64_t i = 0; i < 5; ++i) replay_step(i);

  // Lazy and replay reps alternate, so that both see the same conditions
  // on a shared machine; the ratio is the median of each adjacent pair's.
  std::vector<HostTime> lazy, replay;
  std::vector<double> replay_own, pair_ratios;
  for (int64_t r = 0; r < reps; ++r) {
    lazy.push_back(time_steps(steps, lazy_step));
    const Metrics before = metrics();
    replay.push_back(time_steps(steps, replay_step));
    const Metrics after = metrics();
    // replay()'s own overhead (mean), without the copy_ calls around it.
    replay_own.push_back(((after.replay_time.total_seconds - before.replay_time.total_seconds) -
                          (after.replay_execute_seconds - before.replay_execute_seconds)) /
                         steps);
    pair_ratios.push_back(lazy.back().median_step / replay.back().median_step);
  }
  if (!std::isfinite(static_loss.item())) {
    std::fprintf(stderr, "replay_bench: the replayed loss is not finite\n");
    return 1;
  }

  auto median_of = [](const std::vector<HostTime>& runs, double HostTime::*field) {
    std::vector<double> v;
    for (const HostTime& h : runs) v.push_back(h.*field);
    return median(v);
  };
  const double lazy_us = 1e6 * median_of(lazy, &HostTime::median_step);
  const double replay_us = 1e6 * median_of(replay, &HostTime::median_step);
  const size_t kernels = graph.num_kernels();
  std::printf(
      "# %lld steps x %lld alternating lazy/replay reps, median step of the median rep; ratio: "
      "median of the reps' ratios (means: lazy %.1f us, replay "
      "%.1f us, replay() alone %.1f us); inside executables: lazy %.2f ms/step, replay "
      "%.2f ms/step; %zu segments; target: replay <= %.2f us (5 us + 50 ns x kernels), "
      "ratio >= 20\n",
      (long long)steps, (long long)reps, 1e6 * median_of(lazy, &HostTime::mean_step),
      1e6 * median_of(replay, &HostTime::mean_step), 1e6 * median(replay_own),
      1e3 * median_of(lazy, &HostTime::executing_per_step),
      1e3 * median_of(replay, &HostTime::executing_per_step), graph.num_segments(),
      5.0 + 0.05 * static_cast<double>(kernels));
  std::printf("lazy_host_us %.2f replay_host_us %.2f kernels %zu ratio %.1f\n", lazy_us, replay_us,
              kernels, median(pair_ratios));
  return 0;
}
