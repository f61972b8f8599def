// GPT-mini's first training steps as gpt_train takes them (vocab 40, dim
// 32, 4 heads, 2 layers, 4 sequences of 16 tokens with lengths 16, 12, 9
// and 16; cross-entropy, clip_grad_norm_(1.0), AdamW lr 3e-3 with weight
// decay 0.1), on one device and optionally under autocast: the losses.
// Shared by the tests that compare a backend's training with another's.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "examples/models/GptMini.h"
#include "mstep/mstep.h"

namespace mstep::testing {

/// `steps` steps from seed 3; `after_step(step)` runs after each step's
/// mark_step (to check the step's graph).
inline std::vector<float>
gpt_training_losses(Device device, std::optional<DType> autocast, int steps = 3,
                    const std::function<void(int)>& after_step = {}) {
  const Device saved = default_device();
  set_default_device(device);
  manual_seed(3);
  examples::GptMini model(
      examples::GptConfig{.vocab = 40, .dim = 32, .heads = 4, .layers = 2, .max_seq = 16});
  model.train();
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  std::vector<float> losses;
  for (int step = 0; step < steps; ++step) {
    std::vector<int64_t> tokens(4 * 16);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = static_cast<int64_t>((i * 7 + step) % 40);
    Tensor x = from_vector(tokens, {4, 16});
    opt.zero_grad();
    Tensor logits;
    {
      std::optional<AutocastScope> scope;
      if (autocast) scope.emplace(*autocast);
      logits = model.forward(x, from_vector(std::vector<int64_t>{16, 12, 9, 16}, {4}));
    }
    Tensor loss = cross_entropy(logits.reshape({-1, 40}), x.reshape({-1}));
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    mark_step();
    if (after_step) after_step(step);
    losses.push_back(loss.to(DType::f32).item());
  }
  set_default_device(saved);
  return losses;
}

} // namespace mstep::testing
