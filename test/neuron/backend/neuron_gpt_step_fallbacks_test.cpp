// GPT-mini's training step (test/unit/GptTrainingGraph.h: cross-entropy,
// clip_grad_norm_, AdamW) compiled for neuron through the whole pipeline,
// as gpt_train runs it: the families this backend lowers leave the host
// fallback list. Before the leading-axis reductions, the fills and
// nll_loss were lowered, this step had 167 host fallbacks (19 of them f32
// sums over leading axes: the bias gradients; 1 nll_loss; 2 zero fills)
// and 57 lowered ops; with them 145 and 79.
#include <gtest/gtest.h>

#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/compiler/Compiler.h"
#include "mstep/mstep.h"
#include "test/unit/GptTrainingGraph.h"

namespace mstep::neuron {
namespace {

TEST(NeuronGptStepFallbacks, LeadingSumsFillsAndTheLossAreLowered) {
  const TraceGraph graph = testing::gpt_training_step_graph(5);
  Backend& backend = **BackendRegistry::get(DeviceType::neuron);
  absl::StatusOr<CompiledGraph> compiled = compile_graph(graph, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  int sums = 0, losses = 0;
  for (const HostFallbackOp& f : compiled->executable->host_fallbacks()) {
    sums += (f.op == OpKind::sum || f.op == OpKind::mean) && f.dtype == DType::f32;
    losses += f.op == OpKind::nll_loss;
  }
  EXPECT_EQ(sums, 0);   // the bias gradients: matmuls against ones
  EXPECT_EQ(losses, 0); // cross_entropy's nll_loss
  const NeuronLoweringStats stats = lowering_stats(*compiled->executable);
  EXPECT_GE(stats.lowered_ops, 79u);
  // At most what is left after these families (167 - 19 - 1 - 2; other
  // lowerings only take more off the host).
  EXPECT_LE(compiled->executable->host_fallbacks().size(), 145u);
}

} // namespace
} // namespace mstep::neuron
