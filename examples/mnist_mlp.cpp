// mnist_mlp: the HPU-Graphs MNIST training example from the Gaudi
// documentation, in mstep's lazy mode or with captured graphs.
//
// Model: Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax,
// NLL loss; Adadelta with lr 0.1; batch 200; mark_step() after backward
// and after the optimizer step, as the Gaudi example does.
//
//   mnist_mlp [--data DIR | --synthetic] [--epochs N] [--max-steps N] [--log-every N]
//             [--mode lazy|replay|graphed|cacher]      (--flag=value works too)
//             [--device cpu|ref|xla|neuron]           (default cpu)
//             [--print-losses]          (also print "step N loss X" every step)
//             [--autocast bf16]         (lazy/replay: the forward's matmuls in bf16 with
//                                        f32 weights, the loss taken in f32)
//             [--save step.mstep]       (--mode replay: write the captured step for
//                                        mstep-run, after the capture)
//             [--ddp]                   (data parallel under mpirun, lazy or replay:
//                                        each rank takes batches of 200 from its
//                                        DistributedSampler share of the epoch;
//                                        nn::DistributedDataParallel averages the
//                                        gradients; rank 0 prints the global loss
//                                        and the samples/s of all ranks)
//
//   mpirun --allow-run-as-root --oversubscribe -np 2 -x OMP_NUM_THREADS=1 ./build/examples/mnist_mlp --ddp
//
// Modes:
//   lazy     trace, hash, look up and run every step (the default).
//   replay   the HPU-Graphs recipe: 3 lazy warmup steps, then one whole
//            step (zero_grad, forward, loss, backward, mark_step, step,
//            mark_step) captured into an mstep::Graph on static inputs;
//            each later batch is copied into them and the graph replayed.
//            Same seed, same losses as lazy mode.
//   graphed  make_graphed_callable(model) replays forward and backward;
//            loss and optimizer stay lazy.
//   cacher   ModuleCacher(model): one graphed callable per input shape. Its
//            epoch ends with a smaller batch, so it captures two graphs.
// At the end it prints steps/s and, over the steady-state steps (after the
// first 4), step_ms (wall time inside the step) and host_us_per_step (that
// wall time minus the time inside executables, lazy runs and replays).
//
// Data: by default Fashion-MNIST from Debian's dataset-fashion-mnist
// (/usr/share/datasets/fashion-mnist, installed by scripts/setup.sh); with
// --data DIR, the four MNIST-format IDX files in DIR (gzipped or not); with
// --synthetic, or when Fashion-MNIST is not installed, a synthetic, learnable
// data set. The first line printed says which. The data, the shuffle and the
// batches come from examples/common/mnist_data.c, shared with the C host
// (examples/c_host/mnist_c.c): same seed, same batches, same losses.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "examples/common/mnist_data.h"
#include "examples/models/DeviceFlag.h"
#include "examples/models/Mlp.h"
#include "examples/models/SimulatedStep.h"
#include "mstep/mstep.h"

using namespace mstep;

namespace {

constexpr int64_t kPixels = MNIST_PIXELS, kBatch = 200;

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "mnist_mlp: %s\n", message.c_str());
  std::exit(2);
}

/// Owns one split of the C data set (examples/common/mnist_data.h).
struct Dataset {
  mnist_dataset d{};
  Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  ~Dataset() { mnist_dataset_free(&d); }
  int64_t size() const { return d.size; }
};

/// 0, 1, ..., n - 1.
std::vector<int64_t> identity_order(int64_t n) {
  std::vector<int64_t> order(n);
  mnist_identity_order(order.data(), n);
  return order;
}

/// Rows order[first, first + rows) as a batch: x [rows, 784], y [rows].
std::pair<Tensor, Tensor> batch_at(const Dataset& d, const std::vector<int64_t>& order,
                                   int64_t first, int64_t rows = kBatch) {
  std::vector<float> x(rows * kPixels);
  std::vector<int64_t> y(rows);
  mnist_batch(&d.d, order.data(), first, rows, x.data(), y.data());
  return {from_vector(x, {rows, kPixels}), from_vector(y, {rows})};
}

double accuracy(examples::Mlp& model, const Dataset& test) {
  NoGradGuard no_grad;
  model.eval();
  const std::vector<int64_t> order = identity_order(test.size());
  int64_t correct = 0, seen = 0;
  for (int64_t first = 0; first + kBatch <= test.size(); first += kBatch) {
    auto [x, y] = batch_at(test, order, first);
    std::vector<int64_t> pred = argmax(model.forward(x), 1).to_vector<int64_t>();
    std::vector<int64_t> want = y.to_vector<int64_t>();
    for (int64_t i = 0; i < kBatch; ++i) correct += pred[i] == want[i];
    seen += kBatch;
  }
  model.train();
  return seen ? double(correct) / seen : 0;
}

