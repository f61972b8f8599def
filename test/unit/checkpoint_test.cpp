// Checkpoints: safetensors round trips for every dtype, files written by
// PyTorch (test/tools/write_safetensors.py), files mstep wrote read into
// PyTorch by PyPI's safetensors (test/tools/check_safetensors.py), files
// PyPI's safetensors wrote (test/tools/pypi_write_safetensors.py), names and
// metadata that need JSON escapes, module
// and optimizer save / load with strict and non-strict reports, and corrupt
// files, after each of which the process keeps working.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mstep/mstep.h"
#include "test/unit/SafetensorsTestDir.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using ::testing::HasSubstr;
using V = std::vector<float>;

/// A fresh directory per test.
class CheckpointTest : public testing::SafetensorsTestDir {
 protected:
  CheckpointTest() : SafetensorsTestDir("mstep_checkpoint_") {}

};

/// A module defined here, so the test does not depend on nn's layers:
/// PyTorch's nn.Linear(3, 2) names, plus a buffer and a child.
class TinyLinear : public nn::Module {
 public:
  TinyLinear(int64_t in = 3, int64_t out = 2) : nn::Module("TinyLinear") {
    weight = zeros({out, in});
    bias = zeros({out});
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  Tensor weight, bias;
};

class TinyNet : public nn::Module {
 public:
  TinyNet() : nn::Module("TinyNet") {
    fc = register_module("fc", std::make_shared<TinyLinear>());
    scale = from_vector(V{1.5f}, {1});
    steps = from_vector(std::vector<int64_t>{7}, {1});
    register_parameter("scale", scale);
    register_buffer("steps", steps);
  }
  std::shared_ptr<TinyLinear> fc;
  Tensor scale, steps;
};

void expect_process_works() {
  Tensor x = from_vector(V{1, 2}, {2});
  EXPECT_EQ((x * 2.0 + 1.0).to_vector<float>(), (V{3, 5}));
  mark_step();
}

TEST_F(CheckpointTest, RoundTripEveryDtype) {
  std::map<std::string, Tensor> tensors = {
      {"f32", from_vector(V{1.5f, -2, 3.25f, 0}, {2, 2})},
      {"f64", from_vector(std::vector<double>{1.0 / 3, -1e300}, {2})},
      {"bf16", from_vector(V{1.5f, -2, 0.0078125f}, {3}, DType::bf16)},
      {"f16", from_vector(V{1.5f, -2, 65504}, {3}, DType::f16)},
      {"i32", from_vector(std::vector<int32_t>{-5, 7}, {1, 2})},
      {"i64", from_vector(std::vector<int64_t>{int64_t{1} << 50, -3}, {2})},
      {"bool", from_vector(std::vector<bool>{true, false, true}, {3})},
      {"scalar", Tensor::scalar(0.25)},
      {"empty", zeros({0, 3})},
      {"pending", from_vector(V{1, 2}, {2}) * 3.0},  // computed by the save
  };
  save_safetensors(path("all.safetensors"), tensors, {{"epoch", "3"}, {"note", "héllo"}});
  std::map<std::string, Tensor> back = load_safetensors(path("all.safetensors"));
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(back.count(name));
    EXPECT_EQ(back.at(name).type(), t.type());
    EXPECT_FALSE(back.at(name).is_pending());
    EXPECT_EQ(back.at(name).to_vector<double>(), t.to_vector<double>());
  }
  std::map<std::string, std::string> meta = load_safetensors_metadata(path("all.safetensors"));
  EXPECT_EQ(meta.at("epoch"), "3");
  EXPECT_EQ(meta.at("note"), "héllo");
  // The data starts 8-byte aligned, as safetensors writes it.
  std::ifstream in(path("all.safetensors"), std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST_F(CheckpointTest, LoadsFilesWrittenByPyTorch) {
  const fs::path script = fs::path(MSTEP_TEST_TOOLS_DIR) / "write_safetensors.py";
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 (python3-torch)";
  const std::string cmd = "/usr/bin/python3 " + script.string() + " fixture " + dir_.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::map<std::string, Tensor> t = load_safetensors(path("dtypes.safetensors"));
  const std::vector<double> base = {-1, -0.5, 0, 0.5, 1, 1.5};
  EXPECT_EQ(t.at("f32").type().to_string(), "f32[2, 3]");
  EXPECT_EQ(t.at("f32").to_vector<double>(), base);
  EXPECT_EQ(t.at("bf16").type().to_string(), "bf16[2, 3]");
  EXPECT_EQ(t.at("bf16").to_vector<double>(), base);
  EXPECT_EQ(t.at("f16").to_vector<double>(), base);
  std::vector<double> thirds = t.at("f64").to_vector<double>();
  for (size_t i = 0; i < base.size(); ++i) EXPECT_DOUBLE_EQ(thirds[i], base[i] / 3);
  EXPECT_EQ(t.at("i32").to_vector<int32_t>(), (std::vector<int32_t>{-2, -1, 0, 1}));
  EXPECT_EQ(t.at("i64").to_vector<int64_t>(), (std::vector<int64_t>{int64_t{1} << 40, -7}));
  EXPECT_EQ(t.at("i64").type().to_string(), "i64[2, 1]");
  EXPECT_EQ(t.at("bool").to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(t.at("scalar").dim(), 0);
  EXPECT_EQ(t.at("scalar").item(), 2.5);
  EXPECT_EQ(t.at("empty").type().to_string(), "f32[0, 4]");
  EXPECT_EQ(load_safetensors_metadata(path("dtypes.safetensors")).at("source"), "torch");

  // A torch.nn.Linear(3, 2) state_dict loads into a module with its names.
  TinyLinear lin;
  LoadReport report = load(lin, path("linear.safetensors"));
  EXPECT_TRUE(report.ok()) << report.to_string();
  EXPECT_EQ(lin.weight.to_vector<float>(), (V{0, 0.25f, 0.5f, 0.75f, 1, 1.25f}));
  EXPECT_EQ(lin.bias.to_vector<float>(), (V{-1, 2}));

  // mstep's writer keeps what PyTorch wrote (read back with mstep's reader;
  // PyTorchReadsFilesMstepWrote has PyTorch read mstep's files).
  save_safetensors(path("again.safetensors"), t);
  std::map<std::string, Tensor> again = load_safetensors(path("again.safetensors"));
  for (const auto& [name, v] : t)
    EXPECT_EQ(again.at(name).to_vector<double>(), v.to_vector<double>());
}

/// Runs test/tools/check_safetensors.py KIND FILE with the Python that has
/// PyPI's safetensors (scripts/setup.sh makes it; CMake passes its path):
/// {exit status, output}.
std::pair<int, std::string> check_with_pytorch(const std::string& kind, const std::string& file) {
  const std::string python = MSTEP_SAFETENSORS_PYTHON;
  const std::string cmd = python + " " + MSTEP_TEST_TOOLS_DIR + "/check_safetensors.py " + kind +
                          " " + file + " 2>&1";
  std::string output;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, "cannot run " + cmd};
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, cmd + "\n" + output};
}

/// The tensors of write_safetensors.py's fixture_tensors(), built by mstep.
std::map<std::string, Tensor> fixture_tensors() {
  const std::vector<double> base = {-1, -0.5, 0, 0.5, 1, 1.5};
  std::vector<double> thirds;
  for (double v : base) thirds.push_back(v / 3);
  return {
      {"f32", from_vector(base, {2, 3}, DType::f32)},
      {"f64", from_vector(thirds, {2, 3})},
      {"bf16", from_vector(base, {2, 3}, DType::bf16)},
      {"f16", from_vector(base, {2, 3}, DType::f16)},
      {"i32", from_vector(std::vector<int32_t>{-2, -1, 0, 1}, {4})},
      {"i64", from_vector(std::vector<int64_t>{int64_t{1} << 40, -7}, {2, 1})},
      {"bool", from_vector(std::vector<bool>{true, false, true}, {3})},
      {"scalar", Tensor::scalar(2.5)},
      {"empty", zeros({0, 4})},
  };
}

TEST_F(CheckpointTest, PyTorchReadsFilesMstepWrote) {
  if (!fs::exists(MSTEP_SAFETENSORS_PYTHON))
    FAIL() << "no Python with PyTorch and safetensors at " << MSTEP_SAFETENSORS_PYTHON
           << ": run scripts/setup.sh (it creates that virtual environment), or configure with "
              "-DMSTEP_SAFETENSORS_PYTHON=/path/to/python";

  // One tensor per dtype; the f32 one still pending when it is saved.
  std::map<std::string, Tensor> tensors = fixture_tensors();
  tensors["f32"] = from_vector(std::vector<double>{-0.5, -0.25, 0, 0.25, 0.5, 0.75}, {2, 3},
                               DType::f32) * 2.0;
  ASSERT_TRUE(tensors["f32"].is_pending());
  save_safetensors(path("dtypes.safetensors"), tensors, {{"format", "pt"}});
  auto [status, output] = check_with_pytorch("dtypes", path("dtypes.safetensors"));
  EXPECT_EQ(status, 0) << output;

  // A module's checkpoint loads into torch.nn.Linear(3, 2) with strict names.
  TinyLinear lin;
  lin.weight.copy_(from_vector(V{0, 0.25f, 0.5f, 0.75f, 1, 1.25f}, {2, 3}));
  lin.bias.copy_(from_vector(V{-1, 2}, {2}));
  save(lin, path("linear.safetensors"));
  std::tie(status, output) = check_with_pytorch("linear", path("linear.safetensors"));
  EXPECT_EQ(status, 0) << output;

  // The check can fail: a changed value, a changed dtype and a missing
  // tensor are each reported by name.
  tensors = fixture_tensors();
  tensors["f16"] = from_vector(std::vector<double>{-1, -0.5, 0, 0.5, 1, 1.25}, {2, 3}, DType::f16);
  tensors["i64"] = from_vector(std::vector<int32_t>{1 << 30, -7}, {2, 1});
  tensors.erase("bf16");
  save_safetensors(path("wrong.safetensors"), tensors, {{"format", "pt"}});
  std::tie(status, output) = check_with_pytorch("dtypes", path("wrong.safetensors"));
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("'f16': values"));
  EXPECT_THAT(output, HasSubstr("'i64': dtype torch.int32, want torch.int64"));
  EXPECT_THAT(output, HasSubstr("missing tensor 'bf16'"));
}

