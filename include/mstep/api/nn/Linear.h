// nn::Linear and nn::Embedding, with PyTorch's parameter names, layouts and
// default initialization, so a PyTorch state_dict maps onto them 1:1.
#pragma once

#include <cstdint>
#include <string>

#include "mstep/api/nn/Layer.h"

namespace mstep::nn {

/// y = x @ weight^T + bias. weight [out_features, in_features] and bias
/// [out_features], both drawn from U(-1/sqrt(in), 1/sqrt(in)) as
/// torch.nn.Linear's kaiming_uniform_(a=sqrt(5)) does.
class Linear : public Layer {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);

  /// x [*, in_features] -> [*, out_features].
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  /// Draws fresh initial values in place (the tensors stay the same handles).
  void reset_parameters();

  int64_t in_features() const { return in_features_; }
  int64_t out_features() const { return out_features_; }

  Tensor weight;
  Tensor bias;  // undefined without bias

 private:
  int64_t in_features_, out_features_;
  bool with_bias_;
};

/// A lookup table: integer indices [*] -> rows of weight [*, embedding_dim].
/// weight [num_embeddings, embedding_dim] starts as N(0, 1), as PyTorch.
class Embedding : public Layer {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);

  Tensor forward(const Tensor& indices) override;
  std::string repr() const override;
  void reset_parameters();

  int64_t num_embeddings() const { return num_embeddings_; }
  int64_t embedding_dim() const { return embedding_dim_; }

  Tensor weight;

 private:
  int64_t num_embeddings_, embedding_dim_;
};

}  // namespace mstep::nn
