// Oracle training runs: PyTorch (make_training_cases.py) initializes the
// models, draws the batches and trains; mstep loads the same weights,
// trains on the same batches with the same optimizer, and must reproduce
// every step's loss (1e-4 relative) and the final weights (1e-4).
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "gtest/gtest.h"
#include "mstep/mstep.h"

namespace mstep {
namespace {

constexpr double kLossRtol = 1e-4;
constexpr double kWeightTol = 1e-4;
// The key bias (qkv.bias[dim:2*dim]) has an exactly zero gradient: it
// adds q.b_k to every score of a row, and softmax ignores a constant
// shift. Both frameworks therefore feed AdamW rounding noise (~1e-9),
// which m / (sqrt(v) + eps) amplifies to updates of up to lr; those
// entries are compared 10x looser. Everything else holds 1e-4, except
// that a tensor may have a few entries (kMaxOutlierFraction) up to the
// looser bound: Adam divides each update by sqrt(v), so entries with a
// small second moment turn last-bit differences of float reductions
// (PyTorch's summation order depends on the CPU's vector width) into
// visible weight differences over 8 steps.
constexpr double kIllConditionedTol = 1e-3;
constexpr double kMaxOutlierFraction = 1e-3;

std::string case_file(const std::string& name) {
  return std::string(MSTEP_TRAINING_CASES_DIR) + "/" + name + ".safetensors";
}

const Tensor& entry(const std::map<std::string, Tensor>& file, const std::string& key) {
  auto it = file.find(key);
  if (it == file.end()) throw std::runtime_error("oracle case file has no entry " + key);
  return it->second;
}

void expect_losses_match(const std::vector<double>& got, const Tensor& expected) {
  std::vector<float> want = expected.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k)
    EXPECT_LE(std::abs(got[k] - want[k]), kLossRtol * std::abs(want[k]))
        << "step " << k << ": mstep loss " << got[k] << ", PyTorch " << want[k];
}

/// Per-entry tolerance; `loose(name, i)` entries get kIllConditionedTol.
using LooseEntries = std::function<bool(const std::string&, size_t)>;

void expect_weights_match(const nn::Module& model, const std::map<std::string, Tensor>& expected,
                          const LooseEntries& loose = nullptr) {
  for (const auto& [name, tensor] : model.state_dict()) {
    const Tensor& want_t = entry(expected, "final." + name);
    ASSERT_EQ(tensor.shape(), want_t.shape()) << name;
    std::vector<float> got = tensor.to_vector<float>(), want = want_t.to_vector<float>();
    double worst = 0;
    size_t worst_at = 0, outliers = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      double err = std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(double(want[i])));
      if (loose && loose(name, i)) err *= kWeightTol / kIllConditionedTol;
      if (err > kWeightTol) ++outliers, err *= kWeightTol / kIllConditionedTol;
      if (err > worst) worst = err, worst_at = i;
    }
    EXPECT_LE(worst, kWeightTol) << name << "[" << worst_at << "]: mstep " << got[worst_at]
                                 << ", PyTorch " << want[worst_at];
    EXPECT_LE(outliers, std::max<size_t>(1, size_t(kMaxOutlierFraction * got.size())))
        << name << ": entries beyond " << kWeightTol;
  }
}

TEST(TrainingOracle, MlpAdadeltaTenStepsMatchesPyTorch) {
  examples::Mlp model;
  load_state_dict(model, load_safetensors(case_file("mlp_init")));
  model.eval();  // dropout off, as in the PyTorch run
  auto batches = load_safetensors(case_file("mlp_batches"));
  auto expected = load_safetensors(case_file("mlp_expected"));
  optim::Adadelta opt(model.parameters(), {.lr = 0.1});

  reset_metrics();
  std::vector<double> losses;
  for (int k = 0; entry(expected, "losses").size(0) > k; ++k) {
    std::string p = "step_" + std::to_string(k) + "_";
    opt.zero_grad();
    Tensor loss = nll_loss(model.forward(entry(batches, p + "x")), entry(batches, p + "y"));
    loss.backward();
    mark_step();
    opt.step();
    mark_step();
    losses.push_back(loss.item());
  }
  expect_losses_match(losses, entry(expected, "losses"));
  expect_weights_match(model, expected);
  // Same structure every step: step 0's two graphs (the first Adadelta
  // step creates its state) and step 1's are compiled, the rest hit.
  EXPECT_LE(metrics().cache_misses, 4);
}

TEST(TrainingOracle, GptMiniAdamWEightStepsMatchesPyTorch) {
  examples::GptMini model({.vocab = 96, .dim = 64, .heads = 4, .layers = 2, .max_seq = 32});
  load_state_dict(model, load_safetensors(case_file("gpt_init")));
  auto batches = load_safetensors(case_file("gpt_batches"));
  auto expected = load_safetensors(case_file("gpt_expected"));
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});

  std::vector<double> losses;
  for (int k = 0; entry(expected, "losses").size(0) > k; ++k) {
    std::string p = "step_" + std::to_string(k) + "_";
    opt.zero_grad();
    Tensor logits = model.forward(entry(batches, p + "x"), entry(batches, p + "len"));
    Tensor loss = cross_entropy(logits.reshape({-1, 96}), entry(batches, p + "y").reshape({-1}));
    loss.backward();
    mark_step();
    opt.step();
    mark_step();
    losses.push_back(loss.item());
  }
  expect_losses_match(losses, entry(expected, "losses"));
  expect_weights_match(model, expected, [](const std::string& name, size_t i) {
    return name.ends_with(".qkv.bias") && i >= 64 && i < 128;
  });
}

}  // namespace
}  // namespace mstep
