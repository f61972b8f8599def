// Graph::export_stablehlo in process: what the exported function reads and
// writes (arguments named and donated, the segments merged so that one
// segment's results feed the next without becoming arguments), the values
// file, and the errors (nothing captured, an op with no StableHLO form).
// That XLA and IREE run the text and match ref is test/interop
// (stablehlo_interop_*); the text of each op is test/ir
// (mstep-export-stablehlo.mlir).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>

#include "mstep/mstep.h"
#include "mstep/runtime/SafetensorsFile.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestFiles.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::filled;

class StableHloExport : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "mstep_shlo_XXXXXX").string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    set_default_device(Device{DeviceType::ref, 0});
    manual_seed(3);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Captures a small training step (linear layer, dropout, MSE, SGD with
  /// momentum) in two segments: forward and backward, then the update.
  void capture_training_step() {
    w_ = filled({4, 3}, 1).requires_grad_();
    x_ = filled({5, 4}, 2);
    t_ = filled({5, 3}, 3);
    opt_ = std::make_unique<optim::SGD>(std::vector<Tensor>{w_},
                                        optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    auto step = [&] {
      opt_->zero_grad();
      loss_ = mse_loss(dropout(matmul(x_, w_), 0.25, true), t_);
      loss_.backward();
      mark_step();
      opt_->step();
      mark_step();
    };
    for (int i = 0; i < 2; ++i) step();
    CaptureGuard capture(graph_);
    step();
  }

  /// The `name = "..."` values of @main's arguments (or results), in order.
  static std::vector<std::string> signature_names(const std::string& text, bool results) {
    const size_t open = text.find("@main(");
    const size_t arrow = text.find(") -> (", open);
    const size_t end = text.find(") {\n", arrow);
    const std::string part = results ? text.substr(arrow, end - arrow) : text.substr(open, arrow - open);
    std::vector<std::string> names;
    std::regex name_re("mstep\\.name = \"([^\"]*)\"");
    for (std::sregex_iterator it(part.begin(), part.end(), name_re), e; it != e; ++it)
      names.push_back((*it)[1]);
    return names;
  }

  std::string dir_;
  Tensor w_, x_, t_, loss_;
  std::unique_ptr<optim::SGD> opt_;
  Graph graph_;
};

TEST_F(StableHloExport, MergesTheSegmentsIntoOneFunctionWithDonatedState) {
  capture_training_step();
  ASSERT_EQ(graph_.num_segments(), 2u);
  const std::string path = dir_ + "/step.mlir", values_path = dir_ + "/values.safetensors";
  graph_.export_stablehlo(path, {{"w", w_}, {"x", x_}, {"t", t_}, {"loss", loss_}}, values_path);
  const std::string text = testing::read_file(path);
  ASSERT_THAT(text, HasSubstr("func.func public @main("));
  // Arguments: what the step reads from outside. The gradient the first
  // segment computes feeds the update directly: it is no argument.
  const std::vector<std::string> args = signature_names(text, false);
  // Besides x, w, t and the RNG state: SGD's state and its device scalars
  // (the rate and the momentum), named after their role.
  ASSERT_THAT(args, ::testing::IsSupersetOf({"x", "w", "t", "rng_state"}));
  for (const std::string& a : args)
    EXPECT_THAT(a, ::testing::AnyOf("x", "w", "t", "rng_state",
                                    ::testing::StartsWith("optimizer_state_"),
                                    ::testing::StartsWith("device_scalar_")));
  // The weight and the momentum buffer are updated: each argument aliases
  // the result of the same name.
  const std::vector<std::string> results = signature_names(text, true);
  const std::string momentum = *std::find_if(args.begin(), args.end(), [](const std::string& a) {
    return a.rfind("optimizer_state_", 0) == 0;
  });
  for (const std::string& donated : {std::string("w"), momentum}) {
    const auto it = std::find(results.begin(), results.end(), donated);
    ASSERT_NE(it, results.end()) << donated;
    const std::regex alias("%arg\\d+: tensor<[^>]*> \\{tf\\.aliasing_output = " +
                           std::to_string(it - results.begin()) + " : i32, mstep\\.name = \"" +
                           donated + "\"");
    EXPECT_TRUE(std::regex_search(text, alias)) << donated;
  }
  EXPECT_THAT(results, ::testing::Contains("loss"));
  // x is read, never written: not donated.
  EXPECT_FALSE(std::regex_search(text, std::regex("tf\\.aliasing_output = \\d+ : i32, mstep\\.name = \"x\"")));

  // The values: every argument, under its name, as it is now.
  auto values = read_safetensors(values_path);
  ASSERT_TRUE(values.ok()) << values.status();
  for (const std::string& a : args) EXPECT_TRUE(values->tensors.count(a)) << a;
  const std::vector<float> w = w_.to_vector<float>();
  EXPECT_EQ(values->tensors.at("w").bytes,
            std::string(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float)));
  EXPECT_EQ(values->tensors.at("x").type().to_string(), "f32[5, 4]");
  // The state's offset is where the next replay starts, and the advance
  // what one replay moves it by.
  const HostTensor& rng = values->tensors.at("rng_state");
  ASSERT_EQ(rng.bytes.size(), 16u);
  int64_t state[2];
  std::memcpy(state, rng.bytes.data(), 16);
  EXPECT_EQ(std::to_string(state[0]), values->metadata.at("rng_seed"));
  EXPECT_EQ(std::to_string(state[1]), values->metadata.at("rng_offset"));
  const uint64_t before = Tracer::get().rng_offset();
  graph_.replay();
  EXPECT_EQ(before, static_cast<uint64_t>(state[1]));
  EXPECT_EQ(std::to_string(Tracer::get().rng_offset() - before), values->metadata.at("rng_advance"));
}

