// nn::Linear and nn::Embedding.
#include "mstep/api/nn/Linear.h"

#include "lib/api/nn/Init.h"
#include "lib/api/nn/ModuleChecks.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/ShapeOps.h"

namespace mstep::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias)
    : Layer("Linear"), in_features_(in_features), out_features_(out_features),
      with_bias_(with_bias) {
  checks::require_positive(*this, "in_features", in_features);
  checks::require_positive(*this, "out_features", out_features);
  const double bound = init::kaiming_bound(in_features);
  weight = init::uniform({out_features, in_features}, bound);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = init::uniform({out_features}, bound);
    register_parameter("bias", bias);
  }
}

void Linear::reset_parameters() {
  const double bound = init::kaiming_bound(in_features_);
  init::assign(weight, init::uniform(weight.shape(), bound));
  if (bias.defined()) init::assign(bias, init::uniform(bias.shape(), bound));
}

std::string Linear::repr() const {
  return absl::StrCat("Linear(in_features=", in_features_, ", out_features=", out_features_,
                      ", bias=", with_bias_ ? "true" : "false", ")");
}

Tensor Linear::forward(const Tensor& input) {
  checks::require_defined(*this, input, "input");
  if (input.dim() < 1 || input.size(-1) != in_features_)
    checks::fail(
        *this,
        absl::StrCat("expected input of shape [*, ", in_features_, "] (last dim = in_features)"),
        checks::describe(input),
        "Reshape the input so its last dim holds the features, or build the "
        "Linear with a matching in_features.");
  return linear(input, weight, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim)
    : Layer("Embedding"), num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {
  checks::require_positive(*this, "num_embeddings", num_embeddings);
  checks::require_positive(*this, "embedding_dim", embedding_dim);
  {
    NoGradGuard no_grad;
    weight = randn({num_embeddings, embedding_dim}).detach();
  }
  register_parameter("weight", weight);
}

void Embedding::reset_parameters() {
  NoGradGuard no_grad;
  weight.copy_(randn(weight.shape()));
}

std::string Embedding::repr() const {
  return absl::StrCat("Embedding(", num_embeddings_, ", ", embedding_dim_, ")");
}

Tensor Embedding::forward(const Tensor& indices) {
  checks::require_defined(*this, indices, "indices");
  if (!is_integral(indices.dtype()))
    checks::fail(*this, "expected integer indices (i32 or i64)", checks::describe(indices),
                 "Convert the indices with to(mstep::DType::i64).");
  return embedding(indices, weight);
}

}  // namespace mstep::nn