/// write_safetensors.py's fixture_unicode(): names and metadata that need
/// JSON escapes (non-ASCII, above U+FFFF, a quote, a backslash, a tab).
std::map<std::string, Tensor> unicode_tensors() {
  return {
      {"café.weight", from_vector(V{1, 2}, {2})},
      {"emoji 😀", from_vector(std::vector<int64_t>{3}, {1})},
      {"quote\" back\\slash\ttab", from_vector(std::vector<bool>{true}, {1})},
      {"名前/ключ", zeros({0})},
  };
}
const std::map<std::string, std::string> kUnicodeMetadata = {
    {"format", "pt"}, {"note", "héllo 😀"}, {"ключ", "line\n\"quoted\""}};

/// `got` has exactly the names, types and values of `want`.
void expect_same_tensors(const std::map<std::string, Tensor>& got,
                         const std::map<std::string, Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(got.count(name));
    EXPECT_EQ(got.at(name).type(), w.type());
    EXPECT_EQ(got.at(name).to_vector<double>(), w.to_vector<double>());
  }
}

TEST_F(CheckpointTest, LoadsEscapedUnicodeNamesWrittenByPython) {
  // json.dumps writes \uXXXX escapes, a surrogate pair for U+1F600.
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3 (python3-torch)";
  const std::string cmd = "/usr/bin/python3 " + std::string(MSTEP_TEST_TOOLS_DIR) +
                          "/write_safetensors.py fixture " + dir_.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  expect_same_tensors(load_safetensors(path("unicode.safetensors")), unicode_tensors());
  EXPECT_EQ(load_safetensors_metadata(path("unicode.safetensors")), kUnicodeMetadata);
}

