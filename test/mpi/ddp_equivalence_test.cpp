// nn::DistributedDataParallel under mpirun (label mpi): W ranks with batch
// B each train like one process with batch W*B on the concatenated data.
// Every rank also runs that one-process reference itself (no DDP, the
// whole batch), so each compares its own figures: the global loss (the
// mean of the ranks' losses, an all_reduce) and every weight after the
// steps, in lazy mode and with the step captured and replayed, for an MLP
// and a small GPT. The DDP models start from seeds that differ per rank:
// only the construction's broadcast makes them equal to the reference.
//
// Tolerance: the two runs sum the same products in another order (a
// batch's gradient as two half-batch sums averaged, against one sum), so a
// gradient differs by a few ulps times the length of its reduction (the
// batch, or batch x sequence for the GPT). Those differences pass through
// the steps without growing much at these learning rates: we allow
// kUlps * eps(f32) * reduction length, relative to max(|value|, 1); the
// observed errors are well under it (printed by rank 0).
//
// Also: a module that differs across ranks fails on every rank naming the
// first difference, the buckets follow the cap, and a checkpoint saved by
// rank 0 of the 2-rank run (MSTEP_DDP_CHECKPOINT) loads into the 1-rank
// run of this binary, which checks it against its own reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "mstep/mstep.h"

