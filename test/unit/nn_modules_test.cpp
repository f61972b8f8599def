// Unit tests for the nn modules (Linear, Embedding, LayerNorm, RMSNorm,
// activations, Dropout, Conv2d, MaxPool2d, Sequential, ModuleList):
// parameter names and shapes against PyTorch, default initialization,
// weight sharing, train()/eval(), and forward values against the ops they
// compose. MultiheadAttention has its own file; errors and gradients too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::f32;
using testing::filled;
using ::testing::FloatNear;
using ::testing::Pointwise;
using testing::values;

using NameShapes = std::vector<std::pair<std::string, Shape>>;

NameShapes name_shapes(const nn::Module& m) {
  NameShapes out;
  for (const auto& [name, t] : m.named_parameters()) out.emplace_back(name, t.shape());
  return out;
}

// ---- Parameter names and shapes ------------------------------------------
// The expected lists were printed by /usr/bin/python3 with torch 1.13:
//   [(n, list(p.shape)) for n, p in module.state_dict().items()]
// for the same constructor arguments, and are hard-coded here.

TEST(NNModuleNames, LinearMatchesPyTorch) {
  EXPECT_EQ(name_shapes(*std::make_shared<nn::Linear>(4, 3)),
            (NameShapes{{"weight", {3, 4}}, {"bias", {3}}}));
  EXPECT_EQ(name_shapes(*std::make_shared<nn::Linear>(4, 3, false)),
            (NameShapes{{"weight", {3, 4}}}));
}

TEST(NNModuleNames, EmbeddingAndNormsMatchPyTorch) {
  EXPECT_EQ(name_shapes(*std::make_shared<nn::Embedding>(10, 5)),
            (NameShapes{{"weight", {10, 5}}}));
  EXPECT_EQ(name_shapes(*std::make_shared<nn::LayerNorm>(std::vector<int64_t>{4, 6})),
            (NameShapes{{"weight", {4, 6}}, {"bias", {4, 6}}}));
  EXPECT_TRUE(
      name_shapes(*std::make_shared<nn::LayerNorm>(std::vector<int64_t>{8}, 1e-5, false)).empty());
  // torch 1.13 has no RMSNorm; torch >= 2.4's nn.RMSNorm([6]) has one
  // parameter "weight" of shape [6].
  EXPECT_EQ(name_shapes(*std::make_shared<nn::RMSNorm>(std::vector<int64_t>{6})),
            (NameShapes{{"weight", {6}}}));
}

TEST(NNModuleNames, Conv2dMatchesPyTorch) {
  // nn.Conv2d(4, 6, 3, groups=2) and nn.Conv2d(3, 8, (3, 5), bias=False).
  EXPECT_EQ(name_shapes(*std::make_shared<nn::Conv2d>(4, 6, 3, 1, 0, 1, 2)),
            (NameShapes{{"weight", {6, 2, 3, 3}}, {"bias", {6}}}));
  EXPECT_EQ(name_shapes(*std::make_shared<nn::Conv2d>(3, 8, nn::Size2d{3, 5}, 1, 0, 1, 1, false)),
            (NameShapes{{"weight", {8, 3, 3, 5}}}));
}

TEST(NNModuleNames, MultiheadAttentionMatchesPyTorch) {
  // nn.MultiheadAttention(8, 2, batch_first=True), with and without bias.
  EXPECT_EQ(name_shapes(*std::make_shared<nn::MultiheadAttention>(8, 2)),
            (NameShapes{{"in_proj_weight", {24, 8}},
                        {"in_proj_bias", {24}},
                        {"out_proj.weight", {8, 8}},
                        {"out_proj.bias", {8}}}));
  EXPECT_EQ(name_shapes(*std::make_shared<nn::MultiheadAttention>(8, 2, false)),
            (NameShapes{{"in_proj_weight", {24, 8}}, {"out_proj.weight", {8, 8}}}));
}

