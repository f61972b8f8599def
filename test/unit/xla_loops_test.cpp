// The ops the xla step function computes with loops of its own
// (lib/backends/xla/XlaOpLoops.h) instead of calling out to the cpu
// backend's kernels: each family compiles with no callout and gives the
// ref backend's values (the rng ops and the optimizer update bit for bit;
// reductions and softmax to f32 rounding); a bad nll_loss target stops
// the step with the target named before a donated parameter is written;
// and the mnist_mlp training step (forward, backward, optimizer, accuracy)
// calls out for nothing.
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "examples/models/Mlp.h"
#include "lib/backends/xla/XlaExecutable.h"
#include "lib/compiler/Compiler.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"
#include "test/unit/XlaStepCallouts.h"

namespace mstep {
namespace {

using testing::RecordSteps;
using testing::callouts_of_last_step;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
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

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::abs(want[i]))) << "element " << i;
}

/// `make(device)`'s results on xla (checking that the step has no
/// callouts) and on ref.
template <typename F> std::pair<std::vector<Tensor>, std::vector<Tensor>> on_xla_and_ref(F make) {
  RecordSteps record;
  std::vector<Tensor> xla = make(kXla);
  mark_step();
  EXPECT_THAT(callouts_of_last_step(), IsEmpty());
  std::vector<Tensor> ref = make(kRef);
  mark_step();
  return {xla, ref};
}

TEST(XlaLoops, ReductionsOverLeadingTrailingAndAllDims) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x = on(d, {4, 5, 6}, 1);
    return std::vector<Tensor>{sum(x, {0}),  sum(x, {0, 1}), sum(x, {2}, true), sum(x),
                               mean(x, {1}), mean(x),        max(x, {2}),       min(x, {0}),
                               max(x),       sum(x, {1}),    mean(x, {0, 1})};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(xla[i].shape(), ref[i].shape());
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
}

// Large softmax, norm, sum and copy loops are row functions that the step
// function splits over the OpenMP threads (OpLoop::rows). Each row is
// computed as one thread computes it, so an uneven split over 3 threads
// gives 1 thread's values bit for bit, and ref's to f32 rounding. The
// shapes are above the split's threshold (32K elements) and cover each
// row kind: softmax rows and lanes, norm rows, column blocks and rows of
// sums, a strided sum, the outer loop of a permute, expand, slice,
// cat and slice_scatter (whose src overwrites the input row by row), and
// the elements of dropout, rand and randn (Philox at the element's index;
// an empty dropout runs no row); argmax, per-row losses (nll_loss without
// reduction, cross_entropy's) and softmax over many 10-element rows and
// over dim 0 (its lanes are the rows); index_select's output blocks
// (embedding) and index_add's column blocks (its gradient: every table row
// gets many tokens' rows, added in token order whatever the split, so ref's
// bits too).
TEST(XlaLoops, RowsSplitOverThreadsGiveOneThreadsValuesBitForBit) {
  auto make = [](Device d) {
    Tensor rows = on(d, {300, 257}, 21) * 10.0;
    Tensor lanes = on(d, {4, 300, 40}, 22) * 10.0;
    Tensor w = on(d, {257}, 23), b = on(d, {257}, 24);
    Tensor logits = on(d, {40000, 10}, 28) * 5.0;
    std::vector<int64_t> classes(40000), tokens(4096), lane_ids(4096);
    for (size_t i = 0; i < classes.size(); ++i) classes[i] = static_cast<int64_t>(i * 7 % 10);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>(i * 7 % 100);
    for (size_t i = 0; i < lane_ids.size(); ++i) lane_ids[i] = static_cast<int64_t>(i * 11 % 300);
    Tensor target = from_vector(classes, {40000}, std::nullopt, d);
    Tensor table = on(d, {100, 64}, 29).requires_grad_();
    Tensor looked_up = embedding(from_vector(tokens, {4096}, std::nullopt, d), table);
    sum(looked_up * on(d, {4096, 64}, 30)).backward();
    Tensor tall = on(d, {10, 4000}, 31) * 5.0;
    return std::vector<Tensor>{to(argmax(logits, 1), DType::f32),
                               cross_entropy(logits, target, Reduction::none),
                               nll_loss(log_softmax(logits, 1), target, Reduction::sum),
                               softmax(logits, 1),
                               softmax(tall, 0),
                               log_softmax(tall, 0),
                               looked_up,
                               table.grad(),
                               index_add(lanes, 1, from_vector(lane_ids, {4096}, std::nullopt, d),
                                         on(d, {4, 4096, 40}, 32)),
                               softmax(rows, 1),
                               log_softmax(rows, 1),
                               softmax(lanes, 1),
                               layer_norm(rows, {257}, w, b),
                               rms_norm(rows, {257}, w),
                               sum(rows, {0}),
                               mean(rows, {1}),
                               sum(on(d, {100, 400, 3}, 25), {1}),
                               permute(lanes, {2, 0, 1}),
                               expand(on(d, {1, 300, 257}, 26), {2, 300, 257}),
                               slice(lanes, 2, 1, 40, 2),
                               cat({lanes, lanes * 2.0}, 2),
                               slice_scatter(lanes, slice(lanes, 2, 0, 20) * 3.0, 2, 10, 30),
                               dropout(rows, 0.3),
                               rand({40, 1000}, DType::f32, d),
                               randn({40, 1000}, DType::f32, d),
                               dropout(on(d, {0, 7}, 27), 0.3)};
  };
  const int threads = omp_get_max_threads();
  auto on_xla = [&](int n) {
    omp_set_num_threads(n);
    manual_seed(7);
    std::vector<Tensor> out = make(kXla);
    mark_step();
    std::vector<std::vector<float>> values;
    for (const Tensor& t : out) values.push_back(t.to_vector<float>());
    return values;
  };
  const std::vector<std::vector<float>> one = on_xla(1), three = on_xla(3);
  omp_set_num_threads(threads);
  manual_seed(7);
  std::vector<Tensor> ref = make(kRef);
  mark_step();
  ASSERT_EQ(one.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(three[i], one[i]);
    expect_near(one[i], ref[i].to_vector<float>());
  }
  // argmax, the embedding rows and both index_adds: ref's bits.
  for (size_t i : {0, 6, 7, 8}) EXPECT_EQ(one[i], ref[i].to_vector<float>()) << i;
}