TEST_F(CheckpointTest, LoadsFilesPyPISafetensorsWrote) {
  if (!fs::exists(MSTEP_SAFETENSORS_PYTHON))
    FAIL() << "no Python with PyTorch and safetensors at " << MSTEP_SAFETENSORS_PYTHON
           << ": run scripts/setup.sh";
  const std::string cmd = std::string(MSTEP_SAFETENSORS_PYTHON) + " " + MSTEP_TEST_TOOLS_DIR +
                          "/pypi_write_safetensors.py " + dir_.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // PyPI orders the data by alignment and writes UTF-8 names unescaped.
  expect_same_tensors(load_safetensors(path("dtypes.safetensors")), fixture_tensors());
  EXPECT_EQ(load_safetensors_metadata(path("dtypes.safetensors")),
            (std::map<std::string, std::string>{{"format", "pt"}, {"source", "safetensors"}}));
  expect_same_tensors(load_safetensors(path("unicode.safetensors")), unicode_tensors());
  EXPECT_EQ(load_safetensors_metadata(path("unicode.safetensors")), kUnicodeMetadata);
}

TEST_F(CheckpointTest, PyTorchReadsUnicodeNamesAndMetadataMstepWrote) {
  if (!fs::exists(MSTEP_SAFETENSORS_PYTHON))
    FAIL() << "no Python with PyTorch and safetensors at " << MSTEP_SAFETENSORS_PYTHON
           << ": run scripts/setup.sh";
  save_safetensors(path("unicode.safetensors"), unicode_tensors(), kUnicodeMetadata);
  auto [status, output] = check_with_pytorch("unicode", path("unicode.safetensors"));
  EXPECT_EQ(status, 0) << output;
  // The check compares the metadata too: a changed value fails it.
  std::map<std::string, std::string> changed = kUnicodeMetadata;
  changed["note"] = "hello";
  save_safetensors(path("changed.safetensors"), unicode_tensors(), changed);
  std::tie(status, output) = check_with_pytorch("unicode", path("changed.safetensors"));
  EXPECT_EQ(status, 1) << output;
  EXPECT_THAT(output, HasSubstr("'note': 'hello'"));
}