TEST(NNModuleNames, ContainersNumberTheirChildren) {
  // nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 2)).
  auto seq = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::Linear>(8, 2));
  EXPECT_EQ(
      name_shapes(*seq),
      (NameShapes{{"0.weight", {8, 4}}, {"0.bias", {8}}, {"3.weight", {2, 8}}, {"3.bias", {2}}}));
  // nn.ModuleList([nn.Linear(2, 2), nn.LayerNorm(2)]).
  auto list = std::make_shared<nn::ModuleList>(
      std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::LayerNorm>(std::vector<int64_t>{2}));
  EXPECT_EQ(
      name_shapes(*list),
      (NameShapes{{"0.weight", {2, 2}}, {"0.bias", {2}}, {"1.weight", {2}}, {"1.bias", {2}}}));
  std::vector<std::string> keys;
  for (const auto& [k, t] : list->state_dict()) keys.push_back(k);
  EXPECT_THAT(keys, ElementsAre("0.bias", "0.weight", "1.bias", "1.weight"));
  std::vector<std::string> children;
  for (const auto& [name, child] : seq->named_children()) children.push_back(name);
  EXPECT_THAT(children, ElementsAre("0", "1", "2", "3"));
}

TEST(NNModuleNames, ParametersAreLeavesThatRequireGrad) {
  auto mha = std::make_shared<nn::MultiheadAttention>(4, 2);
  for (const Tensor& p : mha->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
    EXPECT_EQ(p.dtype(), DType::f32);
  }
}

// ---- Default initialization -----------------------------------------------

/// Every value lies in [-bound, bound] and, with enough of them, they spread
/// over most of it: n uniform values all miss [-bound, -0.7 bound] with
/// probability 0.85^n (0.5% at n = 32, whatever ran before; 1e-14 at 200).
void expect_uniform(const Tensor& t, double bound) {
  std::vector<float> v = values(t);
  float lo = v[0], hi = v[0];
  for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  if (v.size() < 200) return;
  EXPECT_LT(lo, -0.7 * bound);
  EXPECT_GT(hi, 0.7 * bound);
}

TEST(NNModuleInit, LinearAndConvAreKaimingUniform) {
  auto lin = std::make_shared<nn::Linear>(16, 32);
  expect_uniform(lin->weight, 0.25);  // 1/sqrt(16)
  expect_uniform(lin->bias, 0.25);
  // fan_in = in / groups * kh * kw = 4 / 2 * 3 * 3 = 18.
  auto conv = std::make_shared<nn::Conv2d>(4, 64, 3, 1, 0, 1, 2);
  expect_uniform(conv->weight, 1 / std::sqrt(18.0));
  expect_uniform(conv->bias, 1 / std::sqrt(18.0));
  // Two modules draw different numbers.
  auto other = std::make_shared<nn::Linear>(16, 32);
  EXPECT_NE(values(lin->weight), values(other->weight));
}

TEST(NNModuleInit, EmbeddingIsStandardNormal) {
  auto emb = std::make_shared<nn::Embedding>(100, 50);
  std::vector<float> v = values(emb->weight);
  double mean = 0, sq = 0;
  for (float x : v) mean += x, sq += x * x;
  mean /= v.size();
  const double var = sq / v.size() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(var, 1.0, 0.1);
}

TEST(NNModuleInit, NormsStartAsIdentity) {
  auto ln = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{2, 3});
  EXPECT_THAT(values(ln->weight), ::testing::Each(1.0f));
  EXPECT_THAT(values(ln->bias), ::testing::Each(0.0f));
  auto rms = std::make_shared<nn::RMSNorm>(std::vector<int64_t>{3});
  EXPECT_THAT(values(rms->weight), ElementsAre(1.0f, 1.0f, 1.0f));
}

TEST(NNModuleInit, MultiheadAttentionMatchesPyTorchScheme) {
  // xavier_uniform_ on in_proj_weight, zero biases, Linear init on out_proj.
  auto mha = std::make_shared<nn::MultiheadAttention>(16, 4);
  expect_uniform(mha->in_proj_weight, std::sqrt(6.0 / (16 + 48)));
  EXPECT_THAT(values(mha->in_proj_bias), ::testing::Each(0.0f));
  EXPECT_THAT(values(mha->out_proj->bias), ::testing::Each(0.0f));
  expect_uniform(mha->out_proj->weight, 0.25);
}

