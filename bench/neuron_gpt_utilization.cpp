// neuron_gpt_utilization: issue 19's lowering-quality figure. The GPT-mini
// training step of bench/peers.sh's gpt_step_ms (dim 256, 4 layers, 4
// heads, seq 256, batch 8, vocab 1024, full-length rows, AdamW, no
// clipping) under bf16 autocast runs on --device neuron (lazy: the second
// step, whose graph holds the optimizer state, is the one measured); its
// graph is compiled once more for the per-kernel figures. Prints:
//   - the whole step's simulated time (the cost model's estimate of every
//     tile program, one after another; host fallbacks take no simulated
//     time and are counted), busy fraction per engine and bottleneck;
//   - over the step's matmul and attention kernels only (the programs of
//     its matmul, sdpa and sdpa_grad nodes):
//       Tensor busy   = Tensor engine busy time / those kernels' time,
//                       and the share of it that is transposes against
//                       the identity (the matmuls' A^T, attention's q^T...),
//       FLOP util.    = their nc_matmul FLOPs / (92 TFLOPS peak x time)
//                       (nc_matmul FLOPs include the attention's transposes
//                       against the identity; the bias gradients' ones
//                       matmuls are sum nodes, not counted);
//   - the host time of compiling the step's graph once more (this
//     process, warm) and of validating its tile programs (the race
//     check's share of it), for the validator's compile-time cost;
//   - the top 10 kernels by simulated time (NEURON_GPT_TOP=n: n of them;
//     NEURON_GPT_TRACE="<kernel>": its instructions, start and end in ns).
// Target (issue 19): Tensor busy >= 60% over those kernels. Exits 0 either
// way (a bench, not a test).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "lib/backends/neuron/CostModel.h"
#include "lib/backends/neuron/ExecutionOrder.h"
#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/backends/neuron/RaceCheck.h"
#include "lib/backends/neuron/Validator.h"
#include "lib/compiler/Compiler.h"
#include "mstep/mstep.h"

using namespace mstep;
using namespace mstep::neuron;

namespace {

constexpr int64_t kVocab = 1024, kDim = 256, kHeads = 4, kLayers = 4, kSeq = 256, kBatch = 8;

struct Kernel {
  std::string name;
  OpKind op;
  CostReport report;
  double flops = 0;
  /// Tensor time of the transposes against the identity (A^T, q^T, ...).
  double transpose_ns = 0;
};

/// Tensor time of `p`'s nc_matmul against an allocation named "identity"
/// (on-chip transposes: data movement, not the op's product).
double transpose_ns(const TileProgram& p, const CostReport& r) {
  double ns = 0;
  for (size_t i = 0; i < p.instructions.size(); ++i) {
    const Instruction& inst = p.instructions[i];
    if (inst.opcode == Opcode::nc_matmul && p.allocations[inst.srcs[1].buffer].name == "identity")
      ns += r.timing[i].end_ns - r.timing[i].start_ns;
  }
  return ns;
}

bool matmul_or_attention(OpKind op) {
  return op == OpKind::matmul || op == OpKind::sdpa || op == OpKind::sdpa_grad;
}

} // namespace

