// Error tests for the nn modules: each bad constructor argument and each
// wrong input shape throws mstep::Error naming the module (by its repr),
// the expected shape and the actual one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

TEST(NNModuleErrors, LinearInputShape) {
  auto lin = std::make_shared<nn::Linear>(4, 3);
  EXPECT_EQ(error_of([&] {
              lin->forward(zeros({2, 3}));
            }),
            "mstep::nn::Linear(in_features=4, out_features=3, bias=true): expected input of shape "
            "[*, 4] (last dim = in_features). Got f32[2, 3]. Reshape the input so its last dim "
            "holds the features, or build the Linear with a matching in_features.");
  EXPECT_THAT(error_of([&] { lin->forward(Tensor::scalar(1.0)); }),
              AllOf(HasSubstr("nn::Linear"), HasSubstr("[*, 4]"), HasSubstr("Got f32[]")));
  EXPECT_THAT(error_of([&] { lin->forward(Tensor()); }),
              AllOf(HasSubstr("nn::Linear"), HasSubstr("input is undefined")));
  EXPECT_THAT(error_of([] { nn::Linear(0, 3); }),
              AllOf(HasSubstr("nn::Linear"), HasSubstr("in_features must be positive"),
                    HasSubstr("in_features 0")));
}

TEST(NNModuleErrors, EmbeddingIndices) {
  auto emb = std::make_shared<nn::Embedding>(5, 2);
  EXPECT_THAT(error_of([&] { emb->forward(zeros({3})); }),
              AllOf(HasSubstr("nn::Embedding(5, 2)"), HasSubstr("expected integer indices"),
                    HasSubstr("Got f32[3]")));
  EXPECT_THAT(error_of([] { nn::Embedding(5, -1); }), HasSubstr("embedding_dim must be positive"));
}

TEST(NNModuleErrors, NormalizationShapes) {
  auto ln = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{3, 4});
  EXPECT_THAT(error_of([&] {
                ln->forward(zeros({2, 4, 3}));
              }),
              AllOf(HasSubstr("nn::LayerNorm([3, 4]"),
                    HasSubstr("expected input of shape [*, 3, 4]"), HasSubstr("Got f32[2, 4, 3]")));
  EXPECT_THAT(error_of([&] { ln->forward(zeros({4})); }), HasSubstr("Got f32[4]"));
  EXPECT_THAT(error_of([] { nn::LayerNorm(std::vector<int64_t>{}); }),
              HasSubstr("normalized_shape must list at least one positive dim"));
  auto rms = std::make_shared<nn::RMSNorm>(std::vector<int64_t>{8});
  EXPECT_THAT(error_of([&] {
                rms->forward(zeros({2, 7}));
              }),
              AllOf(HasSubstr("nn::RMSNorm([8], eps=None"), HasSubstr("[*, 8]"),
                    HasSubstr("Got f32[2, 7]")));
}

TEST(NNModuleErrors, ActivationArguments) {
  EXPECT_THAT(
      error_of([] { nn::GELU("fast"); }),
      AllOf(HasSubstr("nn::GELU"), HasSubstr("\"none\" or \"tanh\""), HasSubstr("\"fast\"")));
  EXPECT_THAT(error_of([] { nn::Dropout(1.5); }),
              AllOf(HasSubstr("nn::Dropout"), HasSubstr("p must be in [0, 1]")));
}

TEST(NNModuleErrors, Conv2dArgumentsAndInputs) {
  auto conv = std::make_shared<nn::Conv2d>(3, 8, 3);
  EXPECT_THAT(error_of([&] {
                conv->forward(zeros({1, 4, 8, 8}));
              }),
              AllOf(HasSubstr("nn::Conv2d(3, 8, kernel_size=(3, 3)"),
                    HasSubstr("expected input of shape [N, 3, H, W]"),
                    HasSubstr("Got f32[1, 4, 8, 8]")));
  EXPECT_THAT(error_of([&] {
                conv->forward(zeros({8, 8}));
              }),
              AllOf(HasSubstr("expected a 4-D input [N, 3, H, W] or an unbatched 3-D one"),
                    HasSubstr("Got f32[8, 8]")));
  EXPECT_THAT(error_of([&] {
                conv->forward(zeros({1, 3, 2, 8}));
              }),
              AllOf(HasSubstr("input spatial size (2, 8)"), HasSubstr("kernel window (3, 3)")));
  EXPECT_THAT(error_of([] { nn::Conv2d(4, 6, 3, 1, 0, 1, 4); }),
              AllOf(HasSubstr("divisible by groups"), HasSubstr("out_channels 6, groups 4")));
  EXPECT_THAT(error_of([] {
                nn::Conv2d(4, 6, nn::Size2d{3, 0});
              }),
              AllOf(HasSubstr("kernel_size must be >= 1"), HasSubstr("(3, 0)")));
}

