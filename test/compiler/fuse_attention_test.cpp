// mstep-fuse-attention on whole graphs: GPT-mini's training step with
// attention written out (forward, backward, AdamW) gets exactly one
// mstep.sdpa and one mstep.sdpa_backward per layer from the compile
// pipeline, and trains to the unfused numbers on the ref backend, with and
// without dropout. Smaller attention programs (every mask, scale and key
// form the pass takes) fuse and give the unfused outputs and gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "examples/models/GptMini.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/mstep.h"
#include "mstep/passes/Pipeline.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {
namespace {

/// Every op of `graph`'s step function after the full (fused) compile
/// pipeline, by name, nested ones included.
std::map<std::string, int> ops_after_pipeline(const TraceGraph& graph) {
  mlir::MLIRContext ctx;
  register_mstep_dialects(ctx);
  auto module = import_trace_graph(graph, ctx);
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  mlir::PassManager pm(&ctx);
  passes::build_planned_pipeline(pm);
  EXPECT_TRUE(mlir::succeeded(pm.run(module->get())));
  std::map<std::string, int> counts;
  (*module)->walk([&](mlir::Operation* op) { ++counts[op->getName().getStringRef().str()]; });
  return counts;
}

/// The values a run produces, flattened, compared fused against unfused.
using Values = std::vector<std::vector<float>>;

void expect_close(const Values& fused, const Values& unfused, double tol) {
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t t = 0; t < fused.size(); ++t) {
    ASSERT_EQ(fused[t].size(), unfused[t].size()) << "tensor " << t;
    double worst = 0;
    for (size_t i = 0; i < fused[t].size(); ++i)
      worst = std::max(worst, std::abs(double(fused[t][i]) - unfused[t][i]) /
                                  std::max(1.0, std::abs(double(unfused[t][i]))));
    EXPECT_LE(worst, tol) << "tensor " << t << " differs by " << worst << " (relative)";
  }
}

class FuseAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_fuse_ = Tracer::get().options().fuse; }
  void TearDown() override {
    mark_step();
    Tracer::get().mutable_options().fuse = saved_fuse_;
  }
  bool saved_fuse_ = true;
};

// ---- GPT-mini, attention written out --------------------------------------

examples::GptConfig gpt_config(double dropout) {
  examples::GptConfig config;  // vocab 96
  config.dim = 32;
  config.heads = 2;
  config.layers = 2;
  config.max_seq = 8;
  config.dropout = dropout;
  config.explicit_attention = true;
  return config;
}

/// `steps` training steps of GPT-mini from the same initial weights
/// (seeded), with AdamW or SGD with momentum; returns the losses, then the
/// final parameters. `graph` gets the last step.
Values train_gpt(bool fuse, double dropout, int steps, bool adamw, TraceGraph* graph = nullptr) {
  Tracer::get().mutable_options().fuse = fuse;
  manual_seed(5);
  examples::GptMini model(gpt_config(dropout));
  model.train();
  std::unique_ptr<optim::Optimizer> opt;
  if (adamw)
    opt = std::make_unique<optim::AdamW>(model.parameters(),
                                         optim::AdamWOptions{.lr = 3e-3, .weight_decay = 0.1});
  else
    opt = std::make_unique<optim::SGD>(model.parameters(),
                                       optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  Values out(1);
  for (int k = 0; k < steps; ++k) {
    std::vector<int64_t> tokens(2 * 8);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + k) % 96);
    Tensor x = from_vector(tokens, {2, 8});
    opt->zero_grad();
    Tensor logits = model.forward(x, from_vector(std::vector<int64_t>{8, 5}, {2}));
    Tensor loss = cross_entropy(logits.reshape({-1, 96}), x.reshape({-1}));
    loss.backward();
    opt->step();
    if (graph && k == steps - 1) *graph = pending_graph();
    mark_step();
    out[0].push_back(static_cast<float>(loss.item()));
  }
  for (const Tensor& p : model.parameters()) out.push_back(p.to_vector<float>());
  return out;
}

TEST_F(FuseAttentionTest, GptTrainingStepHasOneSdpaAndOneBackwardPerLayer) {
  for (double dropout : {0.0, 0.1}) {
    SCOPED_TRACE(dropout > 0 ? "with dropout" : "without dropout");
    TraceGraph graph;
    train_gpt(/*fuse=*/true, dropout, 2, /*adamw=*/true, &graph);
    std::map<std::string, int> ops = ops_after_pipeline(graph);
    EXPECT_EQ(ops["mstep.sdpa"], 2);
    EXPECT_EQ(ops["mstep.sdpa_backward"], 2);
    EXPECT_EQ(ops["mstep.softmax"], 0);
    // Dropout remains only on the residual branches (2 per layer, forward
    // and backward): the attention probabilities' went into sdpa.
    EXPECT_EQ(ops["mstep.dropout"], dropout > 0 ? 8 : 0);
  }
}