namespace mstep {
namespace {

namespace dist = mstep::distributed;

constexpr double kUlps = 16;
constexpr int64_t kSteps = 5;

/// A run's record: the loss of every step, then the final weights.
struct Trace {
  std::vector<double> losses;
  std::map<std::string, std::vector<float>> weights;
};

/// One model family: builds a model, the step's global batch (the same on
/// every rank, from the step number), its loss on a slice of rows, and
/// the length of the longest gradient reduction.
struct Family {
  std::function<std::shared_ptr<nn::Module>()> make;
  // The step's global batch for a world of `world` ranks: [world * B, ...].
  std::function<std::vector<Tensor>(int64_t step, int64_t world)> batch;
  std::function<Tensor(nn::Module&, const std::vector<Tensor>&)> loss;
  std::function<std::unique_ptr<optim::Optimizer>(nn::Module&)> optimizer;
  int64_t reduction = 1;
};

constexpr int64_t kMlpRows = 8;  // per rank

Family mlp() {
  Family f;
  f.make = [] { return std::make_shared<examples::Mlp>(12, 16, 5, /*dropout=*/0.0); };
  f.batch = [](int64_t step, int64_t world) {
    const int64_t n = kMlpRows * world;
    std::mt19937 rng(100 + step);
    std::normal_distribution<float> normal;
    std::vector<float> x(n * 12);
    std::vector<int64_t> y(n);
    for (float& v : x) v = normal(rng);
    for (int64_t& v : y) v = rng() % 5;
    return std::vector<Tensor>{from_vector(x, {n, 12}), from_vector(y, {n})};
  };
  f.loss = [](nn::Module& m, const std::vector<Tensor>& in) {
    return nll_loss(static_cast<examples::Mlp&>(m).forward(in[0]), in[1]);
  };
  f.optimizer = [](nn::Module& m) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(m.parameters(),
                                        optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
  };
  f.reduction = kMlpRows * 2;
  return f;
}

constexpr int64_t kGptRows = 2, kGptSeq = 8;

Family gpt() {
  Family f;
  f.make = [] {
    return std::make_shared<examples::GptMini>(
        examples::GptConfig{.vocab = 11, .dim = 16, .heads = 2, .layers = 1, .max_seq = kGptSeq});
  };
  f.batch = [](int64_t step, int64_t world) {
    const int64_t n = kGptRows * world;
    std::mt19937 rng(200 + step);
    std::vector<int64_t> tokens(n * kGptSeq), targets(n * kGptSeq);
    for (int64_t& v : tokens) v = rng() % 11;
    for (int64_t& v : targets) v = rng() % 11;
    return std::vector<Tensor>{from_vector(tokens, {n, kGptSeq}), from_vector(targets, {n, kGptSeq})};
  };
  // Full-length rows: every rank's mean is over the same number of tokens,
  // so the mean of the ranks' means is the whole batch's mean.
  f.loss = [](nn::Module& m, const std::vector<Tensor>& in) {
    auto& g = static_cast<examples::GptMini&>(m);
    Tensor logits = g.forward(in[0], Tensor());
    return cross_entropy(logits.reshape({-1, g.config().vocab}), in[1].reshape({-1}));
  };
  // SGD, not Adam: the key bias's gradient is exactly zero in exact
  // arithmetic (softmax ignores a shift shared by every key), so both runs
  // hold only rounding noise there, and Adam's division by sqrt(v) would
  // turn any noise into updates of size lr.
  f.optimizer = [](nn::Module& m) -> std::unique_ptr<optim::Optimizer> {
    return std::make_unique<optim::SGD>(m.parameters(),
                                        optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  };
  f.reduction = kGptRows * 2 * kGptSeq;
  return f;
}

/// Rows [rank * rows, (rank + 1) * rows) of each input.
std::vector<Tensor> my_rows(const std::vector<Tensor>& full) {
  std::vector<Tensor> out;
  const int64_t rows = full[0].shape()[0] / dist::world_size();
  for (const Tensor& t : full) {
    Tensor part = slice(t, 0, dist::rank() * rows, (dist::rank() + 1) * rows);
    // Materialized, so replay's copy_ shares the buffer.
    if (t.dtype() == DType::i64) out.push_back(from_vector(part.to_vector<int64_t>(), part.shape()));
    else out.push_back(from_vector(part.to_vector<float>(), part.shape()));
  }
  return out;
}

/// Trains `family` for kSteps: with DDP on this rank's rows, or alone on
/// the whole batch; lazily or captured after one lazy step and replayed.
/// Each step accumulates the gradients of `accumulate` micro-batches
/// (batches step * accumulate + j) before the update; with DDP all but
/// the last backward run under no_sync(). The recorded loss is the sum of
/// the micro-batches' (global) losses.
Trace train(const Family& family, bool ddp, bool replay, int64_t accumulate = 1) {
  // DDP ranks start from different weights: the broadcast must fix them.
  manual_seed(ddp ? 7 + dist::rank() : 7);
  std::shared_ptr<nn::Module> model = family.make();
  std::unique_ptr<nn::DistributedDataParallel> wrapper;
  if (ddp) wrapper = std::make_unique<nn::DistributedDataParallel>(*model);
  std::unique_ptr<optim::Optimizer> opt = family.optimizer(*model);
  Trace trace;
  Graph graph;
  std::vector<std::vector<Tensor>> static_in;
  Tensor static_loss;
  auto step = [&](const std::vector<std::vector<Tensor>>& micro) {
    opt->zero_grad();
    Tensor total;
    for (size_t j = 0; j < micro.size(); ++j) {
      Tensor loss = family.loss(*model, micro[j]);
      if (wrapper && j + 1 < micro.size()) {
        auto no_sync = wrapper->no_sync();
        loss.backward();
      } else {
        loss.backward();
      }
      total = total.defined() ? total + loss.detach() : loss.detach();
    }
    opt->step();
    Tensor global = ddp ? dist::all_reduce(total, dist::ReduceOp::mean) : total;
    mark_step();
    return global;
  };
  for (int64_t s = 0; s < kSteps; ++s) {
    std::vector<std::vector<Tensor>> in;
    for (int64_t j = 0; j < accumulate; ++j) {
      std::vector<Tensor> full = family.batch(s * accumulate + j, dist::world_size());
      in.push_back(ddp ? my_rows(full) : full);
    }
    Tensor loss;
    if (!replay || s == 0) {
      loss = step(in);
    } else if (!graph.captured()) {
      static_in = in;
      {
        CaptureGuard capture(graph);
        static_loss = step(static_in);
      }
      loss = static_loss;
    } else {
      for (size_t j = 0; j < in.size(); ++j)
        for (size_t i = 0; i < in[j].size(); ++i) static_in[j][i].copy_(in[j][i]);
      graph.replay();
      loss = static_loss;
    }
    trace.losses.push_back(loss.item());
  }
  for (auto& [name, p] : model->named_parameters()) trace.weights[name] = p.to_vector<float>();
  return trace;
}

void expect_close(const Trace& got, const Trace& want, int64_t reduction, const char* what) {
  const double tol = kUlps * std::numeric_limits<float>::epsilon() * reduction;
  double worst = 0;
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < got.losses.size(); ++i) {
    const double err = std::abs(got.losses[i] - want.losses[i]) / std::max(1.0, std::abs(want.losses[i]));
    worst = std::max(worst, err);
    EXPECT_LE(err, tol) << what << " loss of step " << i + 1 << ": " << got.losses[i] << " vs "
                        << want.losses[i];
  }
  ASSERT_EQ(got.weights.size(), want.weights.size());
  for (const auto& [name, w] : want.weights) {
    const std::vector<float>& g = got.weights.at(name);
    ASSERT_EQ(g.size(), w.size()) << name;
    for (size_t i = 0; i < w.size(); ++i) {
      const double err = std::abs(double(g[i]) - w[i]) / std::max(1.0, std::abs(double(w[i])));
      worst = std::max(worst, err);
      if (err > tol) {
        ADD_FAILURE() << what << " " << name << "[" << i << "]: " << g[i] << " vs " << w[i]
                      << " (tolerance " << tol << ")";
        break;
      }
    }
  }
  if (dist::rank() == 0)
    std::printf("  %s: worst relative error %.3g (tolerance %.3g = %g ulps x %lld)\n", what, worst,
                tol, kUlps, (long long)reduction);
}

TEST(DdpEquivalence, MlpLazy) {
  const Family f = mlp();
  expect_close(train(f, true, false), train(f, false, false), f.reduction, "mlp lazy");
}

TEST(DdpEquivalence, MlpReplay) {
  const Family f = mlp();
  expect_close(train(f, true, true), train(f, false, true), f.reduction, "mlp replay");
}

TEST(DdpEquivalence, GptLazy) {
  const Family f = gpt();
  expect_close(train(f, true, false), train(f, false, false), f.reduction, "gpt lazy");
}

TEST(DdpEquivalence, GptReplay) {
  const Family f = gpt();
  expect_close(train(f, true, true), train(f, false, true), f.reduction, "gpt replay");
}

// Gradient accumulation: 3 micro-batches per step, the first two under
// no_sync(), equal one process accumulating the 3 whole micro-batches.
constexpr int64_t kMicro = 3;

TEST(DdpEquivalence, MlpNoSyncLazy) {
  const Family f = mlp();
  expect_close(train(f, true, false, kMicro), train(f, false, false, kMicro),
               f.reduction * kMicro, "mlp no_sync lazy");
}

TEST(DdpEquivalence, MlpNoSyncReplay) {
  const Family f = mlp();
  expect_close(train(f, true, true, kMicro), train(f, false, true, kMicro), f.reduction * kMicro,
               "mlp no_sync replay");
}

TEST(DdpEquivalence, GptNoSyncLazy) {
  const Family f = gpt();
  expect_close(train(f, true, false, kMicro), train(f, false, false, kMicro),
               f.reduction * kMicro, "gpt no_sync lazy");
}

TEST(Ddp, ConstructionBroadcastsRankZerosWeights) {
  manual_seed(1 + dist::rank());
  auto model = std::make_shared<examples::Mlp>(4, 3, 2, 0.0);
  nn::DistributedDataParallel ddp(*model);
  manual_seed(1);
  auto rank0 = std::make_shared<examples::Mlp>(4, 3, 2, 0.0);
  EXPECT_EQ(model->fc1->weight.to_vector<float>(), rank0->fc1->weight.to_vector<float>());
  EXPECT_EQ(model->fc2->bias.to_vector<float>(), rank0->fc2->bias.to_vector<float>());
}

/// rank() + 1 as a graph input (a constant would make the ranks' step
/// graphs differ, which the collectives refuse).
Tensor rank_plus_one() { return from_vector(std::vector<float>{float(dist::rank() + 1)}, {1}); }

TEST(Ddp, GradientsAreTheRanksMean) {
  // loss = sum(w * (rank + 1)): the gradient on rank r is r + 1, so the
  // mean over W ranks is (W + 1) / 2 on every rank.
  auto model = std::make_shared<nn::Linear>(3, 1, /*bias=*/false);
  nn::DistributedDataParallel ddp(*model);
  Tensor loss = (model->weight * rank_plus_one()).sum();
  loss.backward();
  mark_step();
  for (float g : model->weight.grad().to_vector<float>())
    EXPECT_FLOAT_EQ(g, (dist::world_size() + 1) / 2.0f);
}

TEST(Ddp, GradientsWithoutBucketViewsAreTheSame) {
  auto model = std::make_shared<nn::Linear>(3, 2);
  nn::DistributedDataParallel ddp(*model, {.gradient_as_bucket_view = false});
  Tensor loss = (model->weight * rank_plus_one()).sum() + (model->bias * rank_plus_one()).sum();
  loss.backward();
  mark_step();
  for (const Tensor& p : {model->weight, model->bias})
    for (float g : p.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, (dist::world_size() + 1) / 2.0f);
}

TEST(Ddp, NoSyncKeepsGradientsOnTheRankUntilTheNextSyncedBackward) {
  // loss = sum(w * (rank + 1)): under no_sync() the gradient stays this
  // rank's, r + 1, with no collective in the step; the next backward
  // outside it reduces the accumulated 2 (r + 1): the mean is W + 1.
  auto model = std::make_shared<nn::Linear>(3, 1, /*bias=*/false);
  nn::DistributedDataParallel ddp(*model);
  {
    auto no_sync = ddp.no_sync();
    EXPECT_FALSE(ddp.require_backward_grad_sync());
    {
      auto nested = ddp.no_sync();
    }
    EXPECT_FALSE(ddp.require_backward_grad_sync()) << "a nested guard restores no_sync";
    (model->weight * rank_plus_one()).sum().backward();
    EXPECT_EQ(pending_graph().to_text().find("all_reduce"), std::string::npos)
        << pending_graph().to_text();
    mark_step();
  }
  EXPECT_TRUE(ddp.require_backward_grad_sync());
  for (float g : model->weight.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, dist::rank() + 1.0f);
  (model->weight * rank_plus_one()).sum().backward();
  mark_step();
  for (float g : model->weight.grad().to_vector<float>())
    EXPECT_FLOAT_EQ(g, float(dist::world_size() + 1));
}

TEST(Ddp, NoSyncGradientsOfParametersTheSyncedBackwardMissesAreReduced) {
  // fc2.bias gets its gradient under no_sync() only; the synced backward
  // reaches fc1.bias only. fc2.bias's accumulated r + 1 must still be
  // averaged (not replaced by zeros): (W + 1) / 2.
  auto model = std::make_shared<examples::Mlp>(2, 2, 2, 0.0);
  nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 1e-6});  // a bucket per parameter
  {
    auto no_sync = ddp.no_sync();
    (model->fc2->bias * rank_plus_one()).sum().backward();
  }
  (model->fc1->bias * rank_plus_one()).sum().backward();
  mark_step();
  for (const Tensor& p : {model->fc1->bias, model->fc2->bias})
    for (float g : p.grad().to_vector<float>()) EXPECT_FLOAT_EQ(g, (dist::world_size() + 1) / 2.0f);
}

