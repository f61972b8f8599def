// NaN guard: a classifier whose loss divides by the count of each class in
// the batch trains until a batch lacks a class; the guard then stops
// step() before the update, writes a reproducer, and load_reproducer()
// re-runs the step and gets the same non-finite gradients. Also: the
// guard's cost (one extra sync and graph per step), the run without it,
// and the errors of damaged reproducers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::error_of;
using ::testing::HasSubstr;

constexpr int64_t kFeatures = 4, kClasses = 3;

/// Sum over classes of the mean cross entropy of that class's samples:
/// the mean divides by the class's count, which is 0 (so the loss and
/// the gradients are NaN) when the class is missing from the batch.
Tensor class_balanced_loss(const Tensor& logits, const Tensor& target) {
  Tensor ce = cross_entropy(logits, target, Reduction::none);
  Tensor loss;
  for (int64_t c = 0; c < kClasses; ++c) {
    Tensor mask = to(eq(target, c), DType::f32);
    Tensor term = sum(ce * mask) / sum(mask);
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

struct Batch {
  Tensor x, y;
};
/// Six samples; every class present unless `missing` names one.
Batch make_batch(int seed, int64_t missing = -1) {
  std::vector<int64_t> y = {0, 1, 2, 2, 1, 0};
  if (missing >= 0)
    for (int64_t& c : y)
      if (c == missing) c = (missing + 1) % kClasses;
  return {testing::filled({6, kFeatures}, seed), from_vector(y, Shape{6})};
}

/// Bit patterns of an f32 tensor, so NaN and -0 compare exactly.
std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

bool any_nonfinite(const Tensor& t) {
  for (float v : t.to_vector<float>())
    if (!std::isfinite(v)) return true;
  return false;
}

class NanGuard : public ::testing::Test {
protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("mstep_nan_guard_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    manual_seed(7);
    model_ = std::make_shared<nn::Linear>(kFeatures, kClasses);
  }
  void TearDown() override {
    enable_nan_guard("");
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }

  /// One training step: forward, backward, step, mark_step.
  Tensor train_step(optim::Optimizer& opt, const Batch& b) {
    opt.zero_grad();
    Tensor loss = class_balanced_loss(model_->forward(b.x), b.y);
    loss.backward();
    opt.step();
    mark_step();
    return loss;
  }

  std::vector<std::vector<uint32_t>> param_bits() const {
    std::vector<std::vector<uint32_t>> out;
    for (const Tensor& p : model_->parameters()) out.push_back(bits(p));
    return out;
  }

  /// Trains three good batches, then steps on a batch without class 2 and
  /// returns the guard's error.
  NanGuardError hit(optim::Optimizer& opt) {
    for (int s = 0; s < 3; ++s) {
      auto before = param_bits();
      train_step(opt, make_batch(s));
      EXPECT_NE(param_bits(), before) << "step " << s << " changed nothing";
    }
    opt.zero_grad();
    Batch bad = make_batch(10, /*missing=*/2);
    Tensor loss = class_balanced_loss(model_->forward(bad.x), bad.y);
    loss.backward();
    try {
      opt.step();
    } catch (const NanGuardError& e) {
      return e;
    }
    ADD_FAILURE() << "step() did not throw NanGuardError";
    return NanGuardError(absl::UnknownError(""), "", {});
  }

  fs::path root_;
  std::shared_ptr<nn::Linear> model_;
};

TEST_F(NanGuard, OffByDefaultAndFollowsTheOption) {
  EXPECT_FALSE(nan_guard_enabled());
  Tracer::get().mutable_options().nan_guard_dir = root_.string(); // as MSTEP_NAN_GUARD=dir
  EXPECT_TRUE(nan_guard_enabled());
  EXPECT_EQ(nan_guard_dir(), root_.string());
  enable_nan_guard("");
  EXPECT_FALSE(nan_guard_enabled());
  EXPECT_EQ(Tracer::get().options().nan_guard_dir, "");
}

// Without the guard the missing class silently turns every weight into NaN.
TEST_F(NanGuard, WithoutTheGuardTheWeightsBecomeNaN) {
  optim::SGD opt(model_->parameters(), {.lr = 0.1});
  train_step(opt, make_batch(0));
  EXPECT_FALSE(any_nonfinite(model_->weight));
  Tensor loss = train_step(opt, make_batch(1, /*missing=*/2));
  EXPECT_TRUE(std::isnan(loss.item()));
  EXPECT_TRUE(any_nonfinite(model_->weight));
  EXPECT_TRUE(any_nonfinite(model_->bias));
}

TEST_F(NanGuard, StopsBeforeTheUpdateAndWritesAReproducer) {
  enable_nan_guard(root_.string());
  optim::SGD opt(model_->parameters(), {.lr = 0.1, .momentum = 0.9});
  NanGuardError e = hit(opt);
  // The bad step's forward and backward ran (in the guard's graph), the
  // update did not (bitwise: ParametersAreBitwiseUnchangedByTheStoppedStep).
  EXPECT_FALSE(any_nonfinite(model_->weight));
  EXPECT_FALSE(any_nonfinite(model_->bias));
  EXPECT_FALSE(any_nonfinite(opt.state(0, "momentum_buffer")));
  EXPECT_THAT(e.nonfinite_parameters(), ElementsAre(0, 1));
  const std::string dir = (root_ / "reproducer_0").string();
  EXPECT_EQ(e.reproducer_dir(), dir);
  const std::string msg = e.what();
  EXPECT_THAT(msg, HasSubstr("optim::SGD::step"));
  EXPECT_THAT(msg, HasSubstr("non-finite gradients"));
  EXPECT_THAT(msg, HasSubstr("parameters 0 (12 of 12 entries), 1 (3 of 3 entries)"));
  EXPECT_THAT(msg, HasSubstr("not applied"));
  EXPECT_THAT(msg, HasSubstr("mstep::load_reproducer(\"" + dir + "\")"));
  EXPECT_EQ(e.code(), absl::StatusCode::kAborted);
  for (const char* f : {"graph.mlir", "inputs.safetensors", "weights.safetensors", "meta.txt"})
    EXPECT_TRUE(fs::is_regular_file(fs::path(dir) / f)) << f;
  // Only the finished reproducer: no temporary directory is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(NanGuard, ParametersAreBitwiseUnchangedByTheStoppedStep) {
  enable_nan_guard(root_.string());
  optim::Adam opt(model_->parameters(), {.lr = 0.01});
  for (int s = 0; s < 3; ++s) train_step(opt, make_batch(s));
  const auto params = param_bits();
  const auto exp_avg = bits(opt.state(0, "exp_avg"));
  const auto exp_avg_sq = bits(opt.state(1, "exp_avg_sq"));
  const auto steps = opt.state(0, "step").to_vector<int64_t>();

  opt.zero_grad();
  Batch bad = make_batch(10, /*missing=*/0);
  Tensor loss = class_balanced_loss(model_->forward(bad.x), bad.y);
  loss.backward();
  EXPECT_THROW(opt.step(), NanGuardError);
  mark_step(); // nothing of the update was recorded: this changes nothing
  EXPECT_EQ(param_bits(), params);
  EXPECT_EQ(bits(opt.state(0, "exp_avg")), exp_avg);
  EXPECT_EQ(bits(opt.state(1, "exp_avg_sq")), exp_avg_sq);
  EXPECT_EQ(opt.state(0, "step").to_vector<int64_t>(), steps);
  EXPECT_TRUE(std::isnan(loss.item()));

  // The run can go on from the same weights with a good batch.
  train_step(opt, make_batch(11));
  EXPECT_NE(param_bits(), params);
  EXPECT_FALSE(any_nonfinite(model_->weight));
}

TEST_F(NanGuard, LoadReproducerReRunsTheStepAndReproducesTheNaN) {
  enable_nan_guard(root_.string());
  optim::SGD opt(model_->parameters(), {.lr = 0.1, .momentum = 0.9});
  NanGuardError e = hit(opt);
  const auto params = param_bits();

  Reproducer rep = load_reproducer(e.reproducer_dir());
  EXPECT_EQ(rep.optimizer(), "SGD");
  EXPECT_NE(rep.graph_key(), 0u);
  EXPECT_THAT(rep.graph_key_text(), HasSubstr("structure="));
  EXPECT_EQ(rep.rng_seed(), 7u);
  EXPECT_THAT(rep.nonfinite_parameters(), ElementsAre(0, 1));
  ASSERT_EQ(rep.inputs().size(), rep.input_roles().size());

  // The weights as they were before the update: in the graph inputs and
  // in weights.safetensors, bitwise equal to the (unchanged) parameters.
  for (size_t k = 0; k < params.size(); ++k) {
    ASSERT_TRUE(rep.parameter_inputs().count(k)) << k;
    const size_t i = rep.parameter_inputs().at(k);
    EXPECT_EQ(rep.input_roles()[i], InputRole::parameter);
    EXPECT_EQ(bits(rep.inputs()[i]), params[k]);
    ASSERT_TRUE(rep.weights().count("param." + std::to_string(k)));
    EXPECT_EQ(bits(rep.weights().at("param." + std::to_string(k))), params[k]);
  }
  EXPECT_EQ(bits(rep.weights().at("optimizer.state.0.momentum_buffer")),
            bits(opt.state(0, "momentum_buffer")));
  // The batch is among the inputs.
  Batch bad = make_batch(10, 2);
  bool found_x = false, found_y = false;
  for (const Tensor& t : rep.inputs()) {
    if (t.type() == bad.x.type() && bits(t) == bits(bad.x)) found_x = true;
    if (t.dtype() == DType::i64 && t.to_vector<int64_t>() == bad.y.to_vector<int64_t>())
      found_y = true;
  }
  EXPECT_TRUE(found_x);
  EXPECT_TRUE(found_y);

  // Re-running the step reproduces the non-finite gradients.
  std::vector<Tensor> out = rep.run();
  ASSERT_EQ(out.size(), rep.graph().outputs.size());
  ASSERT_EQ(rep.gradient_outputs().size(), 2u);
  const std::vector<size_t> nonfinite = rep.nonfinite_outputs();
  for (const auto& [k, j] : rep.gradient_outputs()) {
    EXPECT_EQ(out[j].shape(), model_->parameters()[k].shape());
    EXPECT_TRUE(any_nonfinite(out[j])) << "gradient of parameter " << k;
    EXPECT_THAT(nonfinite, Contains(j));
  }
  EXPECT_EQ(nonfinite, rep.recorded_nonfinite_outputs());
  // run() is repeatable: the saved inputs are copied, never consumed.
  std::vector<Tensor> again = rep.run();
  for (size_t j = 0; j < out.size(); ++j)
    if (is_floating(out[j].dtype()))
      EXPECT_EQ(bits(to(again[j], DType::f32)), bits(to(out[j], DType::f32))) << j;
}

// The guard's cost: one more graph and one host sync per step, and no
// recompiles once warm. The guard does not change the numbers either.
TEST_F(NanGuard, CostsOneSyncAndOneGraphPerStep) {
  struct Delta {
    int64_t syncs, graphs, compiles;
  };
  auto measure = [&](bool guard) {
    manual_seed(7);
    model_ = std::make_shared<nn::Linear>(kFeatures, kClasses);
    enable_nan_guard(guard ? root_.string() : "");
    optim::Adam opt(model_->parameters(), {.lr = 0.01});
    train_step(opt, make_batch(0)); // compiles
    train_step(opt, make_batch(1));
    Metrics m0 = metrics();
    constexpr int kSteps = 4;
    for (int s = 0; s < kSteps; ++s) train_step(opt, make_batch(2 + s));
    Metrics m1 = metrics();
    return std::make_pair(Delta{m1.sync_points - m0.sync_points,
                                m1.graphs_executed - m0.graphs_executed, m1.compiles - m0.compiles},
                          param_bits());
  };
  auto [off, off_params] = measure(false);
  auto [on, on_params] = measure(true);
  EXPECT_EQ(off.syncs, 0);
  EXPECT_EQ(off.graphs, 4);
  EXPECT_EQ(on.syncs - off.syncs, 4);   // exactly one extra sync per step
  EXPECT_EQ(on.graphs - off.graphs, 4); // the update runs as its own graph
  EXPECT_EQ(off.compiles, 0);
  EXPECT_EQ(on.compiles, 0);
  EXPECT_EQ(on_params, off_params);
  EXPECT_FALSE(fs::exists(root_ / "reproducer_0")); // no hit, nothing written
}

TEST_F(NanGuard, AReproducerThatCannotBeWrittenStillStopsTheRun) {
  // A regular file where the directory should be.
  fs::create_directories(root_);
  const fs::path blocker = root_ / "not_a_dir";
  std::ofstream(blocker) << "x";
  enable_nan_guard((blocker / "sub").string());
  optim::SGD opt(model_->parameters(), {.lr = 0.1});
  for (int s = 0; s < 2; ++s) train_step(opt, make_batch(s));
  const auto params = param_bits();
  opt.zero_grad();
  Batch bad = make_batch(10, 1);
  class_balanced_loss(model_->forward(bad.x), bad.y).backward();
  try {
    opt.step();
    ADD_FAILURE() << "step() did not throw";
  } catch (const NanGuardError& e) {
    EXPECT_EQ(e.reproducer_dir(), "");
    EXPECT_THAT(std::string(e.what()), HasSubstr("could not be written"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("not_a_dir"));
  }
  EXPECT_EQ(param_bits(), params);
}

TEST_F(NanGuard, DamagedReproducersGiveClearErrors) {
  enable_nan_guard(root_.string());
  optim::SGD opt(model_->parameters(), {.lr = 0.1});
  const fs::path good = hit(opt).reproducer_dir();
  ASSERT_NO_THROW(load_reproducer(good.string()));
  int n = 0;
  // A copy of the reproducer, damaged by `damage`; returns the load error.
  auto load_damaged = [&](auto damage) {
    const fs::path dir = root_ / ("damaged_" + std::to_string(n++));
    fs::copy(good, dir, fs::copy_options::recursive);
    damage(dir);
    return error_of([&] { load_reproducer(dir.string()); });
  };

  EXPECT_THAT(error_of([&] { load_reproducer((root_ / "nope").string()); }),
              HasSubstr("no such directory"));
  for (const char* f : {"meta.txt", "graph.mlir", "inputs.safetensors", "weights.safetensors"}) {
    std::string msg = load_damaged([&](const fs::path& d) { fs::remove(d / f); });
    EXPECT_THAT(msg, HasSubstr(f));
    EXPECT_THAT(msg, HasSubstr("missing"));
  }
  std::string msg = load_damaged([](const fs::path& d) {
    std::ofstream(d / "graph.mlir") << "func.func @step( this is not MLIR";
  });
  EXPECT_THAT(msg, HasSubstr("graph.mlir"));
  EXPECT_THAT(msg, HasSubstr("does not parse"));

  msg = load_damaged([](const fs::path& d) { std::ofstream(d / "meta.txt") << "hello\n"; });
  EXPECT_THAT(msg, HasSubstr("meta.txt"));
  EXPECT_THAT(msg, HasSubstr("mstep-nan-guard-reproducer"));

  msg = load_damaged([](const fs::path& d) {
    std::ofstream(d / "meta.txt", std::ios::app) << "rng_seed twelve\n";
  });
  EXPECT_THAT(msg, HasSubstr("meta.txt': line"));
  EXPECT_THAT(msg, HasSubstr("rng_seed twelve"));

  msg = load_damaged([](const fs::path& d) {
    auto inputs = load_safetensors((d / "inputs.safetensors").string());
    inputs.erase(std::prev(inputs.end()));
    save_safetensors((d / "inputs.safetensors").string(), inputs);
  });
  EXPECT_THAT(msg, HasSubstr("inputs.safetensors"));
  EXPECT_THAT(msg, HasSubstr("but the graph has"));

  msg = load_damaged([](const fs::path& d) {
    auto inputs = load_safetensors((d / "inputs.safetensors").string());
    inputs["input.0"] =
        to(inputs["input.0"], inputs["input.0"].dtype() == DType::f64 ? DType::f32 : DType::f64);
    save_safetensors((d / "inputs.safetensors").string(), inputs);
  });
  EXPECT_THAT(msg, HasSubstr("'input.0' is"));
  EXPECT_THAT(msg, HasSubstr("but the graph's input 0 is"));

  msg = load_damaged([](const fs::path& d) { fs::resize_file(d / "inputs.safetensors", 12); });
  EXPECT_THAT(msg, HasSubstr("load_reproducer"));
  EXPECT_THAT(msg, HasSubstr("inputs.safetensors"));
}

} // namespace
} // namespace mstep
