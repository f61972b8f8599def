// nn::MultiheadAttention with PyTorch's parameter layout (in_proj_weight
// [3E, E], in_proj_bias [3E], out_proj.weight [E, E], out_proj.bias [E])
// and mask conventions, built on scaled_dot_product_attention.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mstep/api/nn/Linear.h"
#include "mstep/api/nn/Module.h"

namespace mstep::nn {

struct MultiheadAttentionOptions {
  /// Dropout on the attention probabilities while training.
  double dropout = 0.0;
  bool bias = true;
  /// Inputs are [B, L, E]; false: [L, B, E]. Unlike PyTorch, true by
  /// default, since batch-first is what the rest of mstep uses.
  bool batch_first = true;
};

/// The arguments of forward() after query, key and value. The masks follow
/// torch.nn.MultiheadAttention, the OPPOSITE of
/// scaled_dot_product_attention's bool convention: here true means "may
/// NOT attend".
struct MultiheadAttentionForwardOptions {
  /// [B, S] (or [S] unbatched): bool, true = a padding key to ignore; or
  /// floating, added to the scores.
  Tensor key_padding_mask;
  /// Return the attention probabilities (after dropout) as well.
  bool need_weights = true;
  /// [L, S] or [B * num_heads, L, S]: bool, true = not allowed to attend;
  /// or floating, added to the scores.
  Tensor attn_mask;
  /// Average the returned weights over heads ([B, L, S]) rather than
  /// returning them per head ([B, num_heads, L, S]).
  bool average_attn_weights = true;
  /// Query i attends to keys 0..i only. Combines with the masks above
  /// (PyTorch >= 2.0 treats is_causal only as a hint about attn_mask).
  bool is_causal = false;
};

struct MultiheadAttentionOutput {
  Tensor output;   // [B, L, E] (or [L, B, E], or [L, E] unbatched)
  Tensor weights;  // undefined unless need_weights
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias = true,
                     bool batch_first = true);
  MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                     const MultiheadAttentionOptions& options);

  /// query [B, L, E], key and value [B, S, E] (batch_first), or the same
  /// without B (unbatched). Passing one tensor as query, key and value
  /// projects it with a single matmul.
  MultiheadAttentionOutput forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const MultiheadAttentionForwardOptions& options = {});
  MultiheadAttentionOutput operator()(const Tensor& query, const Tensor& key, const Tensor& value,
                                      const MultiheadAttentionForwardOptions& options = {}) {
    return forward(query, key, value, options);
  }
  std::string repr() const;
  /// in_proj_weight xavier-uniform, biases zero, out_proj.weight as Linear.
  void reset_parameters();

  int64_t embed_dim() const { return embed_dim_; }
  int64_t num_heads() const { return num_heads_; }
  int64_t head_dim() const { return embed_dim_ / num_heads_; }
  const MultiheadAttentionOptions& options() const { return options_; }

  Tensor in_proj_weight;  // [3E, E]: the q, k and v projections stacked
  Tensor in_proj_bias;    // [3E], undefined without bias
  std::shared_ptr<Linear> out_proj;

 private:
  double xavier_bound() const;
  int64_t embed_dim_, num_heads_;
  MultiheadAttentionOptions options_;
};

}  // namespace mstep::nn