TEST_F(CheckpointTest, ModuleRoundTripKeepsParameterIdentity) {
  TinyNet a;
  a.fc->weight.copy_(from_vector(V{1, 2, 3, 4, 5, 6}, {2, 3}));
  a.fc->bias.copy_(from_vector(V{-1, -2}, {2}));
  a.steps.copy_(from_vector(std::vector<int64_t>{42}, {1}));
  save(a, path("net.safetensors"));
  EXPECT_EQ(load_safetensors_metadata(path("net.safetensors")).at("mstep.module"), "TinyNet");

  TinyNet b;
  const TensorImpl* weight_impl = b.fc->weight.impl();
  optim::SGD opt(b.parameters(), {.lr = 0.5});
  LoadReport report = load(b, path("net.safetensors"));
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(b.fc->weight.impl(), weight_impl);
  EXPECT_TRUE(b.fc->weight.requires_grad());
  EXPECT_EQ(b.fc->weight.to_vector<float>(), (V{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.steps.to_vector<int64_t>(), (std::vector<int64_t>{42}));
  // The optimizer holds the same parameters, so it steps from the loaded values.
  b.fc->bias.set_grad(from_vector(V{1, 1}, {2}));
  opt.step();
  mark_step();
  EXPECT_EQ(b.fc->bias.to_vector<float>(), (V{-1.5f, -2.5f}));
}

TEST_F(CheckpointTest, DtypeDifferencesConvertLikePyTorch) {
  save_safetensors(path("f64.safetensors"),
                   {{"weight", from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3})},
                    {"bias", from_vector(std::vector<double>{0.5, 0.25}, {2})}});
  TinyLinear lin;
  EXPECT_TRUE(load(lin, path("f64.safetensors")).ok());
  EXPECT_EQ(lin.weight.dtype(), DType::f32);
  EXPECT_EQ(lin.bias.to_vector<float>(), (V{0.5f, 0.25f}));
}

