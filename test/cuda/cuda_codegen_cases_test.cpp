// The GPU check's case files (CodegenCase.h), checked without a GPU: the
// format round-trips (kernel launches and cuBLASLt steps) and names a
// malformed line; the cases generated at
// build time (cuda_codegen_cases) are complete: each kernel's PTX has its
// entry, each cubin's ELF says its architecture, and every input, expected
// output and bound file holds its value's elements; and each case's
// expected outputs hold, within their bounds, for the loop nests of its
// step run on the host from its input files (so that a FAIL on the GPU is
// the GPU's, not the case's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "lib/backends/cuda/CudaModule.h"
#include "test/cuda/CodegenCase.h"
#include "test/cuda/CodegenCaseSteps.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CodegenCaseFormat, RoundTrips) {
  CodegenCase c;
  c.elements = {10, 1, 10};
  c.inputs = {0, 1};
  c.outputs = {2};
  c.kernels.push_back({"k", {1, 2, 3}, {256, 1, 1}, {"sm_80", "sm_90"}});
  c.launches.push_back({0, {0, 1, 2}});
  c.bandwidth = true;
  CodegenCase back;
  std::string error;
  ASSERT_TRUE(parse_codegen_case(codegen_case_text(c), back, error)) << error;
  EXPECT_EQ(back.elements, c.elements);
  EXPECT_EQ(back.inputs, c.inputs);
  EXPECT_EQ(back.outputs, c.outputs);
  ASSERT_EQ(back.kernels.size(), 1u);
  EXPECT_EQ(back.kernels[0].name, "k");
  EXPECT_THAT(back.kernels[0].grid, ElementsAre(1u, 2u, 3u));
  EXPECT_THAT(back.kernels[0].archs, ElementsAre("sm_80", "sm_90"));
  ASSERT_EQ(back.launches.size(), 1u);
  EXPECT_THAT(back.launches[0].args, ElementsAre(0, 1, 2));
  EXPECT_TRUE(back.bandwidth);
}

TEST(CodegenCaseFormat, AMatmulStepRoundTrips) {
  CodegenCase c;
  c.elements = {4 * 8 * 16, 4 * 16 * 32, 4 * 8 * 32};
  c.inputs = {0, 1};
  c.outputs = {2};
  CodegenCaseLaunch m;
  m.matmul = true;
  m.args = {0, 1, 2};
  m.m = 8, m.n = 32, m.k = 16, m.batch = 4, m.a_stride = 128, m.b_stride = 512, m.c_stride = 256;
  c.launches.push_back(m);
  m.transpose_b = true, m.activation = 2, m.bias = 0;  // and one with an epilogue
  c.launches.push_back(m);
  CodegenCase back;
  std::string error;
  ASSERT_TRUE(parse_codegen_case(codegen_case_text(c), back, error)) << error;
  ASSERT_EQ(back.launches.size(), 2u);
  const CodegenCaseLaunch& b = back.launches[0];
  EXPECT_TRUE(b.matmul);
  EXPECT_THAT(b.args, ElementsAre(0, 1, 2));
  EXPECT_EQ(std::vector<int64_t>({b.m, b.n, b.k, b.batch, b.a_stride, b.b_stride, b.c_stride}),
            std::vector<int64_t>({8, 32, 16, 4, 128, 512, 256}));
  EXPECT_FALSE(b.transpose_a || b.transpose_b);
  EXPECT_EQ(b.activation, 0);
  EXPECT_EQ(b.bias, -1);
  const CodegenCaseLaunch& e = back.launches[1];
  EXPECT_FALSE(e.transpose_a);
  EXPECT_TRUE(e.transpose_b);
  EXPECT_EQ(e.activation, 2);
  EXPECT_EQ(e.bias, 0);
  // An epilogue line needs a matmul before it.
  CodegenCase bad;
  EXPECT_FALSE(parse_codegen_case("value 0 4\nepilogue 0 0 1 -1\n", bad, error));
}

TEST(CodegenCaseFormat, ElementSizesRoundTripAndDefaultToF32) {
  CodegenCase c;
  c.elements = {66, 2, 1, 66};  // f32 data, an i64 RNG state, an f64 scalar, f32 out
  c.element_bytes = {4, 8, 8, 4};
  c.inputs = {0, 1, 2};
  c.outputs = {3};
  c.kernels.push_back({"k", {1, 1, 1}, {256, 1, 1}, {"sm_80"}});
  c.launches.push_back({0, {0, 1, 2, 3}});
  const std::string text = codegen_case_text(c);
  EXPECT_THAT(text, HasSubstr("value 1 2 8\n"));
  EXPECT_THAT(text, HasSubstr("value 0 66\n"));  // f32: no size written (older readers)
  CodegenCase back;
  std::string error;
  ASSERT_TRUE(parse_codegen_case(text, back, error)) << error;
  EXPECT_THAT(back.element_bytes, ElementsAre(4, 8, 8, 4));
}

