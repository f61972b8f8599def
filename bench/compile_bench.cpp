// compile_bench: the cost of the compiler on a cache miss, and the quality
// of its memory plan, for the GPT-mini training graph (2 layers, dim 64,
// 4 heads, seq 32, batch 4, vocab 96; attention written out, AdamW with
// clip_grad_norm_): forward, backward and optimizer update in one graph.
//
// Measures import (TraceGraph -> mstep MLIR) plus the full pass pipeline,
// the same work mark_step() does on a miss before the backend compiles.
// Prints one summary line:
//   compile_ms <import+passes> arena_bytes <a> liveness_bound_bytes <b>
// Targets (issue 4): compile_ms < 300 on 2 cores, arena <= 1.1 x bound.
#include <benchmark/benchmark.h>

#include <cstdio>

#include "examples/models/GptMini.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/mstep.h"
#include "mstep/passes/Pipeline.h"

namespace {

/// The pending training step of GPT-mini, cut but not run.
mstep::TraceGraph gpt_mini_training_graph() {
  using namespace mstep;
  examples::GptConfig config;  // vocab 96, dim 64, heads 4, layers 2, max_seq 32
  config.explicit_attention = true;
  examples::GptMini model(config);
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  std::vector<int64_t> tokens(4 * 32), lengths = {32, 30, 20, 16};
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37) % 96);
  // Two steps, so the optimizer state exists and the graph is the steady one.
  TraceGraph graph;
  for (int step = 0; step < 2; ++step) {
    opt.zero_grad();
    Tensor x = from_vector(tokens, {4, 32});
    Tensor logits = model.forward(x, from_vector(lengths, {4}));
    Tensor loss = cross_entropy(logits.reshape({-1, 96}), x.reshape({-1}));
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    if (step == 1) graph = pending_graph();
    mark_step();
  }
  return graph;
}

struct Compiled {
  int64_t arena_bytes = 0, liveness_bound_bytes = 0;
};

Compiled import_and_run_pipeline(const mstep::TraceGraph& graph, mlir::MLIRContext& ctx) {
  auto module = mstep::import_trace_graph(graph, ctx);
  if (!module.ok()) {
    std::fprintf(stderr, "import failed: %s\n", std::string(module.status().message()).c_str());
    std::exit(1);
  }
  mlir::PassManager pm(&ctx);
  mstep::passes::build_planned_pipeline(pm);
  if (mlir::failed(pm.run(module->get()))) {
    std::fprintf(stderr, "pipeline failed\n");
    std::exit(1);
  }
  auto func = (*module)->lookupSymbol<mlir::func::FuncOp>("step");
  auto attr = [&](const char* name) {
    auto a = func->getAttrOfType<mlir::IntegerAttr>(name);
    return a ? a.getInt() : int64_t{-1};
  };
  return {attr("mstep.arena_size"), attr("mstep.liveness_bound")};
}

Compiled g_result;

void BM_ImportAndPipelineGptMiniTraining(benchmark::State& state) {
  static const mstep::TraceGraph graph = gpt_mini_training_graph();
  mlir::MLIRContext ctx(mlir::MLIRContext::Threading::DISABLED);
  mstep::register_mstep_dialects(ctx);
  for (auto _ : state) g_result = import_and_run_pipeline(graph, ctx);
  state.counters["nodes"] = static_cast<double>(graph.nodes.size());
  state.counters["arena_bytes"] = static_cast<double>(g_result.arena_bytes);
  state.counters["liveness_bound_bytes"] = static_cast<double>(g_result.liveness_bound_bytes);
}
BENCHMARK(BM_ImportAndPipelineGptMiniTraining)->Unit(benchmark::kMillisecond)->MinTime(2.0);

/// Keeps the mean wall time per iteration for the summary line.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration) ms = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
  double ms = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("compile_ms %.1f arena_bytes %lld liveness_bound_bytes %lld\n", reporter.ms,
              static_cast<long long>(g_result.arena_bytes),
              static_cast<long long>(g_result.liveness_bound_bytes));
  return 0;
}