TEST(Ddp, FirstBucketHasItsOwnCap) {
  // Mlp(100, 100, 10) in reverse order: fc2.bias 40 B, fc2.weight 4000 B,
  // fc1.bias 400 B, fc1.weight 40000 B. A 40 B first bucket closes after
  // fc2.bias; the rest fit in one 25 MiB bucket.
  auto model = std::make_shared<examples::Mlp>(100, 100, 10, 0.0);
  nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 25,
                                           .first_bucket_cap_mb = 40.0 / (1024 * 1024)});
  EXPECT_EQ(ddp.bucket_indices(), (std::vector<std::vector<size_t>>{{3}, {2, 1, 0}}));
}

/// A parameter and a buffer ("stat"), which holds rank() + 1.
struct WithBuffer : nn::Module {
  WithBuffer() : nn::Module("WithBuffer") {
    w = zeros({2});
    // Inputs, not constants: the ranks' broadcast graphs must be the same.
    stat = from_vector(std::vector<float>(2, float(dist::rank() + 1)), {2});
    register_parameter("w", w);
    register_buffer("stat", stat);
  }
  Tensor w, stat;
};

TEST(Ddp, BuffersFollowRankZeroWhenAsked) {
  auto on = std::make_shared<WithBuffer>();
  nn::DistributedDataParallel ddp(*on);
  EXPECT_EQ(on->stat.to_vector<float>(), (std::vector<float>{1, 1}));
  on->stat.copy_(from_vector(std::vector<float>(2, float(dist::rank() + 5)), {2}));
  ddp.sync_buffers();
  mark_step();
  EXPECT_EQ(on->stat.to_vector<float>(), (std::vector<float>{5, 5}));
  // forward(): the buffers are broadcast before the forward runs.
  on->stat.copy_(from_vector(std::vector<float>(2, float(dist::rank() + 7)), {2}));
  Tensor out = ddp.forward([&] { return on->stat * 2.0; });
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{14, 14}));
  auto off = std::make_shared<WithBuffer>();
  nn::DistributedDataParallel keep(*off, {.broadcast_buffers = false});
  keep.sync_buffers();
  const float mine = float(dist::rank() + 1);
  EXPECT_EQ(off->stat.to_vector<float>(), (std::vector<float>{mine, mine}));
  EXPECT_EQ(keep.forward([&] { return off->stat * 2.0; }).to_vector<float>(),
            (std::vector<float>{2 * mine, 2 * mine}));
}