TEST(CodegenCaseFormat, AnOutputThatIsNotF32OrABadElementSizeIsNamed) {
  CodegenCase c;
  std::string error;
  EXPECT_FALSE(parse_codegen_case(
      "value 0 4\nvalue 1 4 8\nkernel 0 k 1 1 1 1 1 1\nlaunch 0 0 1\noutput 1\n", c, error));
  EXPECT_THAT(error, HasSubstr("output 1 is not f32"));
  CodegenCase d;
  EXPECT_FALSE(parse_codegen_case("value 0 4 3\n", d, error));
  EXPECT_THAT(error, HasSubstr("line 1 is malformed: 'value 0 4 3'"));
}

TEST(CodegenCaseFormat, ConstantInputsAndOutputsRoundTrip) {
  CodegenCase c;
  c.elements = {5, 5};
  c.inputs = {0};
  c.outputs = {1};
  c.kernels.push_back({"k", {1, 1, 1}, {256, 1, 1}, {"sm_90"}});
  c.launches.push_back({0, {0, 1}});
  c.fills = {{0, 0.1f}};  // not a short decimal: 9 digits round-trip it
  c.expects = {{1, 3.25f}};
  CodegenCase back;
  std::string error;
  ASSERT_TRUE(parse_codegen_case(codegen_case_text(c), back, error)) << error;
  ASSERT_NE(codegen_case_constant(back.fills, 0), nullptr);
  EXPECT_EQ(*codegen_case_constant(back.fills, 0), 0.1f);
  EXPECT_EQ(codegen_case_constant(back.fills, 1), nullptr);
  ASSERT_NE(codegen_case_constant(back.expects, 1), nullptr);
  EXPECT_EQ(*codegen_case_constant(back.expects, 1), 3.25f);
  CodegenCase bad;
  EXPECT_FALSE(parse_codegen_case("value 0 4\nfill 3 1.0\n", bad, error));
  EXPECT_THAT(error, HasSubstr("line 2 is malformed: 'fill 3 1.0'"));
}

TEST(CodegenCaseFormat, AMatmulWithoutThreeValuesIsNamed) {
  CodegenCase c;
  std::string error;
  EXPECT_FALSE(
      parse_codegen_case("value 0 4\nvalue 1 4\nmatmul 2 2 2 1 0 0 0 0 1\noutput 1\n", c, error));
  EXPECT_THAT(error, HasSubstr("line 3 is malformed: 'matmul 2 2 2 1 0 0 0 0 1'"));
}

TEST(CodegenCaseFormat, AMalformedLineIsNamed) {
  CodegenCase c;
  std::string error;
  // A launch naming value 7 of 1.
  EXPECT_FALSE(
      parse_codegen_case("value 0 4\nkernel 0 k 1 1 1 1 1 1\nlaunch 0 7\noutput 0\n", c, error));
  EXPECT_THAT(error, HasSubstr("line 3 is malformed: 'launch 0 7'"));
  CodegenCase d;
  EXPECT_FALSE(parse_codegen_case("value 0 4\nfrobnicate\n", d, error));
  EXPECT_THAT(error, HasSubstr("line 2"));
  CodegenCase e;
  EXPECT_FALSE(parse_codegen_case("value 0 4\n", e, error));
  EXPECT_THAT(error, HasSubstr("no launch or no output"));
}

size_t file_size(const std::string& path) {
  std::string bytes;
  return read_file_bytes(path, bytes) ? bytes.size() : 0;
}

