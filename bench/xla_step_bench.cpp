// xla_step_bench: mstep's side of bench/xla_peers.sh. One training step,
// mnist_mlp's (examples::Mlp, dropout 0.5, NLL loss, Adadelta lr 0.1,
// batch 200; mark_step after backward and after the update) or GPT-mini's
// (examples::GptMini dim 256, 4 layers, 4 heads, seq 256, batch 8, vocab
// 1024, no dropout; cross entropy, AdamW lr 3e-4 weight decay 0.1, no
// clipping; one mark_step), captured and replayed on one backend:
//
//   xla_step_bench --model mlp|gpt --device cpu|xla --steps N [--export DIR]
//                  [--then-threads T]
//
// Two lazy warmup steps, the captured step, then N timed replays. The
// batches come from fixed seeds, so every run (and every peer) trains on
// the same data from the same weights. With --export, the captured step
// is also written as StableHLO (Graph::export_stablehlo) with the values
// of its arguments before the first replay and the N batches, in the
// layout test/interop/run_stablehlo.py reads (DIR/step.stablehlo.mlir,
// values.safetensors, inputs.safetensors), for XLA:CPU and IREE to run
// the same N steps (bench/peers/stablehlo_steps.py).
//
// Prints RESULT lines (bench/peers/summarize.py), impl mstep-<device>:
//   <model>_step_ms     median wall time of a replay (batch copied in,
//                       replay, loss read back), with the loss of the
//                       first and last replay
//   <model>_host_us     host time per replay: its wall time minus the
//                       time inside executables (executing_seconds()),
//                       median over the replays (the mean, which one
//                       preempted replay moves by microseconds, printed
//                       too); the runtime's own work, the same code on every
//                       backend (a backend's dispatch inside run() counts
//                       as inside); with the kernel launches per replay
//                       (Graph::num_kernels: cpu one per kernel, xla one
//                       per segment)
//   <model>_compile_ms  compiling the replayed step's graph(s)
//                       (Metrics::compile_seconds; the first step's own
//                       graph, where the optimizer creates its state, not
//                       counted; all graphs' total and count printed too)
//   <model>_switch_ms   with --then-threads T: after those replays,
//                       omp_set_num_threads(T) and N more replays of the
//                       same captured step; value the median, first the
//                       first replay's wall time, which rebuilds the step's
//                       kernels for T threads (Metrics::thread_rebuilds)
// The thread count is OMP_NUM_THREADS (bench/xla_peers.sh pins it).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/SafetensorsFile.h"

namespace {

using namespace mstep;
using Clock = std::chrono::steady_clock;

int fail(const std::string& message) {
  std::fprintf(stderr, "xla_step_bench: %s\n", message.c_str());
  return 2;
}

/// One model's step on static inputs, and its batches (integers or
/// floats, [steps, ...]).
struct Workload {
  std::map<std::string, Tensor> inputs;   // static input tensors by name
  std::map<std::string, HostTensor> data; // their values per step, stacked
  std::function<Tensor()> step;           // one training step; returns the loss
  std::vector<std::pair<std::string, Tensor>> parameters;
};

template <typename T>
HostTensor stacked(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
  return {dtype, Shape(dims),
          std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T))};
}

/// The slice `i` of a stacked [steps, ...] host tensor, as a tensor.
Tensor slice_of(const HostTensor& all, int64_t i) {
  const Shape dims(std::vector<int64_t>(all.shape.dims().begin() + 1, all.shape.dims().end()));
  const size_t bytes = all.bytes.size() / all.shape[0];
  const char* at = all.bytes.data() + i * bytes;
  if (all.dtype == DType::i64) {
    std::vector<int64_t> v(bytes / 8);
    std::memcpy(v.data(), at, bytes);
    return from_vector(v, dims);
  }
  std::vector<float> v(bytes / 4);
  std::memcpy(v.data(), at, bytes);
  return from_vector(v, dims);
}

