// GPT-mini's second training step as gpt_train runs it (cross-entropy,
// clip_grad_norm_(1.0), AdamW with weight decay): the graph in which the
// parameters and the optimizer state are arguments; with `ddp`, under
// nn::DistributedDataParallel as gpt_train --ddp runs it; with `dropout`, as
// gpt_train --dropout (attention probabilities and residual branches); with `autocast`, as
// gpt_train --autocast bf16|f16 (the forward under mstep::autocast). Shared by the tests
// that compile a whole training step (fuse-optimizer, cuda coverage).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "examples/models/GptMini.h"
#include "mstep/mstep.h"

namespace mstep::testing {

inline TraceGraph gpt_training_step_graph(uint64_t seed, bool ddp = false, double dropout = 0.0,
                                          std::optional<DType> autocast = std::nullopt) {
  manual_seed(seed);
  examples::GptMini model(examples::GptConfig{
      .vocab = 96, .dim = 32, .heads = 4, .layers = 2, .max_seq = 16, .dropout = dropout});
  model.train();
  // gpt_train --ddp: default buckets (rebuilt after the first step).
  std::optional<nn::DistributedDataParallel> wrapper;
  if (ddp) wrapper.emplace(model);
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    std::vector<int64_t> tokens(4 * 16), lengths = {16, 12, 9, 16};
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + k) % 96);
    Tensor x = from_vector(tokens, {4, 16});
    opt.zero_grad();
    Tensor logits;
    {
      std::optional<AutocastScope> scope;
      if (autocast) scope.emplace(*autocast);
      logits = model.forward(x, from_vector(lengths, {4}));
    }
    cross_entropy(logits.reshape({-1, 96}), x.reshape({-1})).backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    graph = pending_graph();
    mark_step();
  }
  return graph;
}

} // namespace mstep::testing
