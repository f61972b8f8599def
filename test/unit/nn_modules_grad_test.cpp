// Gradient tests for the nn modules: parameter gradients reach the
// registered tensors with their shapes and hand-checked values, a shared
// weight accumulates the gradient of every use, zero_grad clears them, and
// a few SGD steps on a small Sequential lower the loss.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using testing::f32;
using testing::filled;
using ::testing::FloatNear;
using ::testing::Pointwise;
using testing::values;

/// Every parameter has a gradient of its own shape.
void expect_all_grads(const nn::Module& m) {
  for (const auto& [name, p] : m.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().shape(), p.shape()) << name;
  }
}

/// One SGD step on every parameter, outside autograd, keeping the handles.
void sgd_step(const nn::Module& m, double lr) {
  NoGradGuard no_grad;
  for (Tensor p : m.parameters()) p.copy_(p - lr * p.grad());
}

TEST(NNModuleGrad, LinearHandChecked) {
  auto lin = std::make_shared<nn::Linear>(2, 3);
  Tensor x = f32({1, 2, 3, 4}, {2, 2});
  sum(lin->forward(x)).backward();
  // dL/dW[o, i] = sum_b x[b, i]; dL/db = batch size.
  EXPECT_THAT(values(lin->weight.grad()), ElementsAre(4, 6, 4, 6, 4, 6));
  EXPECT_THAT(values(lin->bias.grad()), ElementsAre(2, 2, 2));
  lin->zero_grad();
  EXPECT_FALSE(lin->weight.grad().defined());
}

TEST(NNModuleGrad, SharedWeightAccumulatesBothUses) {
  auto a = std::make_shared<nn::Linear>(3, 3);
  auto b = std::make_shared<nn::Linear>(3, 3);
  b->weight = a->weight;
  auto tied = std::make_shared<nn::Sequential>(a, b);
  // Untied twin with the same values: its two weight grads must add up to
  // the tied weight's grad.
  auto a2 = std::make_shared<nn::Linear>(3, 3);
  auto b2 = std::make_shared<nn::Linear>(3, 3);
  {
    NoGradGuard no_grad;
    a2->weight.copy_(a->weight * 1.0);
    b2->weight.copy_(a->weight * 1.0);
    a2->bias.copy_(a->bias * 1.0);
    b2->bias.copy_(b->bias * 1.0);
  }
  auto untied = std::make_shared<nn::Sequential>(a2, b2);
  Tensor x = filled({4, 3}, 1);
  sum(tied->forward(x) * tied->forward(x)).backward();
  sum(untied->forward(x) * untied->forward(x)).backward();
  std::vector<float> want = values(a2->weight.grad() + b2->weight.grad());
  EXPECT_THAT(values(a->weight.grad()), Pointwise(FloatNear(1e-4), want));

  // The SGD update through parameters() moves the one tensor both use.
  std::vector<float> before = values(a->weight);
  sgd_step(*tied, 0.1);
  mark_step();
  std::vector<float> after = values(b->weight);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i] - 0.1 * want[i], 1e-4);
  EXPECT_EQ(values(a->weight), after);
}

TEST(NNModuleGrad, EmbeddingSumsRepeatedRows) {
  auto emb = std::make_shared<nn::Embedding>(4, 2);
  Tensor idx = from_vector(std::vector<int64_t>{1, 3, 1}, {3});
  sum(emb->forward(idx)).backward();
  EXPECT_THAT(values(emb->weight.grad()), ElementsAre(0, 0, 2, 2, 0, 0, 1, 1));
}

TEST(NNModuleGrad, NormsAndConvReachEveryParameter) {
  auto ln = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{4});
  auto rms = std::make_shared<nn::RMSNorm>(std::vector<int64_t>{4});
  auto conv = std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1, 1, 2);
  auto pool = std::make_shared<nn::MaxPool2d>(2);
  Tensor img = filled({1, 2, 4, 4}, 2).requires_grad_();
  Tensor y = pool->forward(conv->forward(img));  // [1, 4, 2, 2]
  Tensor z = rms->forward(ln->forward(reshape(y, {4, 4})));
  sum(z * filled({4, 4}, 3)).backward();
  expect_all_grads(*ln);
  expect_all_grads(*rms);
  expect_all_grads(*conv);
  EXPECT_EQ(img.grad().shape(), img.shape());
  // LayerNorm's bias gradient is the upstream gradient summed over rows.
  EXPECT_EQ(ln->bias.grad().shape(), Shape({4}));
}

TEST(NNModuleGrad, MultiheadAttentionReachesEveryParameter) {
  auto m = std::make_shared<nn::MultiheadAttention>(4, 2);
  Tensor q = filled({2, 3, 4}, 4).requires_grad_();
  Tensor kv = filled({2, 5, 4}, 5);
  nn::MultiheadAttentionForwardOptions o;
  o.key_padding_mask = from_vector(
      std::vector<bool>{false, false, false, true, true, false, false, false, false, false},
      {2, 5});
  o.is_causal = true;
  o.need_weights = false;
  sum(m->forward(q, kv, kv, o).output).backward();
  expect_all_grads(*m);
  EXPECT_EQ(q.grad().shape(), q.shape());
  // With weights requested too (the default), the output's gradient still flows.
  m->zero_grad();
  Tensor x = filled({2, 3, 4}, 6);
  nn::MultiheadAttentionOutput r = m->forward(x, x, x);
  sum(r.output).backward();
  expect_all_grads(*m);
}

TEST(NNModuleGrad, SGDLowersTheLossOfASmallNetwork) {
  manual_seed(3);
  auto net = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(3, 16), std::make_shared<nn::SiLU>(),
      std::make_shared<nn::LayerNorm>(std::vector<int64_t>{16}), std::make_shared<nn::Dropout>(0.0),
      std::make_shared<nn::Linear>(16, 1));
  Tensor x = filled({8, 3}, 7);
  Tensor y = sum(x, {1}, true) * 0.5;
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    net->zero_grad();
    Tensor err = net->forward(x) - y;
    Tensor loss = mean(err * err);
    loss.backward();
    sgd_step(*net, 0.05);
    mark_step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_LT(last, 0.5 * first);
}

}  // namespace
}  // namespace mstep
