// MSTEP_DUMP_DIR on the `neuron` backend: compiling a step writes each of
// its tile programs' NKI kernels under <dir>/neuron_nki/ (NkiSource.h),
// here an elementwise op and a causal attention, and the step still gives
// ref's numbers; an unwritable dump dir is reported, the step still runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::neuron {
namespace {

constexpr Device kNeuron{DeviceType::neuron, 0};

std::vector<float> values(size_t n, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(float(i) * step);
  return v;
}

TEST(NeuronNkiDump, DumpDirGetsAnNkiKernelPerTileProgram) {
  const auto dir = std::filesystem::temp_directory_path() / "mstep_neuron_nki_dump_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  mark_step();
  Tracer::get().mutable_options().dump_dir = dir.string();
  const std::vector<float> qv = values(2 * 40 * 16, 0.37f);
  Tensor q = from_vector(qv, {2, 40, 16}, std::nullopt, kNeuron);
  SdpaOptions causal;
  causal.is_causal = true;
  Tensor y = scaled_dot_product_attention(exp(q), q, q, causal);
  const std::vector<float> got = y.to_vector<float>();
  Tracer::get().mutable_options().dump_dir.clear();

  std::vector<std::string> kernels;
  for (const auto& e : std::filesystem::directory_iterator(dir / "neuron_nki")) {
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    kernels.push_back(ss.str());
  }
  ASSERT_GE(kernels.size(), 2u);
  bool attention = false, elementwise = false;
  for (const std::string& k : kernels) {
    EXPECT_THAT(k, ::testing::HasSubstr("Not compiled against the Neuron SDK"));
    attention = attention || k.find("def attention_fwd_causal(q, k, v, out):") != std::string::npos;
    elementwise = elementwise || k.find("op=nl.exp") != std::string::npos;
  }
  EXPECT_TRUE(attention);
  EXPECT_TRUE(elementwise);

  // The same step on ref.
  Tensor rq = from_vector(qv, {2, 40, 16});
  const std::vector<float> want =
      scaled_dot_product_attention(exp(rq), rq, rq, causal).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
  std::filesystem::remove_all(dir);
}

TEST(NeuronNkiDump, UnwritableDumpDirDoesNotStopTheStep) {
  const auto file = std::filesystem::temp_directory_path() / "mstep_neuron_nki_dump_file";
  std::ofstream(file) << "not a directory";
  mark_step();
  Tracer::get().mutable_options().dump_dir = file.string();
  Tensor x = from_vector(values(256, 0.1f), {256}, std::nullopt, kNeuron);
  const std::vector<float> got = tanh(x).to_vector<float>();
  Tracer::get().mutable_options().dump_dir.clear();
  ASSERT_EQ(got.size(), 256u);
  EXPECT_NEAR(got[3], std::tanh(std::sin(0.3f)), 1e-6f);
  std::filesystem::remove(file);
}

} // namespace
} // namespace mstep::neuron
