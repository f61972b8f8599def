#include "GptMini.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace mstep::examples {

GptBlock::GptBlock(const GptConfig& c) : nn::Module("GptBlock"), config_(c) {
  ln1 = register_module("ln1", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.dim}));
  qkv = register_module("qkv", std::make_shared<nn::Linear>(c.dim, 3 * c.dim));
  proj = register_module("proj", std::make_shared<nn::Linear>(c.dim, c.dim));
  ln2 = register_module("ln2", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.dim}));
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(c.dim, 4 * c.dim));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(4 * c.dim, c.dim));
}

Tensor GptBlock::attention(const Tensor& x, const Tensor& lengths) {
  const int64_t b = x.size(0), s = x.size(1), d = config_.dim, h = config_.heads;
  std::vector<Tensor> parts = chunk((*qkv)(x), 3, /*dim=*/2);
  auto heads = [&](const Tensor& t) { return t.reshape({b, s, h, d / h}).transpose(1, 2); };
  const double p = is_training() ? config_.dropout : 0.0;
  if (config_.explicit_attention) {
    // softmax(q k^T / sqrt(hd) masked) v; the mask keeps causal pairs whose
    // key is inside the row's valid length.
    Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
    Tensor scores = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(d / h)));
    Tensor pos = arange(s, DType::i64);
    Tensor causal = tril(ones({s, s}, DType::boolean));
    Tensor mask = causal;  // undefined lengths: every row is full length
    if (lengths.defined()) {
      Tensor key_valid = lt(pos.unsqueeze(0), lengths.unsqueeze(1));  // [B, S]
      mask = logical_and(causal, key_valid.unsqueeze(1).unsqueeze(1));  // [B, 1, S, S]
    }
    Tensor probs = softmax(where(mask, scores, -HUGE_VAL), -1);
    Tensor out = matmul(dropout(probs, p, p > 0), v);  // [B, H, S, hd]
    return (*proj)(out.transpose(1, 2).reshape({b, s, d}));
  }
  SdpaOptions options;
  options.is_causal = true;
  options.valid_seq_len = lengths;
  options.padding_side = PaddingSide::right;
  options.dropout_p = p;
  Tensor out = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]),
                                            options);  // [B, H, S, hd]
  return (*proj)(out.transpose(1, 2).reshape({b, s, d}));
}

Tensor GptBlock::forward(const Tensor& x, const Tensor& lengths) {
  const double p = is_training() ? config_.dropout : 0.0;
  Tensor y = x + dropout(attention((*ln1)(x), lengths), p, p > 0);
  return y + dropout((*fc2)(gelu((*fc1)((*ln2)(y)))), p, p > 0);
}

GptMini::GptMini(const GptConfig& c) : nn::Module("GptMini"), config_(c) {
  tok_emb = register_module("tok_emb", std::make_shared<nn::Embedding>(c.vocab, c.dim));
  pos_emb = register_module("pos_emb", std::make_shared<nn::Embedding>(c.max_seq, c.dim));
  blocks = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(std::make_shared<GptBlock>(c));
  ln_f = register_module("ln_f", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{c.dim}));
  head = register_module("head", std::make_shared<nn::Linear>(c.dim, c.vocab, /*bias=*/false));
}

Tensor GptMini::forward(const Tensor& tokens, const Tensor& lengths) {
  const int64_t s = tokens.size(1);
  if (s > config_.max_seq)
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("GptMini::forward: sequence length ", s, " exceeds max_seq ",
                     config_.max_seq, ". Cut the batch or build a larger model.")));
  Tensor x = (*tok_emb)(tokens) + (*pos_emb)(arange(s, DType::i64)).unsqueeze(0);
  for (size_t i = 0; i < blocks->size(); ++i) x = blocks->at<GptBlock>(i)->forward(x, lengths);
  return (*head)((*ln_f)(x));
}

}  // namespace mstep::examples
