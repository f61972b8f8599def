// Optimizers and clip_grad_norm_: the step graph compiles once while the
// learning rate changes, construction errors, shared and skipped
// parameters, state_dict save / load, gradient clipping. The update rules
// themselves are checked against PyTorch in test/oracle/cases/optim.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>

#include "mstep/mstep.h"
#include "mstep/runtime/TensorImpl.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::values;
using V = std::vector<float>;

Tensor param(std::vector<float> v, Shape s) { return from_vector(v, s).requires_grad_(); }

using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

std::vector<std::pair<std::string, Factory>> every_optimizer() {
  return {
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p,
             optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"SGD-nesterov",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(
             p, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1, .amsgrad = true});
       }},
      {"AdamW",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{.lr = 0.01});
       }},
      {"Adadelta",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adadelta>(p, optim::AdadeltaOptions{.lr = 1.0});
       }},
  };
}

// The point of device scalars: a training loop whose learning rate changes
// every step (here through a scheduler, and by hand) and whose Adam bias
// corrections change every step compiles its step graph exactly once.
TEST(Optimizer, FiveStepsWithChangingLrCompileOnce) {
  for (const auto& [name, make] : every_optimizer()) {
    SCOPED_TRACE(name);
    Tensor w = param({0.5f, -1.f, 2.f, 0.f, 1.f, -0.5f}, {2, 3});
    Tensor b = param({0.1f, 0.2f, 0.3f}, {3});
    Tensor x = from_vector(V{1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor y = from_vector(V{1, 0, 1}, {3});
    auto opt = make({w, b});
    optim::CosineAnnealingLR schedule(*opt, 10);
    const std::vector<float> w0 = values(w);
    mark_step();
    reset_metrics();
    std::vector<double> lrs;
    for (int step = 0; step < 5; ++step) {
      Tensor err = w * x + b - y;
      sum(err * err).backward();
      opt->step();
      opt->zero_grad();
      schedule.step();
      if (step == 2) opt->set_lr(opt->lr() / 2);  // and a change by hand
      lrs.push_back(opt->lr());
      mark_step();
    }
    Metrics m = metrics();
    EXPECT_EQ(m.cache_misses, 1) << metrics_report();
    EXPECT_EQ(m.cache_hits, 4);
    EXPECT_EQ(m.constant_recompiles, 0);
    EXPECT_EQ(m.warnings, 0);
    EXPECT_EQ(m.sync_points, 0);
    EXPECT_NE(lrs.front(), lrs.back());
    EXPECT_NE(values(w), w0);  // the updates landed in the parameter
    EXPECT_TRUE(w.requires_grad());
    EXPECT_TRUE(w.is_leaf());
    EXPECT_EQ(opt->state(0, "step").item(), 5);
  }
}

TEST(Optimizer, UpdatesAreLazyUntilMarkStep) {
  Tensor w = param({1, 2}, {2});
  optim::SGD opt({w}, {.lr = 0.5});
  w.set_grad(from_vector(V{2, 2}, {2}));
  opt.step();
  EXPECT_TRUE(w.is_pending());
  mark_step();
  EXPECT_FALSE(w.is_pending());
  EXPECT_EQ(values(w), (V{0, 1}));
}

TEST(Optimizer, StepUpdatesInPlaceUnlessAnotherTensorSharesTheParameter) {
  // On the default (ref) backend as on cpu: the fused update writes a
  // donated parameter and its state into their own buffers.
  Tensor w = param({1, 2}, {2});
  optim::SGD opt({w}, {.lr = 0.5, .momentum = 0.9});
  auto step = [&] {
    w.set_grad(from_vector(V{2, 2}, {2}));
    opt.step();
    mark_step();
  };
  step();  // creates the momentum buffer
  const Buffer* weight = w.impl()->buffer().get();
  const Buffer* momentum = opt.state(0, "momentum_buffer").impl()->buffer().get();
  step();
  EXPECT_EQ(w.impl()->buffer().get(), weight);
  EXPECT_EQ(opt.state(0, "momentum_buffer").impl()->buffer().get(), momentum);
  Tensor snapshot = zeros({2});
  snapshot.copy_(w);  // shares w's buffer: the next step must not write into it
  const V kept = values(snapshot);
  step();
  EXPECT_EQ(values(snapshot), kept);
  EXPECT_NE(values(w), kept);
  EXPECT_NE(w.impl()->buffer().get(), weight);
}

TEST(Optimizer, LearningRateChangeTakesEffect) {
  Tensor w = param({1}, {1});
  optim::SGD opt({w}, {.lr = 0.5});
  for (double lr : {0.5, 0.25, 2.0}) {
    opt.set_lr(lr);
    w.set_grad(from_vector(V{1}, {1}));
    opt.step();
    mark_step();
  }
  EXPECT_FLOAT_EQ(values(w)[0], 1 - 0.5 - 0.25 - 2.0);
  EXPECT_DOUBLE_EQ(opt.lr(), 2.0);
}

TEST(Optimizer, EmptyParameterListThrows) {
  for (const auto& [name, make] : every_optimizer()) {
    SCOPED_TRACE(name);
    const std::string msg = error_of([&] { make({}); });
    EXPECT_THAT(msg, HasSubstr("empty parameter list"));
    EXPECT_THAT(msg, HasSubstr("parameters()"));
  }
}

TEST(Optimizer, InvalidArgumentsThrow) {
  Tensor w = param({1}, {1});
  EXPECT_THROW(optim::SGD({w}, {.lr = -1}), Error);
  EXPECT_THROW(optim::SGD({w}, {.lr = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(optim::Adam({w}, {.betas = {0.9, 1.0}}), Error);
  EXPECT_THROW(optim::Adadelta({w}, {.rho = 1.5}), Error);
  EXPECT_THROW(optim::SGD({from_vector(std::vector<int64_t>{1}, {1})}, {}), Error);
  Tensor computed = w * 2.0;
  EXPECT_THAT(error_of([&] { optim::SGD({computed}, {}); }), HasSubstr("not a leaf"));
  optim::Adam adam({w});
  EXPECT_THAT(error_of([&] { adam.set_hyper("betas.0", 2.0); }),
              HasSubstr("betas.0 must lie in [0, 1)"));
  EXPECT_DOUBLE_EQ(adam.hyper("betas.0"), 0.9);  // unchanged
  EXPECT_THROW(adam.hyper("momentum"), Error);
}

TEST(Optimizer, SharedParameterIsUpdatedOnce) {
  for (const auto& [name, make] : every_optimizer()) {
    SCOPED_TRACE(name);
    Tensor w = param({1, 2}, {2});
    Tensor alone = param({1, 2}, {2});
    auto shared = make({w, w});
    auto single = make({alone});
    EXPECT_EQ(shared->parameters().size(), 1u);
    for (int step = 0; step < 2; ++step) {
      w.set_grad(from_vector(V{0.5f, -1}, {2}));
      alone.set_grad(from_vector(V{0.5f, -1}, {2}));
      shared->step();
      single->step();
      mark_step();
    }
    EXPECT_EQ(values(w), values(alone));
  }
}

TEST(Optimizer, ParameterWithoutGradientIsSkipped) {
  Tensor a = param({1, 1}, {2}), b = param({3, 3}, {2});
  optim::Adam opt({a, b}, {.lr = 0.1});
  a.set_grad(from_vector(V{1, -1}, {2}));
  opt.step();
  mark_step();
  EXPECT_EQ(values(b), (V{3, 3}));
  EXPECT_FALSE(opt.state(1, "exp_avg").defined());
  EXPECT_TRUE(opt.state(0, "exp_avg").defined());
  // Adam's first step moves by lr * sign(grad).
  EXPECT_NEAR(values(a)[0], 0.9, 1e-6);
  EXPECT_NEAR(values(a)[1], 1.1, 1e-6);
}

TEST(Optimizer, ZeroGrad) {
  Tensor w = param({1, 2}, {2});
  optim::SGD opt({w}, {.lr = 0.1});
  w.set_grad(from_vector(V{1, 1}, {2}));
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_EQ(values(w.grad()), (V{0, 0}));
  opt.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Optimizer, StateDictRoundTripContinuesIdentically) {
  Tensor a = param({1, -2, 3}, {3});
  Tensor a_copy = param({1, -2, 3}, {3});
  optim::Adam opt({a}, {.lr = 0.05, .amsgrad = true});
  for (int i = 0; i < 2; ++i) {
    a.set_grad((a * a).detach());
    opt.step();
    mark_step();
  }
  std::map<std::string, Tensor> dict = opt.state_dict();
  std::vector<std::string> keys;
  for (const auto& [k, v] : dict) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("param_groups.amsgrad", "param_groups.betas.0",
                                           "param_groups.betas.1", "param_groups.eps",
                                           "param_groups.lr", "param_groups.weight_decay",
                                           "state.0.exp_avg", "state.0.exp_avg_sq",
                                           "state.0.max_exp_avg_sq", "state.0.step"));
  EXPECT_EQ(dict.at("state.0.step").item(), 2);

  a_copy.copy_(a.detach());
  optim::Adam resumed({a_copy}, {.lr = 1.0});
  LoadReport report = resumed.load_state_dict(dict);
  EXPECT_TRUE(report.ok());
  EXPECT_DOUBLE_EQ(resumed.lr(), 0.05);
  EXPECT_TRUE(resumed.flag("amsgrad"));
  // The loaded state is the resumed optimizer's own: stepping it leaves
  // the original's state where it was.
  a_copy.set_grad((a_copy * a_copy).detach());
  resumed.step();
  mark_step();
  EXPECT_EQ(opt.state(0, "step").item(), 2);
  EXPECT_EQ(resumed.state(0, "step").item(), 3);
  a.set_grad((a * a).detach());
  opt.step();
  mark_step();
  EXPECT_EQ(values(a), values(a_copy));
}

TEST(Optimizer, StrictLoadListsEveryProblemAndChangesNothing) {
  Tensor a = param({1, 2}, {2});
  optim::Adam opt({a}, {.lr = 0.01});
  std::map<std::string, Tensor> dict = opt.state_dict();
  dict.erase("param_groups.eps");
  dict["param_groups.momentum"] = Tensor::scalar(0.9, DType::f64);
  dict["state.0.exp_avg"] = zeros({3});
  dict["state.0.step"] = Tensor::scalar(3, DType::i64);
  dict["state.7.exp_avg"] = zeros({2});
  dict["param_groups.lr"] = Tensor::scalar(0.5, DType::f64);
  const std::string msg = error_of([&] { opt.load_state_dict(dict); });
  EXPECT_THAT(msg, HasSubstr("missing: param_groups.eps"));
  EXPECT_THAT(msg, HasSubstr("missing: state.0.exp_avg_sq"));
  EXPECT_THAT(msg, HasSubstr("unexpected: param_groups.momentum"));
  EXPECT_THAT(msg, HasSubstr("unexpected: state.7.exp_avg"));
  EXPECT_THAT(msg, HasSubstr("mismatched: state.0.exp_avg expected f32[2], got f32[3]"));
  EXPECT_THAT(msg, HasSubstr("strict=false"));
  EXPECT_DOUBLE_EQ(opt.lr(), 0.01);
  EXPECT_FALSE(opt.state(0, "step").defined());

  // Non-strict: the valid hyperparameters load, the broken state does not.
  LoadReport report = opt.load_state_dict(dict, /*strict=*/false);
  EXPECT_EQ(report.missing.size(), 2u);
  EXPECT_EQ(report.unexpected.size(), 2u);
  EXPECT_EQ(report.mismatched.size(), 1u);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.5);
  EXPECT_FALSE(opt.state(0, "step").defined());
}

TEST(ClipGradNorm, ScalesOnTheDeviceWithoutSync) {
  Tensor a = param({0, 0}, {2}), b = param({0}, {1});
  a.set_grad(from_vector(V{3, 0}, {2}));
  b.set_grad(from_vector(V{4}, {1}));
  mark_step();
  reset_metrics();
  Tensor total = optim::clip_grad_norm_({a, b, a}, 1.0);
  EXPECT_TRUE(total.is_pending());
  EXPECT_TRUE(a.grad().is_pending());
  EXPECT_EQ(metrics().sync_points, 0);
  mark_step();
  EXPECT_FLOAT_EQ(total.item(), 5);
  const float coef = 1.0 / (5 + 1e-6);
  EXPECT_FLOAT_EQ(values(a.grad())[0], 3 * coef);
  EXPECT_FLOAT_EQ(values(b.grad())[0], 4 * coef);
}

TEST(ClipGradNorm, SmallGradientsAreKeptAndOtherNorms) {
  Tensor a = param({0, 0}, {2});
  a.set_grad(from_vector(V{0.3f, -0.4f}, {2}));
  EXPECT_FLOAT_EQ(optim::clip_grad_norm_({a}, 1.0).item(), 0.5f);
  EXPECT_EQ(values(a.grad()), (V{0.3f, -0.4f}));
  EXPECT_FLOAT_EQ(optim::clip_grad_norm_({a}, 10.0, 1.0).item(), 0.7f);
  EXPECT_FLOAT_EQ(optim::clip_grad_norm_({a}, 0.2, optim::kInfNorm).item(), 0.4f);
  EXPECT_NEAR(values(a.grad())[1], -0.2, 1e-6);
  Tensor none = param({1}, {1});
  EXPECT_EQ(optim::clip_grad_norm_({none}, 1.0).item(), 0);
  EXPECT_THROW(optim::clip_grad_norm_({a}, 1.0, -1.0), Error);
}

TEST(ClipGradNorm, CompilesOnceWhateverTheNorm) {
  Tensor w = param({1, 2, 3}, {3});
  mark_step();
  reset_metrics();
  for (float scale : {0.01f, 100.f, 1.f}) {
    w.set_grad(from_vector(V{scale, scale, scale}, {3}));
    Tensor total = optim::clip_grad_norm_({w}, 1.0);
    mark_step();
  }
  EXPECT_EQ(metrics().cache_misses, 1);
}

}  // namespace
}  // namespace mstep