TEST_F(CheckpointTest, StrictLoadListsEveryProblemInOneMessage) {
  save_safetensors(path("bad.safetensors"), {{"fc.weight", zeros({3, 2})},  // transposed
                                             {"fc.bias", ones({2})},
                                             {"extra.weight", zeros({1})},
                                             {"other", zeros({1})}});
  TinyNet net;
  net.fc->bias.copy_(from_vector(V{7, 8}, {2}));
  const std::string msg = error_of([&] { load(net, path("bad.safetensors")); });
  EXPECT_THAT(msg, HasSubstr(path("bad.safetensors")));
  EXPECT_THAT(msg, HasSubstr("TinyNet"));
  EXPECT_THAT(msg, HasSubstr("5 problems"));
  EXPECT_THAT(msg, HasSubstr("missing: scale"));
  EXPECT_THAT(msg, HasSubstr("missing: steps"));
  EXPECT_THAT(msg, HasSubstr("unexpected: extra.weight"));
  EXPECT_THAT(msg, HasSubstr("unexpected: other"));
  EXPECT_THAT(msg, HasSubstr("mismatched: fc.weight expected f32[2, 3], got f32[3, 2]"));
  EXPECT_THAT(msg, HasSubstr("strict=false"));
  // Nothing was loaded, not even the entry that matched.
  EXPECT_EQ(net.fc->bias.to_vector<float>(), (V{7, 8}));

  LoadReport report = load(net, path("bad.safetensors"), /*strict=*/false);
  EXPECT_EQ(report.missing, (std::vector<std::string>{"scale", "steps"}));
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"extra.weight", "other"}));
  ASSERT_EQ(report.mismatched.size(), 1u);
  EXPECT_EQ(report.mismatched[0].name, "fc.weight");
  EXPECT_EQ(report.mismatched[0].expected, "f32[2, 3]");
  EXPECT_EQ(report.mismatched[0].got, "f32[3, 2]");
  EXPECT_EQ(net.fc->bias.to_vector<float>(), (V{1, 1}));    // the match loaded
  EXPECT_EQ(net.fc->weight.to_vector<float>(), (V(6, 0)));  // the mismatch did not
  expect_process_works();
}

