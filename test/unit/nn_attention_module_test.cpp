// Unit tests for nn::MultiheadAttention's forward: the result against the
// same computation written with ops, the projection paths (self, key is
// value, separate), layouts (batch_first, sequence-first, unbatched), the
// returned weights, PyTorch's mask conventions (bool true = masked out,
// floating = added, key padding, causal) and dropout in train/eval.
// PyTorch itself is the oracle in test/oracle/cases/nn_modules.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::Each;
using ::testing::FloatNear;
using ::testing::Pointwise;

constexpr int64_t B = 2, L = 3, S = 4, E = 4, H = 2;

Tensor f32(std::vector<float> v, Shape s) { return from_vector(v, s); }

Tensor filled(Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return f32(v, s);
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

/// A module with non-zero biases (the default biases are zero, which would
/// hide bias mistakes).
std::shared_ptr<nn::MultiheadAttention> make_mha(nn::MultiheadAttentionOptions o = {}) {
  auto m = std::make_shared<nn::MultiheadAttention>(E, H, o);
  m->in_proj_weight = filled({3 * E, E}, 11);
  if (o.bias) {
    m->in_proj_bias = filled({3 * E}, 12);
    m->out_proj->bias = filled({E}, 13);
  }
  m->out_proj->weight = filled({E, E}, 14);
  return m;
}

/// The twin shares `m`'s parameters (assignment shares the tensors).
void share_parameters(const nn::MultiheadAttention& from, nn::MultiheadAttention& to) {
  to.in_proj_weight = from.in_proj_weight;
  to.in_proj_bias = from.in_proj_bias;
  to.out_proj->weight = from.out_proj->weight;
  to.out_proj->bias = from.out_proj->bias;
}

struct Reference {
  Tensor out, weights;  // weights per head [B, H, L, S]
};

/// Multi-head attention written out with ops, batch-first. `allowed` is in
/// sdpa's convention (true = may attend), broadcastable to [B, H, L, S].
Reference reference(const nn::MultiheadAttention& m, const Tensor& q, const Tensor& k,
                    const Tensor& v, const Tensor& allowed = {}) {
  const int64_t D = E / H;
  auto project = [&](const Tensor& x, int64_t i) {
    Tensor w = slice(m.in_proj_weight, 0, i * E, (i + 1) * E);
    Tensor b = m.in_proj_bias.defined() ? slice(m.in_proj_bias, 0, i * E, (i + 1) * E) : Tensor();
    Tensor y = linear(x, w, b);
    return permute(reshape(y, {x.size(0), x.size(1), H, D}), {0, 2, 1, 3});
  };
  Tensor scores = matmul(project(q, 0), transpose(project(k, 1), -2, -1)) * (1.0 / std::sqrt(D));
  if (allowed.defined()) scores = where(allowed, scores, -std::numeric_limits<double>::infinity());
  Tensor p = softmax(scores, -1);
  Tensor o = reshape(permute(matmul(p, project(v, 2)), {0, 2, 1, 3}), {q.size(0), q.size(1), E});
  return {linear(o, m.out_proj->weight, m.out_proj->bias), p};
}

Tensor causal_allowed(int64_t l, int64_t s) { return tril(ones({l, s}, DType::boolean)); }

TEST(NNMultiheadAttention, SelfAttentionMatchesComposedOps) {
  auto m = make_mha();
  Tensor x = filled({B, L, E}, 1);
  nn::MultiheadAttentionOutput got = m->forward(x, x, x);
  Reference want = reference(*m, x, x, x);
  EXPECT_EQ(got.output.shape(), Shape({B, L, E}));
  EXPECT_EQ(got.weights.shape(), Shape({B, L, L}));
  EXPECT_THAT(values(got.output), Pointwise(FloatNear(1e-5), values(want.out)));
  EXPECT_THAT(values(got.weights), Pointwise(FloatNear(1e-6), values(mean(want.weights, {1}))));
}

TEST(NNMultiheadAttention, ProjectionPathsAgree) {
  auto m = make_mha();
  Tensor q = filled({B, L, E}, 2), kv = filled({B, S, E}, 3), v = filled({B, S, E}, 4);
  // key is value (one fused k/v projection) vs. separate copies.
  Tensor shared = m->forward(q, kv, kv).output;
  Tensor separate = m->forward(q, kv * 1.0, kv * 1.0).output;
  EXPECT_THAT(values(shared), Pointwise(FloatNear(1e-5), values(separate)));
  EXPECT_THAT(values(shared), Pointwise(FloatNear(1e-5), values(reference(*m, q, kv, kv).out)));
  EXPECT_THAT(values(m->forward(q, kv, v).output),
              Pointwise(FloatNear(1e-5), values(reference(*m, q, kv, v).out)));
  // Self-attention (one fused projection) vs. three handles.
  Tensor self = m->forward(q, q, q).output;
  EXPECT_THAT(values(self),
              Pointwise(FloatNear(1e-5), values(m->forward(q, q * 1.0, q * 1.0).output)));
}

TEST(NNMultiheadAttention, LayoutsAgree) {
  auto m = make_mha();
  auto seq_first = std::make_shared<nn::MultiheadAttention>(E, H, true, false);
  share_parameters(*m, *seq_first);
  Tensor q = filled({B, L, E}, 5), kv = filled({B, S, E}, 6);
  nn::MultiheadAttentionOutput bf = m->forward(q, kv, kv);
  nn::MultiheadAttentionOutput sf =
      seq_first->forward(transpose(q, 0, 1), transpose(kv, 0, 1), transpose(kv, 0, 1));
  EXPECT_EQ(sf.output.shape(), Shape({L, B, E}));
  EXPECT_EQ(sf.weights.shape(), Shape({B, L, S}));  // weights stay batch-first, as PyTorch
  EXPECT_THAT(values(transpose(sf.output, 0, 1)), Pointwise(FloatNear(1e-6), values(bf.output)));
  EXPECT_THAT(values(sf.weights), Pointwise(FloatNear(1e-6), values(bf.weights)));

  // Unbatched [L, E] equals batch row 0.
  Tensor q0 = slice(q, 0, 0, 1).squeeze(0), kv0 = slice(kv, 0, 0, 1).squeeze(0);
  nn::MultiheadAttentionOutput ub = m->forward(q0, kv0, kv0);
  EXPECT_EQ(ub.output.shape(), Shape({L, E}));
  EXPECT_EQ(ub.weights.shape(), Shape({L, S}));
  EXPECT_THAT(values(ub.output), Pointwise(FloatNear(1e-6), values(slice(bf.output, 0, 0, 1))));
}

TEST(NNMultiheadAttention, WeightsOptions) {
  auto m = make_mha();
  Tensor q = filled({B, L, E}, 7), kv = filled({B, S, E}, 8);
  nn::MultiheadAttentionForwardOptions o;
  o.average_attn_weights = false;
  nn::MultiheadAttentionOutput per_head = m->forward(q, kv, kv, o);
  EXPECT_EQ(per_head.weights.shape(), Shape({B, H, L, S}));
  EXPECT_THAT(values(sum(per_head.weights, {-1})),
              Pointwise(FloatNear(1e-6), std::vector<float>(B * H * L, 1)));
  EXPECT_THAT(values(per_head.weights),
              Pointwise(FloatNear(1e-6), values(reference(*m, q, kv, kv).weights)));
  o.need_weights = false;
  nn::MultiheadAttentionOutput none = m->forward(q, kv, kv, o);
  EXPECT_FALSE(none.weights.defined());
  EXPECT_THAT(values(none.output), Pointwise(FloatNear(1e-6), values(per_head.output)));
}

TEST(NNMultiheadAttention, CausalMasksFutureKeys) {
  auto m = make_mha();
  Tensor x = filled({B, L, E}, 9);
  nn::MultiheadAttentionForwardOptions o;
  o.is_causal = true;
  o.average_attn_weights = false;
  nn::MultiheadAttentionOutput got = m->forward(x, x, x, o);
  Reference want = reference(*m, x, x, x, causal_allowed(L, L));
  EXPECT_THAT(values(got.output), Pointwise(FloatNear(1e-5), values(want.out)));
  EXPECT_THAT(values(got.weights), Pointwise(FloatNear(1e-6), values(want.weights)));
  EXPECT_THAT(values(where(causal_allowed(L, L), 0.0, got.weights)), Each(0.0f));
}

TEST(NNMultiheadAttention, BoolAttnMaskTrueMeansMaskedOut) {
  auto m = make_mha();
  Tensor q = filled({B, L, E}, 10), kv = filled({B, S, E}, 11);
  // PyTorch's nn.MultiheadAttention convention: true = may NOT attend.
  Tensor masked = from_vector(std::vector<bool>{false, true, false, true,  //
                                                false, false, true, true,  //
                                                true, false, false, false},
                              {L, S});
  nn::MultiheadAttentionForwardOptions o;
  o.attn_mask = masked;
  nn::MultiheadAttentionOutput got = m->forward(q, kv, kv, o);
  Reference want = reference(*m, q, kv, kv, logical_not(masked));
  EXPECT_THAT(values(got.output), Pointwise(FloatNear(1e-5), values(want.out)));
  EXPECT_THAT(values(where(masked, got.weights, 0.0)), Each(0.0f));

  // The same mask as -inf added to the scores, per head ([B * H, L, S]).
  o.attn_mask =
      expand(where(masked, -std::numeric_limits<double>::infinity(), zeros({L, S})), {B * H, L, S});
  EXPECT_THAT(values(m->forward(q, kv, kv, o).output),
              Pointwise(FloatNear(1e-5), values(got.output)));
}

TEST(NNMultiheadAttention, KeyPaddingMaskIgnoresPaddedKeys) {
  auto m = make_mha();
  Tensor q = filled({B, L, E}, 12), kv = filled({B, S, E}, 13);
  // Row 0 has 2 real keys, row 1 all 4.
  Tensor pad =
      from_vector(std::vector<bool>{false, false, true, true, false, false, false, false}, {B, S});
  nn::MultiheadAttentionForwardOptions o;
  o.key_padding_mask = pad;
  nn::MultiheadAttentionOutput got = m->forward(q, kv, kv, o);
  // Row 0 equals attention over its first two keys alone.
  Tensor q0 = slice(q, 0, 0, 1), kv0 = slice(slice(kv, 0, 0, 1), 1, 0, 2);
  EXPECT_THAT(values(slice(got.output, 0, 0, 1)),
              Pointwise(FloatNear(1e-5), values(m->forward(q0, kv0, kv0).output)));
  EXPECT_THAT(values(slice(got.output, 0, 1, 2)),
              Pointwise(FloatNear(1e-5), values(slice(m->forward(q, kv, kv).output, 0, 1, 2))));

  // Combined with causal and a bool mask: every hidden key gets weight 0.
  o.is_causal = true;
  o.attn_mask = from_vector(std::vector<bool>(L * S, false), {L, S});
  o.average_attn_weights = false;
  Tensor w = m->forward(q, kv, kv, o).weights;
  Tensor allowed = logical_and(causal_allowed(L, S), logical_not(reshape(pad, {B, 1, 1, S})));
  EXPECT_THAT(values(where(allowed, 0.0, w)), Each(0.0f));
  EXPECT_THAT(values(m->forward(q, kv, kv, o).output),
              Pointwise(FloatNear(1e-5), values(reference(*m, q, kv, kv, allowed).out)));
}

TEST(NNMultiheadAttention, DropoutOnlyWhileTraining) {
  nn::MultiheadAttentionOptions opts;
  opts.dropout = 0.5;
  auto m = make_mha(opts);
  auto plain = make_mha();
  Tensor x = filled({B, L, E}, 14);
  nn::MultiheadAttentionForwardOptions o;
  o.average_attn_weights = false;
  std::vector<float> train_w = values(m->forward(x, x, x, o).weights);
  EXPECT_THAT(train_w, ::testing::Contains(0.0f));  // dropped, as PyTorch returns them
  m->eval();
  EXPECT_THAT(values(m->forward(x, x, x).output),
              Pointwise(FloatNear(1e-6), values(plain->forward(x, x, x).output)));
}

TEST(NNMultiheadAttention, WithoutBias) {
  nn::MultiheadAttentionOptions opts;
  opts.bias = false;
  auto m = make_mha(opts);
  EXPECT_FALSE(m->in_proj_bias.defined());
  EXPECT_FALSE(m->out_proj->bias.defined());
  Tensor q = filled({B, L, E}, 15), kv = filled({B, S, E}, 16);
  EXPECT_THAT(values(m->forward(q, kv, kv).output),
              Pointwise(FloatNear(1e-5), values(reference(*m, q, kv, kv).out)));
  EXPECT_EQ(
      m->repr(),
      "MultiheadAttention(embed_dim=4, num_heads=2, dropout=0, bias=false, batch_first=true)");
}

}  // namespace
}  // namespace mstep