Workload mlp(int64_t batches) {
  constexpr int64_t kBatch = 200, kPixels = 784, kClasses = 10;
  auto model = std::make_shared<examples::Mlp>();
  auto opt = std::make_shared<optim::Adadelta>(model->parameters(), optim::AdadeltaOptions{.lr = 0.1});
  Workload w;
  w.inputs = {{"x", zeros({kBatch, kPixels})}, {"y", zeros({kBatch}, DType::i64)}};
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> label(0, kClasses - 1);
  std::vector<float> xs(batches * kBatch * kPixels);
  std::vector<int64_t> ys(batches * kBatch);
  for (float& v : xs) v = normal(rng);
  for (int64_t& v : ys) v = label(rng);
  w.data["x"] = stacked(DType::f32, {batches, kBatch, kPixels}, xs);
  w.data["y"] = stacked(DType::i64, {batches, kBatch}, ys);
  Tensor x = w.inputs["x"], y = w.inputs["y"];
  w.step = [model, opt, x, y] {
    opt->zero_grad();
    Tensor loss = nll_loss(model->forward(x), y);
    loss.backward();
    mark_step();
    opt->step();
    mark_step();
    return loss;
  };
  for (auto& [name, p] : model->named_parameters()) w.parameters.emplace_back(name, p);
  return w;
}

Workload gpt(int64_t batches) {
  constexpr int64_t kB = 8, kS = 256, kVocab = 1024;
  auto model = std::make_shared<examples::GptMini>(
      examples::GptConfig{.vocab = kVocab, .dim = 256, .heads = 4, .layers = 4, .max_seq = kS});
  auto opt = std::make_shared<optim::AdamW>(model->parameters(),
                                            optim::AdamWOptions{.lr = 3e-4, .weight_decay = 0.1});
  Workload w;
  w.inputs = {{"tokens", zeros({kB, kS}, DType::i64)}, {"targets", zeros({kB, kS}, DType::i64)}};
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);
  std::vector<int64_t> ts(batches * kB * kS), ys(batches * kB * kS);
  for (int64_t& v : ts) v = token(rng);
  for (int64_t& v : ys) v = token(rng);
  w.data["tokens"] = stacked(DType::i64, {batches, kB, kS}, ts);
  w.data["targets"] = stacked(DType::i64, {batches, kB, kS}, ys);
  Tensor tokens = w.inputs["tokens"], targets = w.inputs["targets"];
  w.step = [model, opt, tokens, targets] {
    opt->zero_grad();
    Tensor loss = cross_entropy(model->forward(tokens, Tensor()).reshape({-1, kVocab}),
                                targets.reshape({-1}));
    loss.backward();
    opt->step();
    mark_step();
    return loss;
  };
  for (auto& [name, p] : model->named_parameters()) w.parameters.emplace_back(name, p);
  return w;
}

} // namespace

