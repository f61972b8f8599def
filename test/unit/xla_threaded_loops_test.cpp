// The xla loops that ran on one thread until this round, now row functions
// the step function splits over the OpenMP threads (above 32K elements of
// work): argmax over many rows, nll_loss without reduction (cross_entropy's
// per-row losses), softmax over many short rows and over dim 0, index_select
// (embedding) and index_add with duplicate indices (its gradient), and the
// optimizer update with clip_grad_norm_ (the norms on one thread first, the
// update split). Each row is computed as one thread computes it, so 2 and 3
// threads give 1 thread's values bit for bit; the values are ref's (bit for
// bit where the loop sums in ref's order, index_add's duplicates included).
#include <omp.h>

#include <cmath>
#include <vector>

#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::callouts_of_last_step;
using testing::RecordSteps;
using ::testing::IsEmpty;

constexpr Device kXla{DeviceType::xla, 0};
constexpr Device kRef{DeviceType::ref, 0};
constexpr Device kCpu{DeviceType::cpu, 0};

Tensor on(Device d, Shape s, int seed) {
  std::vector<float> v(s.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::sin(0.731 * i + 1.37 * seed));
  return from_vector(v, s, DType::f32, d);
}

/// Integer indices (i * 7 + seed) % size: every value repeats.
Tensor indices(Device d, int64_t n, int64_t size, int seed) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (i * 7 + seed) % size;
  return from_vector(v, {n}, std::nullopt, d);
}

/// `make(device)`'s results after one step, on `threads` threads, as f32
/// vectors (integers converted exactly); on xla the step must not call out.
template <typename Make> std::vector<std::vector<float>> run(Device d, int threads, Make make) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  RecordSteps record;
  std::vector<Tensor> out = make(d);
  mark_step();
  if (d == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty());
  std::vector<std::vector<float>> values;
  for (const Tensor& t : out) values.push_back(to(t, DType::f32).to_vector<float>());
  omp_set_num_threads(saved);
  return values;
}

/// xla on 1, 2 and 3 threads: the same bits; and ref's values (`exact`:
/// the same bits).
template <typename Make> void expect_split_changes_nothing(Make make, std::vector<bool> exact) {
  const auto one = run(kXla, 1, make);
  const auto two = run(kXla, 2, make);
  const auto three = run(kXla, 3, make);
  const auto ref = run(kRef, 1, make);
  ASSERT_EQ(one.size(), ref.size());
  ASSERT_EQ(exact.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(two[i], one[i]);
    EXPECT_EQ(three[i], one[i]);
    ASSERT_EQ(one[i].size(), ref[i].size());
    if (exact[i]) {
      EXPECT_EQ(one[i], ref[i]);
      continue;
    }
    for (size_t k = 0; k < ref[i].size(); ++k)
      ASSERT_NEAR(one[i][k], ref[i][k], 2e-6 * (1 + std::abs(ref[i][k]))) << "element " << k;
  }
}

TEST(XlaThreadedLoops, ArgmaxLossesAndSoftmaxOverManyRowsGiveOneThreadsBits) {
  expect_split_changes_nothing(
      [](Device d) {
        Tensor logits = on(d, {40000, 10}, 1) * 5.0;
        Tensor target = indices(d, 40000, 10, 3);
        Tensor tall = on(d, {10, 4000}, 2) * 5.0;
        return std::vector<Tensor>{argmax(logits, 1),
                                   cross_entropy(logits, target, Reduction::none),
                                   cross_entropy(logits, target, Reduction::mean),
                                   nll_loss(log_softmax(logits, 1), target, Reduction::sum),
                                   softmax(logits, 1),
                                   softmax(tall, 0),
                                   log_softmax(tall, 0)};
      },
      {true, false, false, false, false, false, false});
}

// Embedding: index_select of 4096 rows of 64, and its gradient, index_add,
// where every table row receives many tokens' rows (duplicates add in token
// order in each column block, as ref adds them: the same bits); and an
// index_add along dim 1 of a 3-d tensor.
TEST(XlaThreadedLoops, IndexSelectAndIndexAddWithDuplicatesGiveOneThreadsBits) {
  expect_split_changes_nothing(
      [](Device d) {
        Tensor table = on(d, {100, 64}, 1).requires_grad_();
        Tensor tokens = indices(d, 4096, 100, 2);
        Tensor looked_up = index_select(table, 0, tokens);
        sum(looked_up * on(d, {4096, 64}, 3)).backward();
        Tensor cube = on(d, {8, 50, 90}, 4);
        Tensor added = index_add(cube, 1, indices(d, 200, 50, 5), on(d, {8, 200, 90}, 6));
        return std::vector<Tensor>{looked_up, table.grad(), added};
      },
      {true, true, true});
}

// clip_grad_norm_ then an optimizer step: the norms are summed on one
// thread, the update is split (ranges inside parameters at 3 threads); 1,
// 2 and 3 threads give the same parameters, and the cpu backend's up to the
// norms' f64 summation order (see xla_loops_test's clipping case).
TEST(XlaThreadedLoops, TheClippedOptimizerUpdateSplitOverThreadsGivesOneThreadsBits) {
  auto train = [](Device d, int threads, auto make_optimizer) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    RecordSteps record;
    std::vector<Tensor> params = {on(d, {100, 257}, 1).requires_grad_(),
                                  on(d, {257}, 2).requires_grad_(),
                                  on(d, {300, 100}, 3).requires_grad_()};
    auto opt = make_optimizer(params);
    std::vector<std::vector<float>> values;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = sum(params[0] * params[0]);
      for (size_t i = 1; i < params.size(); ++i)
        loss = loss + sum(params[i] * on(d, params[i].shape(), 10 + static_cast<int>(i)));
      loss.backward();
      Tensor norm = optim::clip_grad_norm_(params, 5.0);
      opt.step();
      mark_step();
      if (d == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
      values.push_back(norm.to_vector<float>());
    }
    for (const Tensor& p : params) values.push_back(p.to_vector<float>());
    omp_set_num_threads(saved);
    return values;
  };
  auto check = [&](auto make_optimizer) {
    const auto one = train(kXla, 1, make_optimizer);
    EXPECT_EQ(train(kXla, 2, make_optimizer), one);
    EXPECT_EQ(train(kXla, 3, make_optimizer), one);
    const auto cpu = train(kCpu, 1, make_optimizer);
    ASSERT_EQ(cpu.size(), one.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_EQ(one[i].size(), cpu[i].size());
      for (size_t k = 0; k < cpu[i].size(); ++k)
        ASSERT_NEAR(one[i][k], cpu[i][k], 1e-5 * (1 + std::abs(cpu[i][k]))) << "element " << k;
    }
  };
  check([](std::vector<Tensor> p) { return optim::AdamW(p, {.lr = 0.01}); });
  check([](std::vector<Tensor> p) { return optim::SGD(p, {.lr = 0.1, .momentum = 0.9}); });
}

} // namespace
} // namespace mstep
