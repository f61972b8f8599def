// A small decoder-only transformer (GPT): token and position embeddings,
// pre-norm blocks of causal self-attention and a GELU MLP, a final
// LayerNorm and an output head without bias. Parameter names match the
// PyTorch model in test/oracle/training/make_training_cases.py
// (tok_emb.weight, blocks.0.qkv.weight, ..., head.weight), so weights
// written by PyTorch load as is.
//
// Sequences are right-padded: `lengths` [B] gives each row's valid length;
// padded keys are never attended to and padded query rows produce zeros
// (scaled_dot_product_attention's valid_seq_len). Undefined `lengths`: every
// row is full length.
#pragma once

#include <cstdint>
#include <memory>

#include "mstep/mstep.h"

namespace mstep::examples {

struct GptConfig {
  int64_t vocab = 96;
  int64_t dim = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t max_seq = 32;
  double dropout = 0.0;  // on attention probabilities and residual branches
  /// Write attention out as matmul -> scale -> mask -> softmax -> dropout ->
  /// matmul instead of calling scaled_dot_product_attention: the form a
  /// model ported from hand-written PyTorch has, which the compiler's
  /// mstep-fuse-attention pass turns back into one fused op. Padded query
  /// rows then attend to the valid keys instead of producing zeros; the
  /// loss ignores them either way.
  bool explicit_attention = false;
};

class GptBlock : public nn::Module {
 public:
  explicit GptBlock(const GptConfig& config);

  /// x [B, S, dim], lengths i64 [B] -> [B, S, dim].
  Tensor forward(const Tensor& x, const Tensor& lengths);

  std::shared_ptr<nn::LayerNorm> ln1;
  std::shared_ptr<nn::Linear> qkv;
  std::shared_ptr<nn::Linear> proj;
  std::shared_ptr<nn::LayerNorm> ln2;
  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Linear> fc2;

 private:
  Tensor attention(const Tensor& x, const Tensor& lengths);
  GptConfig config_;
};

class GptMini : public nn::Module {
 public:
  explicit GptMini(const GptConfig& config);

  /// tokens i64 [B, S] (S <= max_seq), lengths i64 [B] or undefined -> logits [B, S, vocab].
  Tensor forward(const Tensor& tokens, const Tensor& lengths);

  const GptConfig& config() const { return config_; }

  std::shared_ptr<nn::Embedding> tok_emb;
  std::shared_ptr<nn::Embedding> pos_emb;
  std::shared_ptr<nn::ModuleList> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;

 private:
  GptConfig config_;
};

}  // namespace mstep::examples