TEST_F(CheckpointTest, CorruptFilesGiveClearErrorsAndChangeNothing) {
  TinyLinear lin;
  lin.bias.copy_(from_vector(V{3, 4}, {2}));
  const std::string good_header = R"({"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string good_data(8, '\0');
  struct Bad {
    std::string name, problem;
    std::string file;
  };
  std::vector<Bad> cases = {
      {"missing", "cannot open", path("does_not_exist.safetensors")},
      {"tiny", "fewer than the 8-byte header length", ""},
      {"long_header", "runs past the end of the file",
       write_raw("long_header", good_header, good_data, 1000)},
      {"huge_header", "exceeds", write_raw("huge_header", good_header, good_data, 1ull << 40)},
      {"json", "not valid JSON", write_raw("json", "{\"bias\": [1, 2", "")},
      {"not_object", "not a JSON object", write_raw("not_object", "[1, 2]", "")},
      {"dtype", "has dtype 'F8_E4M3', which mstep does not support",
       write_raw("dtype", R"({"bias":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})",
                 std::string(2, '\0'))},
      {"offsets", "data_offsets [0, 64] outside the data section of 8 bytes",
       write_raw("offsets", R"({"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,64]}})",
                 good_data)},
      {"reversed", "outside the data section",
       write_raw("reversed", R"({"bias":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                 good_data)},
      {"size", "needs 8 bytes but its data_offsets [0, 4] span 4",
       write_raw("size", R"({"bias":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                 good_data)},
      {"truncated", "outside the data section of 5 bytes",
       write_raw("truncated", good_header, good_data.substr(0, 5))},
      {"shape", "not a list of non-negative sizes",
       write_raw("shape", R"({"bias":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                 good_data)},
      {"metadata", "__metadata__ entry 'n' is not a string",
       write_raw("metadata", R"({"__metadata__":{"n":3}})", "")},
  };
  {
    std::ofstream tiny(path("tiny"), std::ios::binary);
    tiny << "abc";
    cases[1].file = path("tiny");
  }
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string msg = error_of([&] { load(lin, c.file); });
    EXPECT_THAT(msg, HasSubstr(c.file));
    EXPECT_THAT(msg, HasSubstr(c.problem));
    EXPECT_THROW(load_safetensors(c.file), Error);
    EXPECT_EQ(lin.bias.to_vector<float>(), (V{3, 4}));
    expect_process_works();
  }
  // The good layout loads (all-zero bias), so the checks above are the
  // only thing that rejected the others.
  std::map<std::string, Tensor> ok = load_safetensors(write_raw("good", good_header, good_data));
  EXPECT_EQ(ok.at("bias").to_vector<float>(), (V{0, 0}));
}

TEST_F(CheckpointTest, SaveErrorsNameTheFileAndKeepTheOldOne) {
  EXPECT_THROW(save_safetensors("/nonexistent_dir/x.safetensors", {{"a", zeros({1})}}), Error);
  EXPECT_THAT(error_of([&] {
                save_safetensors(path("x.safetensors"), {{"a", Tensor()}});
              }),
              HasSubstr("tensor 'a' is undefined"));
  EXPECT_THROW(save_safetensors(path("x.safetensors"), {{"__metadata__", zeros({1})}}), Error);
  EXPECT_FALSE(fs::exists(path("x.safetensors")));
  expect_process_works();
}

TEST_F(CheckpointTest, OptimizerCheckpointResumesTraining) {
  auto train_step = [](TinyLinear& m, optim::Optimizer& opt) {
    Tensor x = from_vector(V{1, -1, 2}, {3});
    Tensor err = sum(m.weight * x, {1}) + m.bias - from_vector(V{1, 0}, {2});
    sum(err * err).backward();
    opt.step();
    opt.zero_grad();
    mark_step();
  };
  TinyLinear a;
  a.weight.copy_(from_vector(V{0.1f, 0.2f, 0.3f, -0.1f, 0, 0.5f}, {2, 3}));
  optim::AdamW opt_a(a.parameters(), {.lr = 0.05});
  train_step(a, opt_a);
  train_step(a, opt_a);
  save(a, path("model.safetensors"));
  save(opt_a, path("optim.safetensors"));
  EXPECT_EQ(load_safetensors_metadata(path("optim.safetensors")).at("mstep.optimizer"), "AdamW");

  TinyLinear b;
  optim::AdamW opt_b(b.parameters(), {.lr = 1.0});
  load(b, path("model.safetensors"));
  EXPECT_TRUE(load(opt_b, path("optim.safetensors")).ok());
  EXPECT_DOUBLE_EQ(opt_b.lr(), 0.05);
  train_step(a, opt_a);
  train_step(b, opt_b);
  EXPECT_EQ(a.weight.to_vector<float>(), b.weight.to_vector<float>());
  EXPECT_EQ(opt_b.state(0, "step").item(), 3);

  // An SGD checkpoint does not fit Adam: one error lists it all.
  optim::SGD sgd(b.parameters(), {.lr = 0.1, .momentum = 0.9});
  train_step(b, sgd);
  save(sgd, path("sgd.safetensors"));
  const std::string msg = error_of([&] { load(opt_b, path("sgd.safetensors")); });
  EXPECT_THAT(msg, HasSubstr(path("sgd.safetensors")));
  EXPECT_THAT(msg, HasSubstr("unexpected: param_groups.momentum"));
  EXPECT_THAT(msg, HasSubstr("unexpected: state.0.momentum_buffer"));
  EXPECT_THAT(msg, HasSubstr("missing: param_groups.betas.0"));
  EXPECT_THAT(msg, HasSubstr("missing: state.0.exp_avg"));
  EXPECT_EQ(opt_b.state(0, "step").item(), 3);
  LoadReport report = load(opt_b, path("sgd.safetensors"), /*strict=*/false);
  EXPECT_FALSE(report.ok());
  EXPECT_DOUBLE_EQ(opt_b.lr(), 0.1);            // the shared hyperparameter loaded
  EXPECT_EQ(opt_b.state(0, "step").item(), 3);  // incomplete state: kept
  expect_process_works();
}

}  // namespace
}  // namespace mstep