TEST(NNModuleInit, ResetParametersKeepsTheHandle) {
  auto lin = std::make_shared<nn::Linear>(8, 8);
  Tensor held = lin->weight;
  std::vector<float> before = values(held);
  lin->reset_parameters();
  EXPECT_EQ(held.impl(), lin->weight.impl());
  EXPECT_TRUE(lin->weight.requires_grad());
  EXPECT_NE(values(held), before);
}

// ---- Weight sharing -------------------------------------------------------

TEST(NNModuleSharing, AssignedWeightIsListedOnceAndUpdatedForBoth) {
  auto a = std::make_shared<nn::Linear>(3, 3);
  auto b = std::make_shared<nn::Linear>(3, 3);
  b->weight = a->weight;
  auto seq = std::make_shared<nn::Sequential>(a, b);
  std::vector<std::string> names;
  for (const auto& [name, t] : seq->named_parameters()) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("0.weight", "0.bias", "1.bias"));
  EXPECT_EQ(seq->parameters().size(), 3u);

  // An SGD-like in-place update through the one tensor reaches both.
  std::vector<float> w0 = values(a->weight);
  {
    NoGradGuard no_grad;
    Tensor w = seq->parameters()[0];  // the optimizer's view: one handle
    w.copy_(w - 0.5 * ones({3, 3}));
  }
  mark_step();
  std::vector<float> want(w0);
  for (float& x : want) x -= 0.5f;
  EXPECT_THAT(values(a->weight), Pointwise(FloatNear(1e-6), want));
  EXPECT_THAT(values(b->weight), Pointwise(FloatNear(1e-6), want));
  Tensor x = filled({2, 3}, 1);
  EXPECT_THAT(values(b->forward(x)),
              Pointwise(FloatNear(1e-5), values(matmul(x, transpose(a->weight, 0, 1)) + b->bias)));
}

TEST(NNModuleSharing, TiedEmbeddingAndOutputProjection) {
  // The GPT pattern: the output Linear reuses the embedding table.
  auto emb = std::make_shared<nn::Embedding>(7, 4);
  auto head = std::make_shared<nn::Linear>(4, 7, false);
  head->weight = emb->weight;
  auto list = std::make_shared<nn::ModuleList>(emb, head);
  EXPECT_EQ(name_shapes(*list), (NameShapes{{"0.weight", {7, 4}}}));
  EXPECT_EQ(list->state_dict().size(), 2u);  // state_dict keeps both names, as PyTorch
}

// ---- train() / eval() -----------------------------------------------------

TEST(NNModuleModes, TrainAndEvalPropagateAndSwitchDropout) {
  auto inner = std::make_shared<nn::Sequential>(std::make_shared<nn::Dropout>(0.5));
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2), inner);
  auto drop = inner->at<nn::Dropout>(0);
  EXPECT_TRUE(drop->is_training());
  Tensor x = ones({4000});
  std::vector<float> trained = values(drop->forward(x));
  int zeros_seen = 0;
  for (float v : trained) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros_seen += v == 0.0f;
  }
  EXPECT_GT(zeros_seen, 1700);
  EXPECT_LT(zeros_seen, 2300);

  seq->eval();
  EXPECT_FALSE(seq->is_training());
  EXPECT_FALSE(inner->is_training());
  EXPECT_FALSE(drop->is_training());
  EXPECT_THAT(values(drop->forward(x)), ::testing::Each(1.0f));
  EXPECT_THAT(values(inner->forward(x)), ::testing::Each(1.0f));

  seq->train();
  EXPECT_TRUE(drop->is_training());
  EXPECT_THAT(values(drop->forward(x)), ::testing::Contains(0.0f));
}

TEST(NNModuleModes, DropoutWithZeroProbabilityIsIdentity) {
  auto drop = std::make_shared<nn::Dropout>(0.0);
  Tensor x = filled({3, 4}, 2);
  EXPECT_EQ(values(drop->forward(x)), values(x));
}

// ---- Forward values --------------------------------------------------------