TEST_F(StableHloExport, BeforeCaptureIsNotCaptured) {
  try {
    graph_.export_stablehlo(dir_ + "/step.mlir");
    FAIL() << "no error";
  } catch (const ReplayError& e) {
    EXPECT_EQ(e.kind(), ReplayError::Kind::not_captured);
    EXPECT_THAT(e.what(), HasSubstr("Graph::export_stablehlo: nothing captured"));
  }
  EXPECT_FALSE(fs::exists(dir_ + "/step.mlir"));
}

TEST_F(StableHloExport, AnOpWithNoStableHloFormIsAnErrorNamingIt) {
  // A custom op is one: its kernels are mstep's.
  auto kernel = host_kernel([](const HostKernelCall& call) {
    const auto* x = static_cast<const float*>(call.inputs[0]);
    auto* y = static_cast<float*>(call.outputs[0]);
    for (int64_t i = 0; i < call.input_types[0].numel(); ++i) y[i] = 2 * x[i];
    return absl::OkStatus();
  });
  register_custom_op({.name = "shlo_test.twice",
                      .version = 1,
                      .schema = {.inputs = {{"x"}}},
                      .shape_rule = same_type_as_input(),
                      .kernels = {{"ref", kernel}}});
  Tensor x = filled({3, 4}, 1), out;
  {
    CaptureGuard capture(graph_);
    out = custom("shlo_test.twice", {relu(x)})[0];
  }
  try {
    graph_.export_stablehlo(dir_ + "/step.mlir", {{"x", x}, {"out", out}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("Graph::export_stablehlo"));
    EXPECT_THAT(e.what(), HasSubstr("custom op 'shlo_test.twice' (mstep.custom) has no StableHLO export"));
    EXPECT_THAT(e.what(), HasSubstr("write it with built-in ops for the export"));
    // The trace node, as every mstep diagnostic names it.
    EXPECT_TRUE(std::regex_search(std::string(e.what()), std::regex("\"%\\d+\"")));
  }
  EXPECT_FALSE(fs::exists(dir_ + "/step.mlir"));
  // The process keeps working: the graph still replays.
  const std::vector<float> captured = out.to_vector<float>();
  graph_.replay();
  EXPECT_EQ(out.to_vector<float>(), captured);
}

}  // namespace
}  // namespace mstep