enum class Mode { lazy, replay, graphed, cacher };

const char* mode_name(Mode m) {
  switch (m) {
  case Mode::lazy:
    return "lazy";
  case Mode::replay:
    return "replay";
  case Mode::graphed:
    return "graphed";
  case Mode::cacher:
    return "cacher";
  }
  return "?";
}

struct Flags {
  std::string data_dir;
  int64_t epochs = 1, max_steps = -1, log_every = 10;
  Mode mode = Mode::lazy;
  Device device{DeviceType::cpu, 0};
  bool ddp = false;          // --ddp: data parallel over mstep::distributed's ranks
  bool synthetic = false;    // --synthetic: the synthetic set even when real data is installed
  bool print_losses = false; // "step N loss X" every step (test/examples/c_host_matches_cpp.sh)
  std::string save;          // --save: the captured step's file (replay mode)
  bool autocast_bf16 = false; // --autocast bf16 (test/examples/aot_c_matches_xla.sh)
};

int64_t parse_int(const std::string& flag, const std::string& value) {
  int64_t n = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, n);
  if (ec != std::errc() || ptr != end) fail(flag + " wants an integer, got '" + value + "'");
  return n;
}

/// Accepts `--flag value` and `--flag=value`.
Flags parse_flags(int argc, char** argv) {
  const std::string usage =
      " (use --data DIR, --synthetic, --epochs N, --max-steps N, --log-every N, "
      "--mode lazy|replay|graphed|cacher, --device cpu|ref|xla|neuron, "
      "--print-losses, --save step.mstep, --autocast bf16, --ddp)";
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag == "--ddp") {
      f.ddp = true;
      continue;
    }
    if (flag == "--print-losses" || flag == "--synthetic") {
      (flag == "--synthetic" ? f.synthetic : f.print_losses) = true;
      continue;
    }
    if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      fail(flag + " needs a value" + usage);
    }
    if (flag == "--data")
      f.data_dir = value;
    else if (flag == "--epochs")
      f.epochs = parse_int(flag, value);
    else if (flag == "--max-steps")
      f.max_steps = parse_int(flag, value);
    else if (flag == "--save")
      f.save = value;
    else if (flag == "--autocast") {
      if (value != "bf16") fail("--autocast takes bf16, got '" + value + "'");
      f.autocast_bf16 = true;
    }
    else if (flag == "--log-every")
      f.log_every = std::max<int64_t>(1, parse_int(flag, value));
    else if (flag == "--mode") {
      if (value == "lazy")
        f.mode = Mode::lazy;
      else if (value == "replay")
        f.mode = Mode::replay;
      else if (value == "graphed")
        f.mode = Mode::graphed;
      else if (value == "cacher")
        f.mode = Mode::cacher;
      else
        fail("unknown --mode '" + value + "'; use lazy, replay, graphed or cacher");
    } else if (flag == "--device") {
      auto device = examples::parse_device(value);
      if (!device)
        fail("unknown --device '" + value + "'; use one of " + examples::device_choices());
      f.device = *device;
    } else {
      fail("unknown flag " + flag + usage);
    }
  }
  if (f.autocast_bf16 && f.mode != Mode::lazy && f.mode != Mode::replay)
    fail(std::string("--autocast works in lazy and replay modes, not ") + mode_name(f.mode));
  if (f.ddp && f.mode != Mode::lazy && f.mode != Mode::replay)
    fail(std::string("--ddp works in lazy and replay modes, not ") + mode_name(f.mode));
  return f;
}

/// Steps before the host-time window opens: lazy mode compiles in its
/// first steps, replay mode warms up and captures, graphed and cacher
/// capture. The window measures the steady state.
constexpr int64_t kReplayWarmupSteps = 3;
constexpr int64_t kUnmeasuredSteps = kReplayWarmupSteps + 1;

} // namespace