TEST(Ddp, BucketsFollowTheCapInReverseOrder) {
  // Mlp(100, 100, 10): fc1.weight 40000 B, fc1.bias 400 B, fc2.weight
  // 4000 B, fc2.bias 40 B; named_parameters order fc1.weight, fc1.bias,
  // fc2.weight, fc2.bias (indices 0..3).
  auto model = std::make_shared<examples::Mlp>(100, 100, 10, 0.0);
  const double kib4 = 4000.0 / (1024 * 1024);  // closes a bucket at 4000 B
  nn::DistributedDataParallel small(*model, {.bucket_cap_mb = kib4});
  EXPECT_EQ(small.bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  nn::DistributedDataParallel big(*model, {.bucket_cap_mb = 25});
  EXPECT_EQ(big.bucket_indices(), (std::vector<std::vector<size_t>>{{3, 2, 1, 0}}));
}

TEST(Ddp, BucketReductionIsRecordedWhenItsLastGradientIs) {
  // Buckets {fc2.bias, fc2.weight} and {fc1.bias, fc1.weight}: fc2's
  // gradients are ready first, so its all_reduce must sit in the step
  // graph before the backward's last matmul (fc1.weight's gradient), not
  // after the whole backward.
  auto model = std::make_shared<examples::Mlp>(100, 100, 10, 0.0);
  nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 4000.0 / (1024 * 1024)});
  ASSERT_EQ(ddp.bucket_indices().size(), 2u);
  Tensor x = from_vector(std::vector<float>(4 * 100, 0.5f), {4, 100});
  Tensor y = from_vector(std::vector<int64_t>{1, 2, 3, 4}, {4});
  nll_loss(model->forward(x), y).backward();
  const TraceGraph graph = pending_graph();
  std::vector<size_t> reduces;
  size_t last_matmul = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].op == OpKind::all_reduce) reduces.push_back(i);
    if (graph.nodes[i].op == OpKind::matmul) last_matmul = i;
  }
  ASSERT_EQ(reduces.size(), 2u) << graph.to_text();
  EXPECT_LT(reduces[0], last_matmul) << graph.to_text();
  EXPECT_GT(reduces[1], last_matmul) << graph.to_text();
  mark_step();
}