TEST(NNModuleForward, LinearHandComputed) {
  auto lin = std::make_shared<nn::Linear>(2, 3);
  lin->weight = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  lin->bias = f32({0.5, -1, 0}, {3});
  // [1, 1] -> [1 + 2 + 0.5, 3 + 4 - 1, 5 + 6]; [2, 0] -> [2.5, 5, 10].
  EXPECT_THAT(values((*lin)(f32({1, 1, 2, 0}, {2, 2}))), ElementsAre(3.5, 6, 11, 2.5, 5, 10));
  EXPECT_EQ(lin->forward(f32({1, 1}, {2})).shape(), Shape({3}));  // 1-D input
  Tensor x = filled({2, 5, 2}, 3);
  EXPECT_EQ(lin->forward(x).shape(), Shape({2, 5, 3}));
}

TEST(NNModuleForward, EmbeddingPicksRows) {
  auto emb = std::make_shared<nn::Embedding>(3, 2);
  emb->weight = f32({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor idx = from_vector(std::vector<int64_t>{2, 0, 2, 1}, {2, 2});
  Tensor y = emb->forward(idx);
  EXPECT_EQ(y.shape(), Shape({2, 2, 2}));
  EXPECT_THAT(values(y), ElementsAre(20, 21, 0, 1, 20, 21, 10, 11));
}

TEST(NNModuleForward, LayerNormAndRMSNorm) {
  auto ln = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{3}, 0.0);
  // [1, 2, 3]: mean 2, variance 2/3 -> [-1, 0, 1] * sqrt(3/2).
  const float s = std::sqrt(1.5f);
  EXPECT_THAT(values(ln->forward(f32({1, 2, 3}, {1, 3}))),
              Pointwise(FloatNear(1e-5), {-s, 0.0f, s}));
  ln->weight = f32({1, 2, 3}, {3});
  ln->bias = f32({0, 0, 1}, {3});
  EXPECT_THAT(values(ln->forward(f32({1, 2, 3}, {3}))),
              Pointwise(FloatNear(1e-5), {-s, 0.0f, 3 * s + 1}));

  auto ln2 = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{2, 3});
  Tensor x = filled({4, 2, 3}, 4);
  EXPECT_THAT(values(ln2->forward(x)),
              Pointwise(FloatNear(1e-6), values(layer_norm(x, {2, 3}, ln2->weight, ln2->bias))));

  auto rms = std::make_shared<nn::RMSNorm>(std::vector<int64_t>{2}, 0.0);
  rms->weight = f32({1, 10}, {2});
  // [3, 4]: rms = sqrt(12.5).
  const float r = std::sqrt(12.5f);
  EXPECT_THAT(values(rms->forward(f32({3, 4}, {1, 2}))),
              Pointwise(FloatNear(1e-5), {3 / r, 40 / r}));
  auto rms_default = std::make_shared<nn::RMSNorm>(std::vector<int64_t>{3}, std::nullopt, false);
  EXPECT_THAT(values(rms_default->forward(x.reshape({8, 3}))),
              Pointwise(FloatNear(1e-6), values(rms_norm(x.reshape({8, 3}), {3}))));
}

TEST(NNModuleForward, Activations) {
  Tensor x = f32({-2, -0.5, 0, 0.5, 2}, {5});
  EXPECT_THAT(values(std::make_shared<nn::ReLU>()->forward(x)), ElementsAre(0, 0, 0, 0.5, 2));
  EXPECT_EQ(values(std::make_shared<nn::GELU>()->forward(x)), values(gelu(x)));
  EXPECT_EQ(values(std::make_shared<nn::GELU>("tanh")->forward(x)), values(gelu(x, "tanh")));
  EXPECT_NE(values(gelu(x)), values(gelu(x, "tanh")));
  std::vector<float> silu_want;
  for (float v : values(x)) silu_want.push_back(v / (1 + std::exp(-v)));
  EXPECT_THAT(values(std::make_shared<nn::SiLU>()->forward(x)),
              Pointwise(FloatNear(1e-6), silu_want));
}

TEST(NNModuleForward, Conv2dMatchesTheOpAndAcceptsUnbatchedInput) {
  auto conv = std::make_shared<nn::Conv2d>(4, 6, nn::Size2d{3, 2}, nn::Size2d{2, 1}, 1,
                                           nn::Size2d{1, 2}, 2);
  Tensor x = filled({2, 4, 7, 8}, 5);
  Tensor y = conv->forward(x);
  Tensor want = conv2d(x, conv->weight, conv->bias, {2, 1}, {1, 1}, {1, 2}, 2);
  EXPECT_EQ(y.shape(), want.shape());
  EXPECT_EQ(values(y), values(want));
  Tensor y0 = conv->forward(slice(x, 0, 0, 1).squeeze(0));
  EXPECT_EQ(y0.shape(), Shape({6, 4, 8}));
  EXPECT_THAT(values(y0), Pointwise(FloatNear(1e-6), values(slice(y, 0, 0, 1))));
}

