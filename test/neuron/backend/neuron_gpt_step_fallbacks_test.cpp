// GPT-mini's training step (test/unit/GptTrainingGraph.h: cross-entropy,
// clip_grad_norm_, AdamW) compiled for neuron through the whole pipeline,
// as gpt_train runs it: the families this backend lowers leave the host
// fallback list. Before the leading-axis reductions, the fills and
// nll_loss were lowered, this step had 167 host fallbacks (19 of them f32
// sums over leading axes: the bias gradients; 1 nll_loss; 2 zero fills)
// and 57 lowered ops; with them 145 and 79. The copies (reshape, permute,
// slice, slice_scatter, cat: DMA programs or no program at all), the
// batched matmuls and the layer_norm backward's fusions took it to 12; gelu
// (a Scalar activation), the position embedding's [1, T, D] broadcast and
// the cross-entropy backward's bool/int64 values (arange by iota, the keep
// mask, the i64 count, the one-hot where) to 4; attention with
// valid_seq_len to 0.
#include <gtest/gtest.h>

#include "lib/backends/neuron/NeuronBackend.h"
#include "lib/compiler/Compiler.h"
#include "mstep/mstep.h"
#include "test/unit/GptTrainingGraph.h"

namespace mstep::neuron {
namespace {

TEST(NeuronGptStepFallbacks, CopiesMatmulsSumsFillsLossAndAttentionAreLowered) {
  const TraceGraph graph = testing::gpt_training_step_graph(5);
  Backend& backend = **BackendRegistry::get(DeviceType::neuron);
  absl::StatusOr<CompiledGraph> compiled = compile_graph(graph, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  int sums = 0, losses = 0, copies = 0, matmuls = 0;
  for (const HostFallbackOp& f : compiled->executable->host_fallbacks()) {
    sums += (f.op == OpKind::sum || f.op == OpKind::mean) && f.dtype == DType::f32;
    losses += f.op == OpKind::nll_loss;
    copies += f.op == OpKind::reshape || f.op == OpKind::permute || f.op == OpKind::slice ||
              f.op == OpKind::slice_scatter || f.op == OpKind::cat || f.op == OpKind::expand;
    matmuls += f.op == OpKind::matmul;
  }
  EXPECT_EQ(sums, 0);    // the bias gradients: matmuls against ones
  EXPECT_EQ(losses, 0);  // cross_entropy's nll_loss
  EXPECT_EQ(copies, 0);  // bool/i64 ones included (i64 as int32 pairs; bool ones are aliases)
  EXPECT_EQ(matmuls, 0); // linear layers on [B, T, D] and their input gradients
  const NeuronLoweringStats stats = lowering_stats(*compiled->executable);
  // The head permutes around attention run no program (read and written
  // at the heads' strides): per layer q, k, v and the output's in the
  // forward, dO's, dq's, dk's and dv's in the backward.
  EXPECT_EQ(stats.head_permutes_folded, 16u);
  // The weight gradients' transposes run no program either (the matmul
  // stores its result transposed), nor do the transposes its matmuls read.
  EXPECT_GE(stats.lowered_ops + stats.head_permutes_folded + stats.transposes_read_by_matmuls,
            150u);
  EXPECT_GE(stats.aliased_ops, 20u);
  // Attention with valid_seq_len (2 sdpa, 2 sdpa_grad), the last four, is
  // lowered too (the lengths read on chip): nothing runs on the host.
  for (const HostFallbackOp& f : compiled->executable->host_fallbacks())
    ADD_FAILURE() << "host fallback: " << op_name(f.op);
  EXPECT_EQ(compiled->executable->host_fallbacks().size(), 0u);
}

// gpt_train --dropout 0.1's step: the attention nodes carry an RNG state
// and draw their keep mask on chip (AttentionDropout.h), the residual
// dropouts are the standalone dropout program: still nothing on the host,
// and the head permutes still folded.
TEST(NeuronGptStepFallbacks, WithDropoutNothingRunsOnTheHost) {
  const TraceGraph graph = testing::gpt_training_step_graph(5, false, 0.1);
  int attention = 0, dropouts = 0;
  for (const GraphNode& n : graph.nodes) {
    attention += (n.op == OpKind::sdpa || n.op == OpKind::sdpa_grad) &&
                 attr_int_or(n.attrs, AttrName::offset, -1) >= 0;
    dropouts += n.op == OpKind::dropout;
  }
  EXPECT_EQ(attention, 4); // per layer sdpa and sdpa_grad, with dropout
  EXPECT_GT(dropouts, 0);
  Backend& backend = **BackendRegistry::get(DeviceType::neuron);
  absl::StatusOr<CompiledGraph> compiled = compile_graph(graph, backend, {}, RuntimeOptions{});
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const HostFallbackOp& f : compiled->executable->host_fallbacks())
    ADD_FAILURE() << "host fallback: " << op_name(f.op);
  EXPECT_EQ(lowering_stats(*compiled->executable).head_permutes_folded, 16u);
}

} // namespace
} // namespace mstep::neuron