TEST(CodegenCaseFiles, GeneratedCasesAreComplete) {
  const std::string root = MSTEP_CODEGEN_CASE_DIR;
  std::string list;
  ASSERT_TRUE(read_file_bytes(root + "/cases.txt", list)) << root;
  std::istringstream names(list);
  int cases = 0;
  for (std::string name; std::getline(names, name);) {
    SCOPED_TRACE(name);
    ++cases;
    std::string dir = root + "/" + name, text, error;
    ASSERT_TRUE(read_file_bytes(dir + "/case.txt", text));
    CodegenCase c;
    ASSERT_TRUE(parse_codegen_case(text, c, error)) << error;
    for (size_t i = 0; i < c.kernels.size(); ++i) {
      std::string stem = dir + "/k" + std::to_string(i), ptx;
      ASSERT_TRUE(read_file_bytes(stem + ".ptx", ptx));
      EXPECT_THAT(ptx, HasSubstr(".entry " + c.kernels[i].name));
      // The linear cases' kernels are an epilogue's fallback: PTX only
      // (the GPU test JITs them).
      if (name.rfind("linear_relu", 0) == 0)
        EXPECT_THAT(c.kernels[i].archs, ::testing::IsEmpty());
      else
        EXPECT_THAT(c.kernels[i].archs, ElementsAre("sm_80", "sm_90"));
      for (const std::string& arch : c.kernels[i].archs) {
        std::string cubin;
        ASSERT_TRUE(read_file_bytes(stem + "." + arch + ".cubin", cubin));
        EXPECT_EQ(describe_cubin_arch(cubin), arch);
      }
    }
    for (int id : c.inputs)
      if (!codegen_case_constant(c.fills, id))
        EXPECT_EQ(file_size(dir + "/v" + std::to_string(id) + ".in.f32"),
                  c.elements[id] * c.element_bytes[id]);
    for (int id : c.outputs) {
      if (codegen_case_constant(c.expects, id)) continue;
      std::string stem = dir + "/v" + std::to_string(id);
      EXPECT_EQ(file_size(stem + ".expected.f32"), c.elements[id] * sizeof(float));
      std::string bound;
      ASSERT_TRUE(read_file_bytes(stem + ".bound.f32", bound));
      ASSERT_EQ(bound.size(), c.elements[id] * sizeof(float));
      for (size_t i = 0; i < bound.size(); i += sizeof(float)) {
        float b;
        std::memcpy(&b, bound.data() + i, sizeof b);
        ASSERT_TRUE(std::isfinite(b) && b > 0) << "bound " << i / sizeof(float);
      }
    }
    if (name == "fma_relu") {
      // 1,000,003 elements in blocks of 256: 3907 blocks, the last partial.
      ASSERT_EQ(c.kernels.size(), 1u);
      EXPECT_THAT(c.kernels[0].grid, ElementsAre(3907u, 1u, 1u));
      EXPECT_TRUE(c.bandwidth);
    }
    if (name == "fma_relu_hbm") {
      // 67,108,867 elements: 262,145 blocks of 256, the last partial; the
      // inputs and the output constants, no data files.
      ASSERT_EQ(c.kernels.size(), 1u);
      EXPECT_THAT(c.kernels[0].grid, ElementsAre(262145u, 1u, 1u));
      EXPECT_TRUE(c.bandwidth);
      EXPECT_EQ(c.fills.size(), 3u);
      EXPECT_EQ(c.expects.size(), 1u);
      EXPECT_EQ(file_size(dir + "/v0.in.f32"), 0u);
    }
    if (name == "linear_relu") {
      // One cuBLASLt step (x, w -> %3) whose epilogue adds the bias (%2)
      // and applies the relu: no kernels.
      ASSERT_EQ(c.launches.size(), 1u);
      const CodegenCaseLaunch& m = c.launches[0];
      EXPECT_TRUE(m.matmul);
      EXPECT_EQ(m.m, 64);
      EXPECT_EQ(m.n, 80);
      EXPECT_EQ(m.k, 96);
      EXPECT_EQ(m.batch, 1);
      EXPECT_THAT(m.args, ElementsAre(0, 1, 3));
      EXPECT_EQ(m.bias, 2);
      EXPECT_EQ(m.activation, static_cast<int>(MatmulEpilogue::relu));
      EXPECT_FALSE(m.transpose_a || m.transpose_b);
      // The kernels (add, relu) are the epilogue's fallback, which this
      // plan does not launch.
      EXPECT_EQ(c.kernels.size(), 2u);
    }
    if (name == "linear_relu_fallback") {
      // The call without its epilogue (x, w -> %3), then the fallback's
      // kernels: the bias add and the relu over %3 in place.
      ASSERT_EQ(c.launches.size(), 3u);
      EXPECT_TRUE(c.launches[0].matmul);
      EXPECT_THAT(c.launches[0].args, ElementsAre(0, 1, 3));
      EXPECT_EQ(c.launches[0].bias, -1);
      EXPECT_EQ(c.launches[0].activation, static_cast<int>(MatmulEpilogue::none));
      EXPECT_FALSE(c.launches[1].matmul);
      EXPECT_THAT(c.launches[1].args, ElementsAre(3, 2, 3));
      EXPECT_FALSE(c.launches[2].matmul);
      EXPECT_THAT(c.launches[2].args, ElementsAre(3, 3));
    }
    if (name == "dropout") {
      // The RNG state is two i64 values; the output is f32.
      EXPECT_EQ(c.element_bytes[c.inputs[1]], 8);
    }
    if (name == "shape_copies") {
      // permute, slice, slice_scatter (a copy, then the scatter), reshape.
      EXPECT_EQ(c.kernels.size(), 5u);
      EXPECT_EQ(c.outputs.size(), 4u);
    }
  }
  EXPECT_EQ(cases, 13);
}

