// nn::DistributedDataParallel's bucket rebuild (issue 23), under mpirun and
// in a world of one: the first backward() that all-reduces records the
// order in which the gradients become ready (the autograd engine's
// gradient accumulations, see DistributedDataParallel.h) and the buckets
// are formed again in that order once it ends, as PyTorch's DDP does after
// its first iteration. Checked: the new buckets and where their
// all_reduce then sits in the step graph; that the weights are bitwise
// those of the same training without the rebuild (each element's mean
// over the ranks is computed the same way whatever bucket holds it); and
// that a step captured after the rebuild and replayed gives bitwise the
// lazy run's weights.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mstep/mstep.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;

/// p0, p1, p2 (4 floats each), used in the forward as ((x * p2) * p1) * p0:
/// the backward makes p0's gradient ready first, then p1's, then p2's,
/// the reverse of the construction's guess (reverse registration: p2, p1,
/// p0).
struct Chain : nn::Module {
  Chain() : nn::Module("Chain") {
    register_parameter("p0", p0);
    register_parameter("p1", p1);
    register_parameter("p2", p2);
  }
  Tensor forward(const Tensor& x) { return ((x * p2) * p1) * p0; }
  Tensor p0 = full({4}, 1.0), p1 = full({4}, 2.0), p2 = full({4}, 3.0);
};

Tensor chain_input() {
  return from_vector(std::vector<float>{1.f + dist::rank(), 2, 3, 4}, {4});
}

using Buckets = std::vector<std::vector<size_t>>;
constexpr double k32Bytes = 32.0 / (1024 * 1024);  // two of Chain's parameters a bucket

TEST(DdpRebuild, BucketsFollowTheFirstBackwardsReadyOrderOnce) {
  Chain model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = k32Bytes});
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{2, 1}, {0}}));
  model.forward(chain_input()).sum().backward();
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{0, 1}, {2}}));
  mark_step();
  // Once: a backward in another order changes nothing.
  (model.p0 * (model.p1 * model.p2)).sum().backward();
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{0, 1}, {2}}));
  mark_step();
}

TEST(DdpRebuild, IsOffWhenAsked) {
  Chain model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = k32Bytes, .rebuild_buckets = false});
  model.forward(chain_input()).sum().backward();
  mark_step();
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{2, 1}, {0}}));
}

TEST(DdpRebuild, ABackwardUnderNoSyncDoesNotRebuild) {
  Chain model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = k32Bytes});
  {
    auto guard = ddp.no_sync();
    (model.p0 * (model.p1 * model.p2)).sum().backward();  // ready order p2, p1, p0
  }
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{2, 1}, {0}}));
  model.forward(chain_input()).sum().backward();  // the first synced one: p0, p1, p2
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{0, 1}, {2}}));
  mark_step();
}

TEST(DdpRebuild, ParametersTheFirstBackwardMissesGoLast) {
  Chain model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = k32Bytes});
  (model.p1 * 2.0).sum().backward();  // p1 only; p2, p0 in their old order after it
  EXPECT_EQ(ddp.bucket_indices(), (Buckets{{1, 2}, {0}}));
  mark_step();
  for (float g : model.p0.grad().to_vector<float>()) EXPECT_EQ(g, 0.0f);
  for (float g : model.p1.grad().to_vector<float>()) EXPECT_EQ(g, 2.0f);
}

// After the rebuild, the bucket of p0 and p1 (4 floats each, the second at
// 256 bytes: 68 floats) is complete before p2's gradient is computed, so
// its all_reduce sits in the step graph before the backward's last mul
// (p2's gradient); without the rebuild the two-gradient bucket is p2's and
// p1's, and waits for p2.
TEST(DdpRebuild, TheRebuiltPairIsReducedBeforeTheLastGradient) {
  for (bool rebuild : {true, false}) {
    SCOPED_TRACE(rebuild ? "rebuilt" : "not rebuilt");
    Chain model;
    nn::DistributedDataParallel ddp(model,
                                    {.bucket_cap_mb = k32Bytes, .rebuild_buckets = rebuild});
    model.forward(chain_input()).sum().backward();
    mark_step();
    model.forward(chain_input()).sum().backward();
    const TraceGraph graph = pending_graph();
    size_t pair_reduce = graph.nodes.size(), last_mul = 0;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      if (graph.nodes[i].op == OpKind::all_reduce && graph.nodes[i].results[0].numel() == 64 + 4)
        pair_reduce = i;
      if (graph.nodes[i].op == OpKind::mul) last_mul = i;
    }
    ASSERT_LT(pair_reduce, graph.nodes.size()) << graph.to_text();
    if (rebuild)
      EXPECT_LT(pair_reduce, last_mul) << graph.to_text();
    else
      EXPECT_GT(pair_reduce, last_mul) << graph.to_text();
    mark_step();
  }
}