TEST(NNModuleErrors, MaxPool2dArgumentsAndInputs) {
  auto pool = std::make_shared<nn::MaxPool2d>(2);
  EXPECT_THAT(error_of([&] {
                pool->forward(zeros({2, 1, 3, 4, 4}));
              }),
              AllOf(HasSubstr("nn::MaxPool2d(kernel_size=(2, 2)"), HasSubstr("4-D input"),
                    HasSubstr("Got f32[2, 1, 3, 4, 4]")));
  EXPECT_THAT(error_of([] { nn::MaxPool2d(2, std::nullopt, 2); }),
              HasSubstr("padding must be at most half the kernel size"));
}

TEST(NNModuleErrors, MultiheadAttentionArguments) {
  EXPECT_THAT(error_of([] { nn::MultiheadAttention(10, 3); }),
              AllOf(HasSubstr("nn::MultiheadAttention(embed_dim=10, num_heads=3"),
                    HasSubstr("embed_dim must be divisible by num_heads")));
  nn::MultiheadAttentionOptions o;
  o.dropout = -0.1;
  EXPECT_THAT(error_of([&] { nn::MultiheadAttention(4, 2, o); }),
              HasSubstr("dropout must be in [0, 1]"));
}

TEST(NNModuleErrors, MultiheadAttentionInputs) {
  auto m = std::make_shared<nn::MultiheadAttention>(4, 2);
  Tensor q = zeros({2, 3, 4}), kv = zeros({2, 5, 4});
  EXPECT_EQ(error_of([&] {
              m->forward(q, zeros({2, 5, 6}), kv);
            }),
            "mstep::nn::MultiheadAttention(embed_dim=4, num_heads=2, dropout=0, bias=true, "
            "batch_first=true): expected the last dim of query, key and value to be embed_dim 4. "
            "Got query f32[2, 3, 4], key f32[2, 5, 6], value f32[2, 5, 4]. Project the inputs to "
            "embed_dim features first.");
  EXPECT_THAT(error_of([&] {
                m->forward(q, zeros({5, 4}), kv);
              }),
              AllOf(HasSubstr("rank 3 ([B, L, E])"), HasSubstr("key f32[5, 4]")));
  EXPECT_THAT(error_of([&] {
                m->forward(q, zeros({3, 5, 4}), zeros({3, 5, 4}));
              }),
              HasSubstr("different batch sizes"));
  EXPECT_THAT(
      error_of([&] {
        m->forward(q, kv, zeros({2, 6, 4}));
      }),
      AllOf(HasSubstr("key and value have different lengths"), HasSubstr("value f32[2, 6, 4]")));

  nn::MultiheadAttentionForwardOptions o;
  o.attn_mask = zeros({3, 4}, DType::boolean);
  EXPECT_THAT(error_of([&] { m->forward(q, kv, kv, o); }),
              AllOf(HasSubstr("expected attn_mask of shape [L, S] = [3, 5] or "
                              "[B * num_heads, L, S] = [4, 3, 5]"),
                    HasSubstr("Got bool[3, 4]")));
  o.attn_mask = zeros({3, 5}, DType::i64);
  EXPECT_THAT(error_of([&] { m->forward(q, kv, kv, o); }),
              AllOf(HasSubstr("attn_mask must be bool or floating"), HasSubstr("Got i64[3, 5]")));
  o.attn_mask = Tensor();
  o.key_padding_mask = zeros({2, 4}, DType::boolean);
  EXPECT_THAT(error_of([&] { m->forward(q, kv, kv, o); }),
              AllOf(HasSubstr("expected key_padding_mask of shape [B, S] = [2, 5]"),
                    HasSubstr("Got bool[2, 4]")));
  EXPECT_THAT(error_of([&] {
                m->forward(zeros({3, 4}), zeros({5, 4}), zeros({5, 4}), o);
              }),
              HasSubstr("expected key_padding_mask of shape [S] = [5]"));
}

TEST(NNModuleErrors, Containers) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::ReLU>());
  EXPECT_THAT(error_of([&] { (*seq)[1]; }),
              AllOf(HasSubstr("nn::Sequential"), HasSubstr("index 1 is out of range"),
                    HasSubstr("Got 1 children")));
  EXPECT_THAT(error_of([&] { seq->at<nn::Linear>(0); }),
              AllOf(HasSubstr("layer 0 has another type"), HasSubstr("Got ReLU()")));
  EXPECT_THAT(error_of([&] { seq->push_back(nullptr); }), HasSubstr("cannot append a null layer"));
  auto list = std::make_shared<nn::ModuleList>();
  EXPECT_THAT(error_of([&] { (*list)[0]; }),
              AllOf(HasSubstr("nn::ModuleList"), HasSubstr("index 0 is out of range")));
  list->push_back(std::make_shared<nn::Linear>(2, 2));
  EXPECT_THAT(error_of([&] { list->at<nn::Conv2d>(0); }),
              AllOf(HasSubstr("module 0 has another type"), HasSubstr("Got Linear")));
  // Errors inside a Sequential name the layer that failed.
  auto net = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                              std::make_shared<nn::Linear>(6, 2));
  EXPECT_THAT(error_of([&] {
                net->forward(zeros({1, 4}));
              }),
              AllOf(HasSubstr("nn::Linear(in_features=6"), HasSubstr("Got f32[1, 8]")));
}

}  // namespace
}  // namespace mstep