/// Runs case `name`'s step (`text`) on the host from its input files and
/// checks every output against its expected file within its bound.
void expect_case_holds_on_host(const char* text, const std::string& name) {
  SCOPED_TRACE(name);
  CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string dir = std::string(MSTEP_CODEGEN_CASE_DIR) + "/" + name;
  std::string spec, error;
  ASSERT_TRUE(read_file_bytes(dir + "/case.txt", spec));
  CodegenCase c;
  ASSERT_TRUE(parse_codegen_case(spec, c, error)) << error;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values) values.emplace_back(type.bytes(), char{0x7f});
  ASSERT_EQ(values.size(), c.elements.size());
  for (int id : c.inputs) {
    std::string bytes;
    if (const float* fill = codegen_case_constant(c.fills, id)) {
      for (size_t at = 0; at < values[id].size(); at += sizeof(float))
        std::memcpy(values[id].data() + at, fill, sizeof(float));
      continue;
    }
    ASSERT_TRUE(read_file_bytes(dir + "/v" + std::to_string(id) + ".in.f32", bytes));
    ASSERT_EQ(bytes.size(), values[id].size()) << "v" << id;
    std::memcpy(values[id].data(), bytes.data(), bytes.size());
  }
  // The error word is an input of zeros (the GPU test fills the other
  // buffers with ones, which would read as an error).
  if (const int word = compiled->plan.error_word; word >= 0) {
    EXPECT_THAT(c.inputs, ::testing::Contains(word));
    EXPECT_EQ(values[word], std::vector<char>(values[word].size(), 0));
  }
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  for (int id : c.outputs) {
    if (const float* exact = codegen_case_constant(c.expects, id)) {
      const float* got = as<float>(values[id]);
      const size_t n = values[id].size() / sizeof(float);
      EXPECT_EQ(std::count(got, got + n, *exact), static_cast<std::ptrdiff_t>(n)) << "v" << id;
      continue;
    }
    const std::string stem = dir + "/v" + std::to_string(id);
    std::string expected, bound;
    ASSERT_TRUE(read_file_bytes(stem + ".expected.f32", expected));
    ASSERT_TRUE(read_file_bytes(stem + ".bound.f32", bound));
    ASSERT_EQ(expected.size(), values[id].size());
    const float* got = as<float>(values[id]);
    int wrong = 0;
    for (size_t i = 0; i < expected.size() / sizeof(float); ++i) {
      float e, b;
      std::memcpy(&e, expected.data() + i * sizeof e, sizeof e);
      std::memcpy(&b, bound.data() + i * sizeof b, sizeof b);
      if (!(std::fabs(double(got[i]) - e) <= b) && wrong++ < 3)
        ADD_FAILURE() << "v" << id << "[" << i << "] = " << got[i] << ", expected " << e << " +- "
                      << b;
    }
  }
}

TEST(CodegenCaseFiles, ExpectedOutputsHoldForTheLoopNestsOnTheHost) {
  // Every case but linear_relu (its matmul is a cuBLASLt step, no loop nest).
  const std::pair<const char*, const char*> cases[] = {
      {kFmaRelu, "fma_relu"},         {kExpTanh, "exp_tanh_chain"},
      {kRowSum, "row_sum"},           {kColumnSum, "column_sum"},
      {kSoftmaxRows, "softmax_rows"}, {kNorms, "norms"},
      {kShapeCopies, "shape_copies"}, {kDropout, "dropout"},
      {kLossEmbedding, "loss_embedding"}, {kClippedAdadelta, "clipped_adadelta"},
      {fma_relu_hbm_step().c_str(), "fma_relu_hbm"}};
  for (const auto& [text, name] : cases) expect_case_holds_on_host(text, name);
}

} // namespace
} // namespace mstep::cuda::testing