// var in two f64 passes, as the ref kernel: over a last, a leading and all
// dims, with corrections 0, 1 and one that leaves no divisor (NaN).
TEST(XlaLoops, VarianceIsALoopWithTheRefKernelsValues) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x = on(d, {4, 5, 6}, 3);
    return std::vector<Tensor>{var(x, {2}), var(x, {0}, 0), var(x), var(x, {0, 1}, 1, true),
                               var(on(d, {3, 1}, 4), {1})};
  });
  for (size_t i = 0; i + 1 < xla.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(xla[i].shape(), ref[i].shape());
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
  for (float v : xla.back().to_vector<float>()) EXPECT_TRUE(std::isnan(v)) << v; // 0 / 0
}

// logsumexp shifted by the row maximum in f64, as the ref kernel: large
// values do not overflow, a row of -inf stays -inf.
TEST(XlaLoops, LogsumexpIsALoopWithTheRefKernelsValues) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    const float inf = std::numeric_limits<float>::infinity();
    Tensor x = on(d, {4, 5, 6}, 5);
    Tensor big = from_vector(std::vector<float>{100, 101, 102, -inf, -inf, -inf}, {2, 3},
                             DType::f32, d);
    return std::vector<Tensor>{logsumexp(x, {2}), logsumexp(x, {0}), logsumexp(x, {0, 1, 2}),
                               logsumexp(x, {1}, true), logsumexp(big, {1})};
  });
  for (size_t i = 0; i + 1 < xla.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(xla[i].shape(), ref[i].shape());
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
  const std::vector<float> big = xla.back().to_vector<float>();
  EXPECT_NEAR(big[0], 102 + std::log(1 + std::exp(-1.0) + std::exp(-2.0)), 1e-4);
  EXPECT_EQ(big[1], -std::numeric_limits<float>::infinity());
}

TEST(XlaLoops, ArgmaxTakesTheFirstMaximumAndNaNWins) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    const float nan = std::nanf("");
    Tensor x = from_vector(std::vector<float>{1, 3, 3, 0, 2, nan, 5, 5, 4, 4, -1, -2}, {3, 4},
                           DType::f32, d);
    return std::vector<Tensor>{argmax(x, 1), argmax(x, 0), argmax(on(d, {5, 7}, 2))};
  });
  EXPECT_THAT(xla[0].to_vector<int64_t>(), ElementsAre(1, 1, 0));
  for (size_t i = 0; i < xla.size(); ++i)
    EXPECT_EQ(xla[i].to_vector<int64_t>(), ref[i].to_vector<int64_t>()) << i;
}