int main(int argc, char** argv) {
  std::string model_name, device, export_dir;
  int64_t steps = 0;
  int then_threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--model") model_name = value;
    else if (flag == "--device") device = value;
    else if (flag == "--steps") steps = std::atoll(value.c_str());
    else if (flag == "--export") export_dir = value;
    else if (flag == "--then-threads") then_threads = std::atoi(value.c_str());
    else return fail("unknown flag " + flag);
  }
  if ((model_name != "mlp" && model_name != "gpt") || device.empty() || steps < 1 || argc % 2 == 0)
    return fail("usage: xla_step_bench --model mlp|gpt --device cpu|xla --steps N [--export DIR] "
                "[--then-threads T]");
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(device);
  if (!type.ok()) return fail(std::string(type.status().message()));
  set_default_device(Device{*type, 0});
  manual_seed(0);
  constexpr int64_t kWarmup = 2; // lazy steps before the capture
  const int64_t batches = kWarmup + 1 + steps;
  Workload w = model_name == "mlp" ? mlp(batches) : gpt(batches);
  // Every batch made before timing, so that no data preparation is timed.
  std::vector<std::map<std::string, Tensor>> batch(batches);
  for (int64_t i = 0; i < batches; ++i)
    for (auto& [name, all] : w.data) batch[i][name] = slice_of(all, i);
  auto feed = [&](int64_t i) {
    for (auto& [name, t] : w.inputs) t.copy_(batch[i][name]);
  };
  // The first step's graph differs from the later ones' where the
  // optimizer creates its state; the replayed graph is compiled by the
  // last warmup step or the capture.
  feed(0), w.step().item();
  const double first_compile = metrics().compile_seconds;
  for (int64_t i = 1; i < kWarmup; ++i) feed(i), w.step().item();
  Graph graph;
  Tensor loss;
  feed(kWarmup);
  {
    CaptureGuard capture(graph);
    loss = w.step();
  }
  loss.item();
  const Metrics compiled = metrics();
  const double later_compile = compiled.compile_seconds - first_compile;
  const double step_compile = later_compile > 0 ? later_compile : first_compile;
  if (!export_dir.empty()) {
    std::map<std::string, Tensor> names = w.inputs;
    names.emplace("loss", loss);
    for (auto& [name, p] : w.parameters) names.emplace(name, p);
    graph.export_stablehlo(export_dir + "/step.stablehlo.mlir", names,
                           export_dir + "/values.safetensors");
    std::map<std::string, HostTensor> inputs;
    for (auto& [name, all] : w.data) {
      std::vector<int64_t> dims(all.shape.dims().begin(), all.shape.dims().end());
      const size_t bytes = all.bytes.size() / dims[0];
      dims[0] = steps;
      inputs[name] = {all.dtype, Shape(dims), all.bytes.substr((kWarmup + 1) * bytes)};
    }
    if (absl::Status s = write_safetensors(export_dir + "/inputs.safetensors", inputs); !s.ok())
      return fail(std::string(s.message()));
  }

  std::vector<double> step_ms, host_us;
  double first_loss = 0, last_loss = 0;
  const Metrics before = metrics();
  double wall = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const double inside0 = executing_seconds();
    const auto t0 = Clock::now();
    feed(kWarmup + 1 + i);
    graph.replay();
    const double value = loss.item();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    host_us.push_back(1e3 * ms - 1e6 * (executing_seconds() - inside0));
    step_ms.push_back(ms);
    wall += ms;
    (i == 0 ? first_loss : last_loss) = value;
    if (steps == 1) last_loss = value;
  }
  const Metrics after = metrics();
  const double inside_ms = 1e3 * (after.execute_seconds - before.execute_seconds +
                                  after.replay_execute_seconds - before.replay_execute_seconds);
  std::sort(step_ms.begin(), step_ms.end());
  std::sort(host_us.begin(), host_us.end());
  const std::string impl = "mstep-" + device;
  const int threads = omp_get_max_threads();
  int64_t params = 0;
  for (auto& [name, p] : w.parameters) params += p.numel();
  std::printf("RESULT metric=%s_step_ms impl=%s value=%.3f threads=%d params=%lld "
              "loss=%.5f->%.5f\n",
              model_name.c_str(), impl.c_str(), step_ms[step_ms.size() / 2], threads,
              static_cast<long long>(params), first_loss, last_loss);
  std::printf("RESULT metric=%s_host_us impl=%s value=%.2f threads=%d mean=%.2f kernels=%zu\n",
              model_name.c_str(), impl.c_str(), host_us[host_us.size() / 2], threads,
              1e3 * (wall - inside_ms) / steps, graph.num_kernels());
  std::printf("RESULT metric=%s_compile_ms impl=%s value=%.1f threads=%d all_graphs=%lld "
              "all_ms=%.1f\n",
              model_name.c_str(), impl.c_str(), 1e3 * step_compile, threads,
              static_cast<long long>(compiled.compiles), 1e3 * compiled.compile_seconds);
  if (then_threads > 0) {
    // The same captured step under another count: its first replay
    // rebuilds the kernels.
    omp_set_num_threads(then_threads);
    const int64_t rebuilds = metrics().thread_rebuilds;
    std::vector<double> switched;
    for (int64_t i = 0; i < steps; ++i) {
      const auto t0 = Clock::now();
      feed(kWarmup + 1 + i);
      graph.replay();
      last_loss = loss.item();
      switched.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    const double first = switched.front();
    std::sort(switched.begin(), switched.end());
    std::printf("RESULT metric=%s_switch_ms impl=%s value=%.3f threads=%d from=%d first=%.3f "
                "rebuilds=%lld loss=%.5f\n",
                model_name.c_str(), impl.c_str(), switched[switched.size() / 2], then_threads,
                threads, first, static_cast<long long>(metrics().thread_rebuilds - rebuilds),
                last_loss);
  }
  return 0;
}