int train(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  if (flags.ddp) {
    distributed::init();
    // Rank 0 speaks for the job; the others print errors only.
    if (distributed::rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 2;
  }
  const int64_t world = distributed::world_size();
  set_default_device(flags.device);

  Dataset train, test;
  char what[512] = "", error[512] = "";
  if (mnist_load(flags.data_dir.c_str(), flags.synthetic, &train.d, &test.d, what, sizeof what,
                 error, sizeof error) != 0)
    fail(error);
  std::printf("mnist_mlp: data: %s\n", what);

  manual_seed(0);
  auto model = std::make_shared<examples::Mlp>();
  // --ddp: rank 0's initial weights everywhere, gradients averaged; each
  // rank then draws its own dropout masks.
  std::optional<nn::DistributedDataParallel> ddp;
  if (flags.ddp) {
    ddp.emplace(*model);
    manual_seed(distributed::rank());
  }
  optim::Adadelta opt(model->parameters(), {.lr = 0.1});
  int64_t n_params = 0;
  for (const Tensor& p : model->parameters()) n_params += p.numel();
  std::printf("model: Linear 784->128, ReLU, Dropout(0.5), Linear 128->10, log_softmax "
              "(%lld parameters); Adadelta lr 0.1, batch %lld; mode %s\n",
              (long long)n_params, (long long)kBatch, mode_name(flags.mode));
  if (flags.ddp)
    std::printf("data parallel: %lld ranks x batch %lld, %zu gradient bucket(s)\n", (long long)world,
                (long long)kBatch, ddp->bucket_indices().size());
  std::printf("test accuracy before training: %.1f%%\n", 100 * accuracy(*model, test));

  // One training step in lazy mode, as in the Gaudi example.
  auto lazy_step = [&](const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor log_probs;
    {
      // --autocast bf16: the linear layers in bf16; the loss in f32.
      std::optional<AutocastScope> bf16;
      if (flags.autocast_bf16) bf16.emplace(DType::bf16);
      log_probs = model->forward(x);
    }
    Tensor loss = nll_loss(flags.autocast_bf16 ? log_probs.to(DType::f32) : log_probs, y);
    loss.backward();
    // --ddp: the global loss, the mean of the ranks'.
    if (flags.ddp) loss = distributed::all_reduce(loss.detach(), distributed::ReduceOp::mean);
    mark_step(); // after backward ...
    opt.step();
    mark_step(); // ... and after the optimizer step
    return loss;
  };

  // replay: the whole step (optimizer included) captured once on static
  // inputs, then replayed. Warmup and capture steps train like lazy ones,
  // so the RNG stream and the losses are those of lazy mode.
  Graph graph;
  Tensor static_x, static_y, static_loss;
  if (flags.mode == Mode::replay) {
    static_x = zeros({kBatch, kPixels});
    static_y = zeros({kBatch}, DType::i64);
  }
  auto replay_step = [&](const Tensor& x, const Tensor& y, int64_t step) {
    static_x.copy_(x); // materialized batches: no data copy, no trace
    static_y.copy_(y);
    if (step < kReplayWarmupSteps) return lazy_step(static_x, static_y);
    if (!graph.captured()) {
      {
        CaptureGuard capture(graph);
        static_loss = lazy_step(static_x, static_y);
      }
      if (!flags.save.empty()) {
        std::map<std::string, Tensor> names{{"x", static_x}, {"y", static_y}, {"loss", static_loss}};
        for (auto& [name, p] : model->named_parameters()) names.emplace(name, p);
        graph.save(flags.save, names);
        std::printf("saved the captured step to %s (replay it with mstep-run)\n", flags.save.c_str());
      }
      return static_loss;
    }
    graph.replay();
    return static_loss;
  };

  // graphed / cacher: forward and backward replayed, loss and optimizer lazy.
  std::optional<GraphedCallable> graphed;
  if (flags.mode == Mode::graphed) graphed = make_graphed_callable(model, zeros({kBatch, kPixels}));
  std::optional<ModuleCacher> cacher;
  if (flags.mode == Mode::cacher) cacher.emplace(model);
  auto module_step = [&](const Tensor& x, const Tensor& y) {
    opt.zero_grad();
    Tensor out = graphed ? (*graphed)({x})[0] : (*cacher)(x);
    Tensor loss = nll_loss(out, y);
    loss.backward(); // replays the backward graph
    mark_step();
    opt.step();
    mark_step();
    return loss;
  };

  // Batches per epoch: full batches only, except in cacher mode, whose
  // epoch ends with a smaller batch (half a batch when the data set
  // divides evenly), so that it captures a second graph.
  int64_t epoch_size = train.size() - train.size() % kBatch;
  if (flags.mode == Mode::cacher)
    epoch_size = train.size() % kBatch ? train.size() : train.size() - kBatch / 2;
  // --ddp: each rank's share of every epoch, in full batches.
  std::optional<distributed::DistributedSampler> sampler;
  if (flags.ddp) {
    sampler.emplace(train.size(), distributed::DistributedSamplerOptions{.seed = 0});
    epoch_size = sampler->size() - sampler->size() % kBatch;
  }

  reset_metrics();
  mnist_rng shuffle_rng;
  mnist_rng_seed(&shuffle_rng, 0);
  std::vector<int64_t> order = identity_order(train.size());
  int64_t step = 0;
  double in_step_seconds = 0; // wall time inside the steps of the window
  Metrics window_start;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t epoch = 0; epoch < flags.epochs; ++epoch) {
    if (sampler) {
      sampler->set_epoch(epoch);
      order = sampler->indices();
    } else {
      mnist_shuffle(order.data(), train.size(), &shuffle_rng);
    }
    for (int64_t first = 0; first < epoch_size; first += kBatch) {
      if (flags.max_steps >= 0 && step >= flags.max_steps) break;
      auto [x, y] = batch_at(train, order, first, std::min(kBatch, epoch_size - first));
      if (step == kUnmeasuredSteps) window_start = metrics();
      const auto s0 = std::chrono::steady_clock::now();
      Tensor loss;
      switch (flags.mode) {
      case Mode::lazy:
        loss = lazy_step(x, y);
        break;
      case Mode::replay:
        loss = replay_step(x, y, step);
        break;
      case Mode::graphed:
      case Mode::cacher:
        loss = module_step(x, y);
        break;
      }
      if (step >= kUnmeasuredSteps)
        in_step_seconds +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
      ++step;
      if (flags.print_losses) std::printf("step %lld loss %.6f\n", (long long)step, loss.item());
      if (step == 1 || step % flags.log_every == 0) {
        const double secs =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const Metrics m = metrics();
        std::printf("epoch %lld step %4lld  loss %.6f  %.1f steps/s  %.0f samples/s  "
                    "compiles %lld  cache hits %lld  replays %lld\n",
                    (long long)epoch + 1, (long long)step, loss.item(), step / secs,
                    step * kBatch * world / secs, (long long)m.cache_misses, (long long)m.cache_hits,
                    (long long)m.replays);
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const Metrics end = metrics();

  // Host time: wall time inside the steps minus time inside executables
  // (lazy runs and replays), per step of the steady-state window.
  std::printf("mode %s: %lld steps in %.3f s, %.1f steps/s (whole loop)\n", mode_name(flags.mode),
              (long long)step, secs, step / secs);
  if (const int64_t measured = step - kUnmeasuredSteps; measured > 0) {
    const double executing = (end.execute_seconds - window_start.execute_seconds) +
                             (end.replay_execute_seconds - window_start.replay_execute_seconds);
    std::printf("steps %lld-%lld: step_ms %.3f  host_us_per_step %.1f  (inside executables "
                "%.3f ms/step, compiles %lld)\n",
                (long long)kUnmeasuredSteps + 1, (long long)step, 1e3 * in_step_seconds / measured,
                1e6 * (in_step_seconds - executing) / measured, 1e3 * executing / measured,
                (long long)(end.compiles - window_start.compiles));
    examples::print_simulated_step(window_start, end, measured);
  } else {
    std::printf("step_ms n/a  host_us_per_step n/a  (the first %lld steps warm up; run more)\n",
                (long long)kUnmeasuredSteps);
  }
  if (graphed)
    std::printf("graphed: forward %zu kernels, backward %zu kernels\n",
                graphed->forward_graph().num_kernels(), graphed->backward_graph().num_kernels());
  if (cacher)
    std::printf("captured graphs %zu  (captures %lld, hits %lld)\n", cacher->num_graphs(),
                (long long)cacher->captures(), (long long)cacher->hits());
  if (graph.captured())
    std::printf("replay graph: %zu segments, %zu kernels\n", graph.num_segments(),
                graph.num_kernels());

  const double acc = accuracy(*model, test);
  std::printf("test accuracy after %lld steps: %.1f%%\n", (long long)step, 100 * acc);
  if (flags.ddp) distributed::finalize();
  return acc > 0.5 ? 0 : 1;
}

// An mstep error the program cannot recover from (a graph that does not
// compile, a runtime-only build without the graph in its disk cache):
// said on stderr, exit status 2, not an abort.
int main(int argc, char** argv) {
  try {
    return train(argc, argv);
  } catch (const mstep::Error& e) {
    std::fprintf(stderr, "mnist_mlp: %s\n", e.what());
    return 2;
  }
}