TEST(XlaLoops, IntegerSumsStayIntegers) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x =
        from_vector(std::vector<int64_t>{1, 2, 3, int64_t{1} << 40, 5, 6}, {2, 3}, std::nullopt, d);
    return std::vector<Tensor>{sum(x, {0}), sum(x)};
  });
  EXPECT_THAT(xla[0].to_vector<int64_t>(), ElementsAre((int64_t{1} << 40) + 1, 7, 9));
  EXPECT_EQ(xla[1].to_vector<int64_t>(), ref[1].to_vector<int64_t>());
}

TEST(XlaLoops, SoftmaxAndLogSoftmaxAlongAnyDim) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x = on(d, {3, 4, 5}, 3) * 10.0;
    return std::vector<Tensor>{softmax(x, 2), softmax(x, 0), log_softmax(x, 1), log_softmax(x, 2)};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
}

TEST(XlaLoops, NllLossWithIgnoredTargetsAndEveryReduction) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor logp = log_softmax(on(d, {5, 4}, 4), 1);
    Tensor t = from_vector(std::vector<int64_t>{3, -100, 0, 2, 1}, {5}, std::nullopt, d);
    return std::vector<Tensor>{nll_loss(logp, t), nll_loss(logp, t, Reduction::sum),
                               nll_loss(logp, t, Reduction::none),
                               cross_entropy(on(d, {5, 4}, 5), t)};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
  EXPECT_EQ(xla[2].to_vector<float>()[1], 0.0f); // the ignored row
}

TEST(XlaLoops, AnOutOfRangeTargetStopsTheStepBeforeTheParameterIsWritten) {
  Tensor w = on(kXla, {4, 3}, 1);
  mark_step();
  const std::vector<float> before = w.to_vector<float>();
  const std::string msg = testing::error_of([&] {
    Tensor t = from_vector(std::vector<int64_t>{0, 3}, {2}, std::nullopt, kXla);
    Tensor loss = nll_loss(log_softmax(on(kXla, {2, 3}, 2), 1), t);
    w.copy_(w * 2.0); // donated: would be written in place after the loss
    mark_step();
  });
  EXPECT_THAT(msg, HasSubstr("target 3 at position 1 is out of range for C = 3"));
  std::vector<float> doubled(before);
  for (float& v : doubled) v *= 2;
  // The failed step's update of w did not happen; the retried one did.
  EXPECT_EQ(w.to_vector<float>(), doubled);
  Tensor ok = w + 1.0;
  mark_step();
  EXPECT_FLOAT_EQ(ok.to_vector<float>()[0], doubled[0] + 1);
}

TEST(XlaLoops, RandomNumbersAndDropoutAreRefsBitForBit) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    manual_seed(7);
    Tensor u = rand({37}, DType::f32, d);
    Tensor n = randn({19}, DType::f32, d);
    Tensor x = on(d, {6, 11}, 6);
    return std::vector<Tensor>{u,
                               n,
                               dropout(x, 0.3),
                               dropout(x, 0.0),
                               arange(3, 40, 3, DType::f32, d),
                               arange(0, 9, 2, DType::i64, d)};
  });
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(xla[i].to_vector<float>(), ref[i].to_vector<float>()) << i;
  EXPECT_EQ(xla[4].to_vector<float>(), ref[4].to_vector<float>());
  EXPECT_THAT(xla[5].to_vector<int64_t>(), ElementsAre(0, 2, 4, 6, 8));
}

TEST(XlaLoops, PermuteExpandSliceAndCatAreCopies) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x = on(d, {2, 3, 4}, 7);
    Tensor b = on(d, {3, 1}, 8);
    return std::vector<Tensor>{permute(x, {2, 0, 1}), expand(b, {2, 3, 5}), slice(x, 2, 1, 4, 2),
                               cat({x, x * 2.0}, 1), permute(x, {0, 2, 1}) + 1.0};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    EXPECT_EQ(xla[i].shape(), ref[i].shape()) << i;
    EXPECT_EQ(xla[i].to_vector<float>(), ref[i].to_vector<float>()) << i;
  }
}

TEST(XlaLoops, LayerNormAndRmsNorm) {
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor x = on(d, {3, 4, 6}, 10) * 4.0 + 1.0;
    Tensor w = on(d, {6}, 11), b = on(d, {6}, 12);
    return std::vector<Tensor>{layer_norm(x, {6}, w, b), layer_norm(x, {4, 6}), rms_norm(x, {6}, w),
                               rms_norm(x, {4, 6})};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
}