int main() {
  const CostParams params;
  set_default_device(Device{DeviceType::neuron, 0});
  manual_seed(0);
  examples::GptMini model(examples::GptConfig{
      .vocab = kVocab, .dim = kDim, .heads = kHeads, .layers = kLayers, .max_seq = kSeq});
  model.train();
  optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);

  TraceGraph graph;
  SimulatedTime step;
  int64_t fallbacks = 0;
  for (int k = 0; k < 2; ++k) {
    std::vector<int64_t> ids(kBatch * (kSeq + 1));
    for (int64_t& t : ids) t = token(rng);
    std::vector<int64_t> x(kBatch * kSeq), y(kBatch * kSeq);
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t t = 0; t < kSeq; ++t) {
        x[b * kSeq + t] = ids[b * (kSeq + 1) + t];
        y[b * kSeq + t] = ids[b * (kSeq + 1) + t + 1];
      }
    opt.zero_grad();
    Tensor logits;
    {
      AutocastScope bf16(DType::bf16);
      logits = model.forward(from_vector(x, {kBatch, kSeq}), Tensor());
    }
    Tensor loss = cross_entropy(logits.reshape({-1, kVocab}), from_vector(y, {kBatch * kSeq}));
    loss.backward();
    opt.step();
    if (k == 1) graph = pending_graph();
    const Metrics before = metrics();
    mark_step(); // compiles and runs the step on the simulated NeuronCore
    const double value = loss.item();
    const Metrics after = metrics();
    std::printf("step %d on neuron: loss %.4f\n", k + 1, value);
    if (k == 1) {
      step = after.simulated.minus(before.simulated);
      fallbacks = after.fallbacks - before.fallbacks;
    }
  }

  Backend& backend = **BackendRegistry::get(DeviceType::neuron);
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  const Clock::time_point compile_start = Clock::now();
  absl::StatusOr<CompiledGraph> compiled = compile_graph(graph, backend, {}, RuntimeOptions{});
  const double compile_ms = ms_since(compile_start);
  if (!compiled.ok()) {
    std::fprintf(stderr, "compile: %s\n", std::string(compiled.status().message()).c_str());
    return 2;
  }
  // The validator alone over every program (it also runs inside the
  // compile, the simulator and the cost model).
  const Clock::time_point validate_start = Clock::now();
  int64_t validated = 0, instructions = 0;
  for (const LoweredKernel& k : lowered_kernels(*compiled->executable)) {
    if (absl::Status s = validate(*k.program); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", k.name.c_str(), std::string(s.message()).c_str());
      return 2;
    }
    ++validated;
    instructions += static_cast<int64_t>(k.program->instructions.size());
  }
  const double validate_ms = ms_since(validate_start);
  double race_ms = 0; // the rule race alone (RaceCheck.h), given the execution order
  for (const LoweredKernel& k : lowered_kernels(*compiled->executable)) {
    absl::StatusOr<std::vector<int64_t>> order = execution_order(*k.program);
    const Clock::time_point race_start = Clock::now();
    if (!order.ok() || !check_races(*k.program, *order).ok()) return 2;
    race_ms += ms_since(race_start);
  }
  std::vector<Kernel> kernels;
  for (const LoweredKernel& k : lowered_kernels(*compiled->executable)) {
    absl::StatusOr<CostReport> r = estimate_cost(*k.program, params);
    if (!r.ok()) {
      std::fprintf(stderr, "%s: %s\n", k.name.c_str(), std::string(r.status().message()).c_str());
      return 2;
    }
    const double flops = r->tensor_utilization * params.tensor_peak_flops * r->total_ns * 1e-9;
    // NEURON_GPT_TRACE=<kernel name>: that kernel's instructions with their
    // simulated start and end (what bounds it).
    if (const char* trace = std::getenv("NEURON_GPT_TRACE"); trace && k.name == trace)
      for (size_t i = 0; i < k.program->instructions.size(); ++i)
        std::printf("%10.1f %10.1f  %s\n", r->timing[i].start_ns, r->timing[i].end_ns,
                    describe_instruction(static_cast<int64_t>(i), k.program->instructions[i]).c_str());
    const double tr_ns = transpose_ns(*k.program, *r);
    kernels.push_back({k.name, k.op, *std::move(r), flops, tr_ns});
  }

  std::printf("\nGPT-mini training step (dim %lld, %lld layers, %lld heads, seq %lld, batch %lld, "
              "vocab %lld, bf16 autocast, AdamW) on the simulated NeuronCore-v2\n",
              (long long)kDim, (long long)kLayers, (long long)kHeads, (long long)kSeq,
              (long long)kBatch, (long long)kVocab);
  std::printf("whole step: %s\n", step.summary().c_str());
  std::printf("  %lld tile programs, %lld host fallbacks (no simulated time)\n",
              (long long)step.programs, (long long)fallbacks);
  std::printf("host: compile of the step graph %.1f ms; validate() of its %lld programs "
              "(%lld instructions) %.1f ms, of which the race check %.1f ms\n",
              compile_ms, (long long)validated, (long long)instructions, validate_ms, race_ms);

  double mm_ns = 0, mm_tensor_ns = 0, mm_flops = 0, all_ns = 0, mm_transpose_ns = 0;
  int mm_count = 0;
  for (const Kernel& k : kernels) {
    all_ns += k.report.total_ns;
    if (!matmul_or_attention(k.op)) continue;
    ++mm_count;
    mm_ns += k.report.total_ns;
    mm_tensor_ns += k.report.busy_ns[static_cast<int>(Engine::tensor)];
    mm_flops += k.flops;
    mm_transpose_ns += k.transpose_ns;
  }
  std::printf("\nmatmul + attention kernels: %d of %zu programs, %.3f ms of %.3f ms (%.1f%%)\n",
              mm_count, kernels.size(), mm_ns / 1e6, all_ns / 1e6, 100 * mm_ns / all_ns);
  std::printf("  Tensor busy over them   %.1f%%  (Tensor busy time / their time; target >= 60%%)\n",
              100 * mm_tensor_ns / mm_ns);
  std::printf("  of which transposes     %.1f%%  (nc_matmul against the identity: A^T, q^T, k^T, "
              "p^T, ...)\n",
              100 * mm_transpose_ns / mm_ns);
  std::printf("  FLOP utilization        %.1f%%  (%.2f GFLOP / (%.0f TFLOPS x their time))\n",
              100 * mm_flops / (params.tensor_peak_flops * mm_ns * 1e-9), mm_flops / 1e9,
              params.tensor_peak_flops / 1e12);

  if (std::getenv("NEURON_GPT_ALL")) { // every matmul/attention/permute kernel, in node order
    for (const Kernel& k : kernels)
      if (matmul_or_attention(k.op) || k.op == OpKind::permute)
        std::printf("  %-44s %s; transposes %.1f%%\n", k.name.c_str(), k.report.summary().c_str(),
                    100 * k.transpose_ns / k.report.total_ns);
  }
  std::sort(kernels.begin(), kernels.end(),
            [](const Kernel& a, const Kernel& b) { return a.report.total_ns > b.report.total_ns; });
  // NEURON_GPT_TOP=n: the n slowest kernels (default 10).
  const char* top_env = std::getenv("NEURON_GPT_TOP");
  const size_t top = top_env ? static_cast<size_t>(std::max(1, std::atoi(top_env))) : 10;
  std::printf("\ntop %zu kernels by simulated time:\n%-44s %9s %7s %7s %7s %7s %7s %7s  %s\n",
              top, "kernel", "us", "Tensor", "Vector", "Scalar", "GpSimd", "HBM", "util",
              "bottleneck");
  for (size_t i = 0; i < std::min(top, kernels.size()); ++i) {
    const CostReport& r = kernels[i].report;
    std::printf("%-44s %9.1f %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%% %6.1f%%  %s\n",
                kernels[i].name.c_str(), r.total_ns / 1e3, 100 * r.busy_fraction(Engine::tensor),
                100 * r.busy_fraction(Engine::vector), 100 * r.busy_fraction(Engine::scalar),
                100 * r.busy_fraction(Engine::gpsimd), 100 * r.hbm_busy_ns / r.total_ns,
                100 * r.tensor_utilization, r.bottleneck().c_str());
  }
  return 0;
}