TEST(Ddp, UnusedParametersGetReducedZeros) {
  // The loss reaches fc2's bias only: the buckets of the other parameters
  // are reduced with zeros when the backward ends (every rank runs the
  // same collectives), and those gradients are zeros.
  auto model = std::make_shared<examples::Mlp>(2, 2, 2, 0.0);
  nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 1e-6});  // a bucket per parameter
  ASSERT_EQ(ddp.bucket_indices().size(), 4u);
  Tensor loss = (model->fc2->bias * rank_plus_one()).sum();
  loss.backward();
  mark_step();
  for (float g : model->fc2->bias.grad().to_vector<float>())
    EXPECT_FLOAT_EQ(g, (dist::world_size() + 1) / 2.0f);
  for (const Tensor& p : {model->fc1->weight, model->fc1->bias, model->fc2->weight})
    for (float g : p.grad().to_vector<float>()) EXPECT_EQ(g, 0.0f);
}

TEST(Ddp, ModulesThatDifferFailOnEveryRankNamingTheDifference) {
  if (dist::world_size() < 2) GTEST_SKIP() << "needs two ranks";
  auto model = std::make_shared<examples::Mlp>(4, dist::rank() == 1 ? 6 : 5, 2, 0.0);
  try {
    nn::DistributedDataParallel ddp(*model);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("the ranks' modules differ"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 has parameter fc1.weight f32[6, 4] where rank 0 has parameter "
                     "fc1.weight f32[5, 4]"),
              std::string::npos)
        << m;
  }
  // The ranks are still in step: a collective after the error works.
  EXPECT_FLOAT_EQ(dist::all_reduce(ones({1}), dist::ReduceOp::sum).item(), dist::world_size());
}