TEST(NNModuleForward, Conv2dHandComputed) {
  // 1x1 input channel, 2x2 kernel of ones, bias 1: sums of 2x2 windows + 1.
  auto conv = std::make_shared<nn::Conv2d>(1, 1, 2);
  conv->weight = ones({1, 1, 2, 2});
  conv->bias = f32({1}, {1});
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3});
  EXPECT_THAT(values(conv->forward(x)), ElementsAre(13, 17, 25, 29));
}

TEST(NNModuleForward, MaxPool2d) {
  Tensor x = f32({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {1, 1, 4, 4});
  auto pool = std::make_shared<nn::MaxPool2d>(2);  // stride defaults to the kernel
  EXPECT_THAT(values(pool->forward(x)), ElementsAre(6, 8, 14, 16));
  auto overlapping = std::make_shared<nn::MaxPool2d>(3, nn::Size2d{1, 1}, 1);
  Tensor y = overlapping->forward(x);
  EXPECT_EQ(y.shape(), Shape({1, 1, 4, 4}));
  EXPECT_EQ(values(y), values(max_pool2d(x, {3}, {1}, {1})));
  EXPECT_EQ(pool->forward(x.squeeze(0)).shape(), Shape({1, 2, 2}));  // unbatched
}

// ---- Containers -----------------------------------------------------------

TEST(NNModuleContainers, SequentialAppliesLayersInOrder) {
  auto l1 = std::make_shared<nn::Linear>(3, 5);
  auto l2 = std::make_shared<nn::Linear>(5, 2);
  auto seq = std::make_shared<nn::Sequential>(l1, std::make_shared<nn::GELU>());
  seq->push_back(l2);
  EXPECT_EQ(seq->size(), 3u);
  Tensor x = filled({4, 3}, 6);
  EXPECT_THAT(values((*seq)(x)),
              Pointwise(FloatNear(1e-6), values(l2->forward(gelu(l1->forward(x))))));
  EXPECT_EQ((*seq)[0], l1);
  EXPECT_EQ(seq->at<nn::Linear>(2), l2);
  int n = 0;
  for (const auto& layer : *seq) n += layer != nullptr;
  EXPECT_EQ(n, 3);
  EXPECT_EQ(
      seq->repr(),
      "Sequential(Linear(in_features=3, out_features=5, bias=true), GELU(approximate='none'), "
      "Linear(in_features=5, out_features=2, bias=true))");

  // Nested Sequentials are layers too; an empty one passes the input through.
  auto outer = std::make_shared<nn::Sequential>(seq, std::make_shared<nn::Sequential>());
  EXPECT_EQ(values(outer->forward(x)), values(seq->forward(x)));
  EXPECT_EQ(name_shapes(*outer)[0].first, "0.0.weight");
}

TEST(NNModuleContainers, ModuleListIndexesAndIterates) {
  auto list = std::make_shared<nn::ModuleList>();
  EXPECT_TRUE(list->empty());
  for (int i = 0; i < 3; ++i) list->push_back(std::make_shared<nn::Linear>(2, 2));
  list->push_back(std::make_shared<nn::MultiheadAttention>(2, 1));
  EXPECT_EQ(list->size(), 4u);
  Tensor x = filled({1, 2}, 7);
  for (size_t i = 0; i < 3; ++i) x = list->at<nn::Linear>(i)->forward(x);
  EXPECT_EQ(x.shape(), Shape({1, 2}));
  EXPECT_EQ(list->at<nn::MultiheadAttention>(3)->embed_dim(), 2);
  EXPECT_EQ(name_shapes(*list).back().first, "3.out_proj.bias");
  size_t n = 0;
  for (const auto& m : *list) n += m->parameters().size();
  EXPECT_EQ(n, 10u);
}

}  // namespace
}  // namespace mstep