/// An MLP whose layers are registered in the reverse of their use: the
/// construction's guess (reverse registration: body, then head) is wrong,
/// the backward makes head's gradients ready first.
struct Reversed : nn::Module {
  Reversed()
      : nn::Module("Reversed"),
        head(register_module("head", std::make_shared<nn::Linear>(16, 5))),
        body(register_module("body", std::make_shared<nn::Linear>(12, 16))) {}
  Tensor forward(const Tensor& x) { return log_softmax(head->forward(relu(body->forward(x))), 1); }
  std::shared_ptr<nn::Linear> head, body;
};

constexpr int64_t kRows = 4, kSteps = 4;

/// A training of Reversed for kSteps on this rank's rows under DDP
/// (buckets of 400 bytes: head.weight 320, head.bias 20, body.weight 768,
/// body.bias 64), lazily or, from the second step (after the rebuild),
/// captured once and replayed: the final weights, and the buckets it
/// ended with.
struct Training {
  std::map<std::string, std::vector<float>> weights;
  Buckets buckets;
};

Training train(bool rebuild, bool replay) {
  manual_seed(5 + dist::rank());  // the construction's broadcast makes them equal
  Reversed model;
  nn::DistributedDataParallel ddp(model, {.bucket_cap_mb = 400.0 / (1024 * 1024),
                                          .rebuild_buckets = rebuild});
  optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  auto batch = [](int64_t step) {
    std::vector<float> x(kRows * 12);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(((i * 7 + step * 3 + dist::rank() * 5) % 23) / 23.0 - 0.5);
    std::vector<int64_t> y(kRows);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i + step + dist::rank()) % 5);
    return std::vector<Tensor>{from_vector(x, {kRows, 12}), from_vector(y, {kRows})};
  };
  auto step = [&](const std::vector<Tensor>& in) {
    opt.zero_grad();
    nll_loss(model.forward(in[0]), in[1]).backward();
    opt.step();
    mark_step();
  };
  Graph graph;
  std::vector<Tensor> static_in;
  for (int64_t s = 0; s < kSteps; ++s) {
    if (!replay || s == 0) {
      step(batch(s));
    } else if (!graph.captured()) {
      static_in = batch(s);
      CaptureGuard capture(graph);
      step(static_in);
    } else {
      const std::vector<Tensor> in = batch(s);
      for (size_t i = 0; i < in.size(); ++i) static_in[i].copy_(in[i]);
      graph.replay();
    }
  }
  Training run;
  for (auto& [name, p] : model.named_parameters()) run.weights[name] = p.to_vector<float>();
  run.buckets = ddp.bucket_indices();
  return run;
}

TEST(DdpRebuild, WeightsAreBitwiseThoseWithoutTheRebuild) {
  const Training rebuilt = train(/*rebuild=*/true, /*replay=*/false);
  const Training kept = train(/*rebuild=*/false, /*replay=*/false);
  ASSERT_NE(rebuilt.buckets, kept.buckets) << "the rebuild changed nothing: a vacuous check";
  for (const auto& [name, w] : kept.weights) EXPECT_EQ(rebuilt.weights.at(name), w) << name;
}

TEST(DdpRebuild, AStepCapturedAfterTheRebuildReplaysAsLazy) {
  const Training lazy = train(/*rebuild=*/true, /*replay=*/false);
  const Training replayed = train(/*rebuild=*/true, /*replay=*/true);
  EXPECT_EQ(replayed.buckets, lazy.buckets);
  for (const auto& [name, w] : lazy.weights) EXPECT_EQ(replayed.weights.at(name), w) << name;
}

}  // namespace
}  // namespace mstep