// The numerics runs use SGD: the key part of each qkv bias has an exactly
// zero gradient (softmax ignores a per-row constant), which AdamW's
// normalization turns from rounding noise into lr-sized steps that differ
// between any two summation orders.
TEST_F(FuseAttentionTest, GptTrainsToTheUnfusedNumbers) {
  // sdpa accumulates in double and rounds once; the unfused chain rounds
  // after every op: equal to rounding, not bitwise.
  expect_close(train_gpt(true, 0.0, 3, false), train_gpt(false, 0.0, 3, false), 1e-5);
}

TEST_F(FuseAttentionTest, GptWithDropoutTrainsToTheUnfusedNumbers) {
  // The fused ops replay the unfused dropout's Philox draws (same state,
  // same offset, same element numbering): a mismatch would differ by O(1).
  expect_close(train_gpt(true, 0.1, 3, false), train_gpt(false, 0.1, 3, false), 1e-5);
}

// ---- Attention variants -----------------------------------------------------

Tensor pattern(Shape shape, double scale, int salt) {
  std::vector<float> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(scale * (((i * 7 + salt) % 13) / 6.0 - 1.0));
  return from_vector(v, shape);
}

/// q [2, 2, 4, 8], k [2, 2, 6, 8] (or kT [2, 2, 8, 6]), v [2, 2, 6, 5];
/// `attention` computes the output from them. Returns the output and the
/// gradients of q, k (or kT) and v of sum(out * w).
using AttentionFn = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)>;

Values run_attention(bool fuse, bool key_transposed, const AttentionFn& attention,
                     std::map<std::string, int>* fused_ops = nullptr) {
  Tracer::get().mutable_options().fuse = fuse;
  manual_seed(3);
  Tensor q = pattern({2, 2, 4, 8}, 0.5, 1).requires_grad_();
  Tensor k = pattern(key_transposed ? Shape{2, 2, 8, 6} : Shape{2, 2, 6, 8}, 0.7, 2)
                 .requires_grad_();
  Tensor v = pattern({2, 2, 6, 5}, 1.0, 3).requires_grad_();
  Tensor out = attention(q, k, v);
  sum(out * pattern({2, 2, 4, 5}, 1.0, 4)).backward();
  if (fused_ops) *fused_ops = ops_after_pipeline(pending_graph());
  mark_step();
  return {out.to_vector<float>(), q.grad().to_vector<float>(), k.grad().to_vector<float>(),
          v.grad().to_vector<float>()};
}

void expect_fused_like_unfused(bool key_transposed, const AttentionFn& attention) {
  std::map<std::string, int> ops;
  Values fused = run_attention(true, key_transposed, attention, &ops);
  EXPECT_EQ(ops["mstep.sdpa"], 1);
  EXPECT_EQ(ops["mstep.sdpa_backward"], 1);
  EXPECT_EQ(ops["mstep.softmax"], 0);
  expect_close(fused, run_attention(false, key_transposed, attention), 1e-5);
}

Tensor key_padding_mask() {  // [2, 1, 1, 6]: batch row 1 sees 4 keys
  std::vector<bool> m(12, true);
  m[10] = m[11] = false;
  return from_vector(m, {2, 1, 1, 6});
}

TEST_F(FuseAttentionTest, BoolMaskAndScaleOnTheScores) {
  expect_fused_like_unfused(false, [](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor s = matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(8.0));
    return matmul(softmax(where(key_padding_mask(), s, -HUGE_VAL), -1), v);
  });
}

TEST_F(FuseAttentionTest, CausalTriangleAndDividedScores) {
  expect_fused_like_unfused(false, [](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor s = matmul(q, k.transpose(-2, -1)) / 3.0;
    Tensor causal = tril(ones({4, 6}, DType::boolean));
    return matmul(softmax(where(causal, s, -HUGE_VAL), -1), v);
  });
}

TEST_F(FuseAttentionTest, FloatMaskAndScaleOnQAndK) {
  expect_fused_like_unfused(false, [](const Tensor& q, const Tensor& k, const Tensor& v) {
    const double quarter = std::pow(8.0, -0.25);  // q and k each scaled by d^-1/4
    Tensor s = matmul(q * quarter, (k * quarter).transpose(-2, -1));
    return matmul(softmax(s + pattern({4, 6}, 0.3, 5), -1), v);
  });
}

TEST_F(FuseAttentionTest, KeyArrivesTransposed) {
  expect_fused_like_unfused(true, [](const Tensor& q, const Tensor& kT, const Tensor& v) {
    return matmul(softmax(matmul(q, kT) * 0.25, -1), v);
  });
}

TEST_F(FuseAttentionTest, DropoutDrawsTheSameNumbers) {
  expect_fused_like_unfused(false, [](const Tensor& q, const Tensor& k, const Tensor& v) {
    Tensor s = matmul(q, k.transpose(-2, -1)) * 0.35;
    Tensor probs = softmax(where(key_padding_mask(), s, -HUGE_VAL), -1);
    return matmul(dropout(probs, 0.3), v);
  });
}

}  // namespace
}  // namespace mstep
