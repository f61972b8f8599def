// make_graphed_callable and ModuleCacher against plain lazy autograd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "mstep/mstep.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

struct Mlp : nn::Module {
  Mlp() : nn::Module("Mlp") {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(6, 12));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(12, 4));
  }
  Tensor forward(const Tensor& x) { return (*fc2)(gelu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

Tensor random_input(int64_t rows, int seed, bool requires_grad = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  std::vector<float> v(rows * 6);
  for (float& x : v) x = n(rng);
  Tensor t = from_vector(v, {rows, 6});
  if (requires_grad) t.requires_grad_();
  return t;
}

void expect_close(const Tensor& a, const Tensor& b, const char* what) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5) << what << " [" << i << "]";
}

TEST(GraphedCallableTest, ForwardAndBackwardMatchLazyAutograd) {
  manual_seed(1);
  auto model = std::make_shared<Mlp>();
  GraphedCallable graphed = make_graphed_callable(
      [model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model->forward(in[0])}; },
      {random_input(5, 0, /*requires_grad=*/true)}, model->parameters());
  EXPECT_TRUE(graphed.has_backward());
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined()) << "capture leaves .grad";

  for (int call = 1; call <= 3; ++call) {
    // Lazy reference.
    Tensor x_ref = random_input(5, call, true);
    Tensor ref = model->forward(x_ref);
    sum(ref * ref).backward();
    mark_step();
    std::vector<Tensor> ref_grads;
    for (const Tensor& p : model->parameters()) ref_grads.push_back(p.grad().detach());
    for (Tensor p : model->parameters()) p.set_grad(Tensor());

    const Metrics before = metrics();
    Tensor x = random_input(5, call, true);
    Tensor out = graphed({x})[0];
    expect_close(out, ref, "output");
    sum(out * out).backward();  // replays the backward graph
    mark_step();
    EXPECT_EQ(metrics().replays - before.replays, 2) << "one forward and one backward replay";
    expect_close(x.grad(), x_ref.grad(), "input grad");
    std::vector<Tensor> params = model->parameters();
    for (size_t j = 0; j < params.size(); ++j) expect_close(params[j].grad(), ref_grads[j], "param grad");
    for (Tensor p : model->parameters()) p.set_grad(Tensor());
  }
}

TEST(GraphedCallableTest, TrainingWithTheOptimizerOutsideMatchesLazy) {
  auto train = [](bool graphed_mode) {
    manual_seed(5);
    auto model = std::make_shared<Mlp>();
    optim::SGD opt(model->parameters(), {.lr = 0.05, .momentum = 0.9});
    std::optional<GraphedCallable> graphed;
    if (graphed_mode) graphed = make_graphed_callable(model, random_input(8, 0));
    std::vector<float> losses;
    for (int step = 0; step < 5; ++step) {
      Tensor x = random_input(8, 10 + step);
      opt.zero_grad();
      Tensor out = graphed ? (*graphed)({x})[0] : model->forward(x);
      Tensor loss = mean(out * out);
      loss.backward();
      opt.step();
      mark_step();
      losses.push_back(static_cast<float>(loss.item()));
    }
    return losses;
  };
  std::vector<float> lazy = train(false), graphed = train(true);
  ASSERT_EQ(lazy.size(), graphed.size());
  for (size_t i = 0; i < lazy.size(); ++i) EXPECT_NEAR(lazy[i], graphed[i], 1e-5) << "step " << i;
  EXPECT_LT(graphed.back(), graphed.front());
}

TEST(GraphedCallableTest, WrongInputsAreTypedErrors) {
  auto model = std::make_shared<Mlp>();
  GraphedCallable graphed = make_graphed_callable(model, random_input(4, 0));
  try {
    graphed({random_input(3, 1)});
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::shape_mismatch);
    EXPECT_THAT(e.what(), HasSubstr("f32[3, 6]"));
    EXPECT_THAT(e.what(), HasSubstr("f32[4, 6]"));
    EXPECT_THAT(e.what(), HasSubstr("ModuleCacher"));
  }
  try {
    graphed({random_input(4, 1).to(DType::f64)});
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::dtype_mismatch);
  }
  try {
    graphed({random_input(4, 1), random_input(4, 2)});
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::arity_mismatch);
  }
  // Still usable afterwards.
  Tensor good = random_input(4, 3);
  NoGradGuard no_grad;
  expect_close(graphed({good})[0], model->forward(good), "after errors");
}