TEST(Ddp, BadBucketCapIsRefused) {
  auto model = std::make_shared<examples::Mlp>(2, 2, 2, 0.0);
  try {
    nn::DistributedDataParallel ddp(*model, {.bucket_cap_mb = 0});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bucket_cap_mb must be > 0, got 0"), std::string::npos)
        << e.what();
  }
  try {
    nn::DistributedDataParallel ddp(*model, {.first_bucket_cap_mb = -1});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first_bucket_cap_mb must be >= 0, got -1"),
              std::string::npos)
        << e.what();
  }
}

// The checkpoint: the 2-rank run saves (rank 0 writes, all wait), every
// rank loads it back; the 1-rank run (no mpirun) loads the same file and
// compares it with its own one-process reference.
// Collectives split into several MPI calls (MSTEP_DIST_MAX_CALL_BYTES,
// CallSlices.h) reduce each element exactly as one call does, so a run
// with a tiny per-call limit must give the unsplit run's losses and
// weights bit for bit. Two runs of this test (ctest fixtures): without
// the limit it writes its traces to MSTEP_DDP_SLICED_RECORD (one file per
// rank); with it, it reads them back and compares.
TEST(DdpSlicedCalls, LossesAndWeightsAreTheUnslicedRunsBitForBit) {
  const char* record = std::getenv("MSTEP_DDP_SLICED_RECORD");
  if (!record) GTEST_SKIP() << "MSTEP_DDP_SLICED_RECORD not set";
  const bool sliced = std::getenv("MSTEP_DIST_MAX_CALL_BYTES") != nullptr;
  const std::string path = std::string(record) + "." + std::to_string(dist::rank());
  std::vector<std::string> lines;  // "what name values..." in %a (exact)
  auto add = [&](const std::string& what, const std::string& name, const auto& values) {
    std::string line = what + " " + name;
    char buf[64];
    for (double v : values) {
      std::snprintf(buf, sizeof(buf), " %a", v);
      line += buf;
    }
    lines.push_back(line);
  };
  for (bool replay : {false, true})
    for (auto [what, family] : {std::pair{"mlp", mlp()}, std::pair{"gpt", gpt()}}) {
      const std::string run = std::string(what) + (replay ? "_replay" : "_lazy");
      const Trace t = train(family, /*ddp=*/true, replay);
      add(run, "losses", t.losses);
      for (const auto& [name, w] : t.weights) add(run, name, w);
    }
  if (!sliced) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr) << path;
    for (const std::string& l : lines) std::fprintf(f, "%s\n", l.c_str());
    std::fclose(f);
    return;
  }
  FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr) << path << ": run the unsliced record first (ctest fixture)";
  std::vector<std::string> want;
  std::string cur;
  for (int c; (c = std::fgetc(f)) != EOF;) {
    if (c == '\n') {
      want.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(c);
    }
  }
  std::fclose(f);
  ASSERT_EQ(lines.size(), want.size());
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i], want[i]) << "(sliced run against the unsliced one, bit for bit)";
}