TEST(XlaLoops, EmbeddingAndItsGradient) {
  // index_select forward, index_add backward (duplicate ids add up).
  auto [xla, ref] = on_xla_and_ref([](Device d) {
    Tensor table = on(d, {5, 3}, 13).requires_grad_();
    Tensor ids = from_vector(std::vector<int64_t>{4, 0, 4, 2}, {4}, std::nullopt, d);
    Tensor rows = embedding(ids, table);
    sum(rows * on(d, {4, 3}, 14)).backward();
    return std::vector<Tensor>{rows, table.grad(), index_select(on(d, {2, 5, 3}, 15), 1, ids)};
  });
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    expect_near(xla[i].to_vector<float>(), ref[i].to_vector<float>());
  }
}

TEST(XlaLoops, AnOutOfRangeIndexIsNamed) {
  Tensor table = on(kXla, {4, 3}, 1);
  mark_step();
  const std::string msg = testing::error_of([&] {
    Tensor ids = from_vector(std::vector<int64_t>{1, -1}, {2}, std::nullopt, kXla);
    Tensor rows = index_select(table, 0, ids) * 2.0;
    mark_step();
  });
  EXPECT_THAT(msg, HasSubstr("index -1 (element 1"));
}

/// Three steps of `make_optimizer` on a two-layer model on `device`
/// (clipping the gradients first when `clip`); the parameters after them.
/// With `check_callouts`, each optimizer step compiles with no callout.
template <typename Make>
std::vector<std::vector<float>> train(Device device, Make make_optimizer, bool clip,
                                      bool check_callouts) {
  RecordSteps record;
  Tensor w1 = on(device, {6, 5}, 1).requires_grad_();
  Tensor b1 = on(device, {5}, 2).requires_grad_();
  Tensor w2 = on(device, {5, 3}, 3).requires_grad_();
  Tensor x = on(device, {4, 6}, 4);
  auto opt = make_optimizer(std::vector<Tensor>{w1, b1, w2});
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    Tensor loss = mean(relu(matmul(relu(matmul(x, w1) + b1), w2)) * 3.0);
    loss.backward();
    if (clip) optim::clip_grad_norm_({w1, b1, w2}, 0.05);
    opt.step();
    mark_step();
    if (check_callouts) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
  }
  return {w1.to_vector<float>(), b1.to_vector<float>(), w2.to_vector<float>()};
}

/// The optimizer's parameters on xla equal the cpu backend's and ref's bit
/// for bit (with clipping: within the norms' f64 summation order).
template <typename Make> void expect_optimizer_matches(Make make, bool clip = false) {
  const auto xla = train(kXla, make, clip, true);
  const auto cpu = train(kCpu, make, clip, false);
  const auto ref = train(kRef, make, clip, false);
  for (size_t i = 0; i < xla.size(); ++i) {
    SCOPED_TRACE(i);
    if (clip) {
      expect_near(xla[i], cpu[i]);
    } else {
      EXPECT_EQ(xla[i], cpu[i]);
      EXPECT_EQ(xla[i], ref[i]);
    }
  }
}

