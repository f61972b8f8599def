// The training steps of the two examples as the cuda tests compile them:
// mnist_mlp's (the MLP with dropout, nll_loss and Adadelta) and GPT-mini's
// as gpt_train runs it (cross-entropy, clip_grad_norm_, AdamW), each the
// graph of the second step (the optimizer state exists), after the fused
// pipeline; and inputs for them.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "examples/models/Mlp.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/mstep.h"
#include "mstep/passes/Pipeline.h"
#include "test/cuda/CudaStepText.h"
#include "test/unit/GptTrainingGraph.h"

namespace mstep::cuda::testing {

/// The graph of mnist_mlp's second training step (Adadelta state exists).
inline TraceGraph mnist_step_graph() {
  manual_seed(7);
  examples::Mlp model;
  optim::Adadelta opt(model.parameters(), {.lr = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    opt.zero_grad();
    std::vector<float> x(32 * 784);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(((i * 31 + k * 7) % 97) / 97.0 - 0.5);
    std::vector<int64_t> y(32);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i * 3 + k) % 10);
    Tensor loss = nll_loss(model.forward(from_vector(x, {32, 784})), from_vector(y, {32}));
    loss.backward();
    opt.step();
    if (k == 1) graph = pending_graph();
    mark_step();
  }
  return graph;
}

/// GPT-mini's second training step as gpt_train runs it.
inline TraceGraph gpt_step_graph() { return mstep::testing::gpt_training_step_graph(3); }

/// The same step under --autocast bf16: bf16 matmuls (cuBLASLt) and
/// attention (cuDNN: head dim 8, right-padded rows).
inline TraceGraph gpt_bf16_step_graph() {
  return mstep::testing::gpt_training_step_graph(3, false, 0.0, DType::bf16);
}

/// The step the GPU check's bench times (gpt_train --autocast bf16 --dim
/// 256 --layers 4 --heads 4 --seq 256 --batch 8 --vocab 1024 --clip 0
/// --padding 0: full-length windows, AdamW lr 3e-4, weight decay 0.1).
inline TraceGraph gpt_bench_bf16_step_graph() {
  manual_seed(3);
  examples::GptMini model(
      examples::GptConfig{.vocab = 1024, .dim = 256, .heads = 4, .layers = 4, .max_seq = 256});
  model.train();
  optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    std::vector<int64_t> tokens(8 * 256), lengths(8, 256);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + k) % 1024);
    Tensor x = from_vector(tokens, {8, 256});
    opt.zero_grad();
    Tensor logits;
    {
      AutocastScope scope(DType::bf16);
      logits = model.forward(x, from_vector(lengths, {8}));
    }
    cross_entropy(logits.reshape({-1, 1024}), x.reshape({-1})).backward();
    opt.step();
    graph = pending_graph();
    mark_step();
  }
  return graph;
}

/// A training step's inputs: floats in (0, 1) (so Adadelta's averages of
/// squares are positive), integers in [1, max_integer] (valid classes or
/// tokens, sequence lengths, a step count, an RNG state), as
/// fuse_optimizer_test feeds its training graphs. With `roles` (the
/// graph's input_roles, parallel to the plan's inputs), the parameters
/// instead are spread over (-0.1, 0.1), centred as an initialized model's
/// weights are: all-positive weights make activations that grow layer by
/// layer, and bf16 roundings with them.
inline std::vector<std::vector<char>> step_inputs(const CudaPlan& plan, int64_t max_integer,
                                                  const std::vector<InputRole>& roles = {}) {
  std::vector<std::vector<char>> inputs;
  for (size_t i = 0; i < plan.num_inputs; ++i) {
    const TensorType& type = plan.values[i];
    std::vector<char> bytes(type.bytes());
    const bool parameter = i < roles.size() && roles[i] == InputRole::parameter;
    for (int64_t k = 0; k < type.numel(); ++k) {
      const double unit = parameter ? ((k * 7919 + i * 104729) % 1009 / 1009.0 - 0.5) * 0.2
                                    : ((k * 13 + i * 7) % 89 + 5) / 100.0;
      if (type.dtype == DType::f32) {
        const float v = static_cast<float>(unit);
        std::memcpy(bytes.data() + k * 4, &v, 4);
      } else if (type.dtype == DType::f64) {
        std::memcpy(bytes.data() + k * 8, &unit, 8);
      } else {
        EXPECT_EQ(type.dtype, DType::i64) << "input " << i;
        const int64_t integer = static_cast<int64_t>((k * 5 + i) % max_integer) + 1;
        std::memcpy(bytes.data() + k * 8, &integer, 8);
      }
    }
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

/// The step of `graph` after the fused pipeline, in `step`'s context.
inline mlir::OwningOpRef<mlir::ModuleOp> pipelined(const TraceGraph& graph, CudaStepContext& step) {
  auto module = import_trace_graph(graph, step.context());
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  mlir::PassManager pm(&step.context());
  passes::build_pipeline(pm, {.fuse = true}, [](mlir::OpPassManager&) {});
  EXPECT_TRUE(mlir::succeeded(pm.run(module->get())));
  return std::move(*module);
}

} // namespace mstep::cuda::testing