TEST(DdpCheckpoint, SavedOnRankZeroLoadsEverywhere) {
  const char* path = std::getenv("MSTEP_DDP_CHECKPOINT");
  if (!path) GTEST_SKIP() << "MSTEP_DDP_CHECKPOINT not set";
  const Family f = mlp();
  if (dist::world_size() > 1) {
    manual_seed(7 + dist::rank());
    auto model = f.make();
    nn::DistributedDataParallel ddp(*model);
    auto opt = f.optimizer(*model);
    for (int64_t s = 0; s < kSteps; ++s) {
      opt->zero_grad();
      f.loss(*model, my_rows(f.batch(s, dist::world_size()))).backward();
      opt->step();
      mark_step();
    }
    save(*model, path);
    auto loaded = f.make();
    load(*loaded, path);
    for (auto& [name, p] : model->named_parameters())
      EXPECT_EQ(loaded->state_dict().at(name).to_vector<float>(), p.to_vector<float>()) << name;
  } else {
    const char* world = std::getenv("MSTEP_DDP_CHECKPOINT_WORLD");
    ASSERT_NE(world, nullptr);
    Trace want;
    {
      // One process, batch 2B: the 2-rank run's global batches.
      manual_seed(7);
      auto model = f.make();
      auto opt = f.optimizer(*model);
      for (int64_t s = 0; s < kSteps; ++s) {
        std::vector<Tensor> b = f.batch(s, std::atoi(world));
        opt->zero_grad();
        f.loss(*model, b).backward();
        opt->step();
        mark_step();
      }
      for (auto& [name, p] : model->named_parameters()) want.weights[name] = p.to_vector<float>();
    }
    auto loaded = f.make();
    load(*loaded, path);
    Trace got;
    for (auto& [name, p] : loaded->named_parameters()) got.weights[name] = p.to_vector<float>();
    expect_close(got, want, f.reduction, "2-rank checkpoint in a 1-rank run");
  }
}

}  // namespace
}  // namespace mstep

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mstep::distributed::init();
  if (mstep::distributed::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  mstep::distributed::finalize();
  return failed;
}