TEST(XlaLoops, SgdWithMomentumNesterovAndWeightDecay) {
  expect_optimizer_matches([](std::vector<Tensor> p) {
    return optim::SGD(p, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
  });
  expect_optimizer_matches([](std::vector<Tensor> p) {
    return optim::SGD(p, {.lr = 0.1, .momentum = 0.5, .dampening = 0.25});
  });
}

TEST(XlaLoops, AdamAndAdamW) {
  expect_optimizer_matches(
      [](std::vector<Tensor> p) { return optim::Adam(p, {.lr = 0.01, .weight_decay = 0.1}); });
  expect_optimizer_matches(
      [](std::vector<Tensor> p) { return optim::Adam(p, {.lr = 0.01, .amsgrad = true}); });
  expect_optimizer_matches([](std::vector<Tensor> p) { return optim::AdamW(p, {.lr = 0.01}); });
}

TEST(XlaLoops, Adadelta) {
  expect_optimizer_matches([](std::vector<Tensor> p) { return optim::Adadelta(p, {.lr = 0.5}); });
}

TEST(XlaLoops, ClippedGradientsBeforeTheUpdate) {
  expect_optimizer_matches(
      [](std::vector<Tensor> p) { return optim::SGD(p, {.lr = 0.1, .momentum = 0.9}); },
      /*clip=*/true);
}

// The optimizer update is a row function over the elements of all
// parameters in turn, split over the threads above 32K elements: an uneven
// split over 3 threads (its ranges start and end inside parameters) gives
// 1 thread's parameters and states bit for bit, and the cpu backend's.
// With clip_grad_norm_ first, the norms are summed on one thread before
// the split update: 1, 2 and 3 threads give the same total norms and
// parameters, and cpu's within the norms' f64 summation order. The
// gradients are elementwise (no gemm, whose sums may depend on the thread
// count); three steps advance the counters.
TEST(XlaLoops, TheOptimizerUpdateSplitOverThreadsGivesOneThreadsValuesBitForBit) {
  auto run = [](Device d, int threads, auto make_optimizer, bool clip = false) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    RecordSteps record;
    std::vector<Tensor> params = {on(d, {100, 257}, 1).requires_grad_(),
                                  on(d, {257}, 2).requires_grad_(),
                                  on(d, {300, 100}, 3).requires_grad_(),
                                  on(d, {211, 97}, 4).requires_grad_()};
    auto opt = make_optimizer(params);
    std::vector<std::vector<float>> values;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = sum(params[0] * params[0]);
      for (size_t i = 1; i < params.size(); ++i)
        loss = loss + sum(params[i] * on(d, params[i].shape(), 10 + static_cast<int>(i)));
      loss.backward();
      Tensor norm = clip ? optim::clip_grad_norm_(params, 5.0) : Tensor{};
      opt.step();
      mark_step();
      if (d == kXla) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "step " << step;
      if (clip) values.push_back(norm.to_vector<float>());
    }
    for (const Tensor& p : params) values.push_back(p.to_vector<float>());
    omp_set_num_threads(saved);
    return values;
  };
  auto check = [&](auto make_optimizer) {
    const auto three = run(kXla, 3, make_optimizer);
    EXPECT_EQ(three, run(kXla, 1, make_optimizer));
    EXPECT_EQ(three, run(kCpu, 1, make_optimizer));
  };
  check([](std::vector<Tensor> p) { return optim::AdamW(p, {.lr = 0.01}); });
  check([](std::vector<Tensor> p) { return optim::Adadelta(p, {.lr = 0.5}); });
  check([](std::vector<Tensor> p) {
    return optim::SGD(p, {.lr = 0.1, .momentum = 0.5, .dampening = 0.25});
  });
  auto check_clipped = [&](auto make_optimizer) {
    const auto one = run(kXla, 1, make_optimizer, true);
    EXPECT_EQ(run(kXla, 2, make_optimizer, true), one);
    EXPECT_EQ(run(kXla, 3, make_optimizer, true), one);
    const auto cpu = run(kCpu, 1, make_optimizer, true);
    ASSERT_EQ(cpu.size(), one.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      SCOPED_TRACE(i);
      expect_near(one[i], cpu[i]);
    }
  };
  check_clipped([](std::vector<Tensor> p) { return optim::AdamW(p, {.lr = 0.01}); });
  check_clipped([](std::vector<Tensor> p) { return optim::SGD(p, {.lr = 0.1, .momentum = 0.9}); });
}

TEST(XlaLoops, TheMnistMlpTrainingStepHasNoCallouts) {
  // mnist_mlp's step (examples/mnist_mlp.cpp): its forward and backward,
  // its Adadelta update and its accuracy, each one graph with no callout,
  // and the losses of ref.
  auto losses = [](Device device, bool check) {
    RecordSteps record;
    const Device saved = default_device();
    set_default_device(device);
    manual_seed(0);
    auto model = std::make_shared<examples::Mlp>(20, 16, 4);
    optim::Adadelta opt(model->parameters(), {.lr = 0.1});
    Tensor x = on(device, {8, 20}, 9);
    Tensor y = from_vector(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0}, {8}, std::nullopt, device);
    std::vector<float> out;
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      Tensor loss = nll_loss(model->forward(x), y);
      loss.backward();
      mark_step();
      if (check) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "backward, step " << step;
      opt.step();
      mark_step();
      if (check) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "update, step " << step;
      out.push_back(loss.item());
    }
    Tensor predicted = argmax(model->forward(x), 1);
    mark_step();
    if (check) EXPECT_THAT(callouts_of_last_step(), IsEmpty()) << "accuracy";
    set_default_device(saved);
    return out;
  };
  const std::vector<float> xla = losses(kXla, true);
  expect_near(xla, losses(kRef, false));
}

} // namespace
} // namespace mstep