TEST(GraphedCallableTest, AnInputOnAnotherDeviceNamesBothDevices) {
  auto model = std::make_shared<Mlp>();
  GraphedCallable graphed = make_graphed_callable(model, random_input(4, 0));
  // Captured on the default device (MSTEP_DEVICE); the input is on another.
  const Device home = default_device();
  const Device other{home.type == DeviceType::cpu ? DeviceType::ref : DeviceType::cpu, 0};
  try {
    graphed({random_input(4, 1).to(other)});
    FAIL();
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::device_mismatch);
    EXPECT_THAT(e.what(), HasSubstr("input 0 lives on " + other.to_string() +
                                    " but the graph was captured on " + home.to_string()));
    EXPECT_THAT(e.what(), HasSubstr(".to(device)"));
  }
  Tensor good = random_input(4, 3);
  NoGradGuard no_grad;
  expect_close(graphed({good})[0], model->forward(good), "after the error");
}

TEST(GraphedCallableTest, BackwardOfAnEarlierCallAfterALaterForwardIsAnError) {
  manual_seed(2);
  auto model = std::make_shared<Mlp>();
  GraphedCallable graphed = make_graphed_callable(model, random_input(5, 0));
  Tensor first = graphed({random_input(5, 1)})[0];
  Tensor second = graphed({random_input(5, 2)})[0];
  try {
    sum(first * first).backward();
    FAIL();
  } catch (const ReplayError&) {
    FAIL() << "not a replay error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("backward of forward call #1 after forward call #2"));
    EXPECT_THAT(e.what(), HasSubstr("call backward before the next forward"));
  }
  for (const Tensor& p : model->parameters()) EXPECT_FALSE(p.grad().defined()) << "nothing accumulated";

  // The latest call's backward works, and so does the next pair.
  auto lazy_grads = [&](const Tensor& x) {
    Tensor ref = model->forward(x);
    sum(ref * ref).backward();
    mark_step();
    std::vector<Tensor> grads;
    for (Tensor p : model->parameters()) {
      grads.push_back(p.grad().detach());
      p.set_grad(Tensor());
    }
    return grads;
  };
  auto expect_grads = [&](const Tensor& out, const std::vector<Tensor>& want, const char* what) {
    sum(out * out).backward();
    mark_step();
    std::vector<Tensor> params = model->parameters();
    for (size_t j = 0; j < params.size(); ++j) expect_close(params[j].grad(), want[j], what);
    for (Tensor p : params) p.set_grad(Tensor());
  };
  expect_grads(second, lazy_grads(random_input(5, 2)), "latest call");
  const std::vector<Tensor> want = lazy_grads(random_input(5, 3));
  expect_grads(graphed({random_input(5, 3)})[0], want, "next pair");
}

TEST(ModuleCacherTest, OneGraphPerShapeWithLruEviction) {
  auto model = std::make_shared<Mlp>();
  model->eval();
  NoGradGuard no_grad;
  ModuleCacher cached(model, {.max_graphs = 2});
  for (int64_t rows : {8, 8, 3, 8, 3}) {
    Tensor x = random_input(rows, static_cast<int>(rows));
    expect_close(cached(x), model->forward(x), "cached forward");
  }
  EXPECT_EQ(cached.captures(), 2);
  EXPECT_EQ(cached.hits(), 3);
  EXPECT_EQ(cached(random_input(5, 5)).shape()[0], 5);  // a third shape evicts the oldest (8)
  EXPECT_EQ(cached.num_graphs(), 2u);
  EXPECT_EQ(cached.evictions(), 1);
  cached(random_input(8, 8));
  EXPECT_EQ(cached.captures(), 4) << "8 was evicted and is captured again";
}

TEST(ModuleCacherTest, NonTensorArgumentsAreKeysNeverFrozen) {
  NoGradGuard no_grad;
  ModuleCacher scaled(
      [](const std::vector<Tensor>& in, const CallArgs& args) {
        return std::vector<Tensor>{in[0] * std::get<double>(args.at(0))};
      },
      {});
  Tensor x = from_vector(std::vector<float>{1, 2}, {2});
  EXPECT_EQ(scaled({x}, {2.0})[0].to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(scaled({x}, {3.0})[0].to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(scaled({x}, {2.0})[0].to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_EQ(scaled.captures(), 2);
  EXPECT_EQ(scaled.hits(), 1);
}

TEST(ModuleCacherTest, TrainsThroughTheCachedGraphs) {
  manual_seed(2);
  auto model = std::make_shared<Mlp>();
  ModuleCacher cached(model);
  optim::SGD opt(model->parameters(), {.lr = 0.1});
  float first = 0, last = 0;
  for (int step = 0; step < 8; ++step) {
    Tensor x = random_input(step % 3 == 2 ? 3 : 6, 0);  // a smaller last batch
    opt.zero_grad();
    Tensor y = cached(x);
    Tensor loss = mean(y * y);
    loss.backward();
    opt.step();
    mark_step();
    (step == 0 ? first : last) = static_cast<float>(loss.item());
  }
  EXPECT_EQ(cached.captures(), 2);
  EXPECT_LT(last, first);
}

}  // namespace
}  // namespace mstep
