// The device-side error word (CudaErrorWord.h; issue 22 §4, the
// replay-after-failure case): a step whose nll_loss meets a target out of
// range leaves its parameters, optimizer state and step counter bitwise
// as they were, and the error comes back at the sync point in the cpu
// backend's words; the next run with good data updates as usual.
//  - The loop nests on the host (TiledHost.h): the kernel sets the word,
//    the guarded multi-tensor update writes every input back unchanged;
//    index_select, gather and scatter_add report an index out of range the
//    same way.
//  - The plan: one word (i64[8], outside the arena) only where a kernel
//    checks; it survives the stored form.
//  - The executable on the fake driver: the word is reset before the
//    run's launches and copied back after them (as the first and last
//    nodes of a captured CUDA graph too); the fake's stand-in for the
//    nll_loss kernel sets it, and the wait for the step's loss returns
//    the error, once; the next run or replay is clean.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaErrorWord.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

/// nll_loss (op #0) over 4 rows of 10 classes, then AdamW on one
/// parameter: the loss, the new parameter, its two moments, the counter.
constexpr const char* kLossAndUpdateStep = R"(
func.func @step(%lp: tensor<4x10xf32>, %t: tensor<4xi64>, %w: tensor<100xf32>, %gw: tensor<100xf32>,
                %m: tensor<100xf32>, %v: tensor<100xf32>, %t0: tensor<i64>, %lr: tensor<f64>,
                %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>)
    -> (tensor<f32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<i64>) {
  %loss = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<4x10xf32>, tensor<4xi64> -> tensor<f32>
  %p, %s:2, %k = mstep.multi_tensor_update <adamw> params(%w : tensor<100xf32>) grads(%gw : tensor<100xf32>) states(%m, %v : tensor<100xf32>, tensor<100xf32>) steps(%t0) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd)
  return %loss, %p, %s#0, %s#1, %k : tensor<f32>, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<i64>
})";

/// What the cpu backend says for target 12 at row 2 of 10 classes
/// (lib/backends/cpu/LossKernels.cpp), written out here.
constexpr const char* kCpuText =
    "mstep::nll_loss: target 12 at position 2 is out of range for C = 10 classes (valid: 0 to 9, "
    "or ignore_index -100). Check the labels and the number of classes.";

template <typename T> std::vector<char> bytes_of(const std::vector<T>& values) {
  std::vector<char> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

/// The step's inputs, with `targets`.
std::vector<std::vector<char>> step_inputs(const std::vector<int64_t>& targets) {
  std::vector<std::vector<char>> in;
  in.push_back(bytes_of(testing::random_floats(40, 1)));
  in.push_back(bytes_of(targets));
  for (uint32_t seed : {2, 3})  // w, gw
    in.push_back(bytes_of(testing::random_floats(100, seed)));
  for (uint32_t seed : {4, 5}) {  // the moments (the second one >= 0)
    std::vector<float> s = testing::random_floats(100, seed);
    for (float& x : s) x = x < 0 ? -x : x;
    in.push_back(bytes_of(s));
  }
  in.push_back(bytes_of(std::vector<int64_t>{7}));
  for (double h : {1e-2, 0.9, 0.999, 1e-8, 0.01}) in.push_back(bytes_of(std::vector<double>{h}));
  return in;
}

class CudaErrorWordHost : public ::testing::Test {
protected:
  void SetUp() override {
    auto compiled = compile_cuda_step(step_.module(), default_cuda_compile_options());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    compiled_ = std::move(*compiled);
  }
  /// The step's values after one host run over `inputs`.
  std::vector<std::vector<char>> run(const std::vector<std::vector<char>>& inputs) {
    std::vector<std::vector<char>> values;
    for (const TensorType& type : compiled_.plan.values) values.emplace_back(type.bytes(), char{0x7f});
    for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
    testing::run_tiled_on_host(step_.context(), compiled_, values);
    return values;
  }
  const std::vector<char>& output(const std::vector<std::vector<char>>& values, int k) {
    return values[compiled_.plan.outputs[k]];
  }
  testing::CudaStepContext step_{kLossAndUpdateStep};
  CompiledCudaStep compiled_;
};

TEST_F(CudaErrorWordHost, ABadTargetLeavesTheParameterStateAndCounterBitwiseUnchanged) {
  const std::vector<std::vector<char>> inputs = step_inputs({3, 0, 12, 9});
  const std::vector<std::vector<char>> values = run(inputs);
  ASSERT_FALSE(HasFatalFailure());
  // Outputs 1..4 are inputs 2 (w), 4 (m), 5 (v), 6 (the counter), as they were.
  EXPECT_EQ(output(values, 1), inputs[2]);
  EXPECT_EQ(output(values, 2), inputs[4]);
  EXPECT_EQ(output(values, 3), inputs[5]);
  EXPECT_EQ(output(values, 4), inputs[6]);
  // The word: the code, the first (only) bad target, its row, C, ignore_index, op #0.
  ASSERT_GE(compiled_.plan.error_word, 0);
  int64_t word[error_word::kWords];
  std::memcpy(word, values[compiled_.plan.error_word].data(), sizeof word);
  EXPECT_EQ(word[error_word::kCodes], error_word::kNllTarget);
  EXPECT_EQ(word[error_word::kClaim], 1);
  EXPECT_EQ(word[error_word::kValue], 12);
  EXPECT_EQ(word[error_word::kPosition], 2);
  EXPECT_EQ(word[error_word::kBound], 10);
  EXPECT_EQ(word[error_word::kExtra], -100);
  EXPECT_EQ(word[error_word::kOp], 0);
  const absl::Status error = error_word::decode(compiled_.plan, word);
  EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(error.message()), StartsWith(kCpuText));
  EXPECT_THAT(std::string(error.message()), HasSubstr("(mstep.nll_loss #0)"));
}

TEST_F(CudaErrorWordHost, GoodOrIgnoredTargetsUpdateAsUsual) {
  const std::vector<std::vector<char>> inputs = step_inputs({3, -100, 0, 9});
  const std::vector<std::vector<char>> values = run(inputs);
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_NE(output(values, 1), inputs[2]);
  EXPECT_NE(output(values, 2), inputs[4]);
  EXPECT_EQ(output(values, 4), bytes_of(std::vector<int64_t>{8}));
  int64_t word[error_word::kWords];
  std::memcpy(word, values[compiled_.plan.error_word].data(), sizeof word);
  for (int64_t w : word) EXPECT_EQ(w, 0);
  EXPECT_TRUE(error_word::decode(compiled_.plan, word).ok());
}

TEST(CudaErrorWordIndex, AnIndexOutOfRangeIsReportedWithItsElementAndTheDimsSize) {
  // index_select (op #1, after an exp) of 5 rows by indices {0, 7, 2}.
  testing::CudaStepContext step(R"(
func.func @step(%x: tensor<5x4xf32>, %i: tensor<3xi64>) -> tensor<3x4xf32> {
  %e = mstep.exp %x : tensor<5x4xf32>
  %y = mstep.index_select %e, %i {dim = 0 : i64} : tensor<5x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
})");
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  ASSERT_GE(compiled->plan.error_word, 0);
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values) values.emplace_back(type.bytes(), char{0x7f});
  values[0] = bytes_of(testing::random_floats(20, 6));
  values[1] = bytes_of(std::vector<int64_t>{0, 7, 2});
  ASSERT_NO_FATAL_FAILURE(testing::run_tiled_on_host(step.context(), *compiled, values));
  int64_t word[error_word::kWords];
  std::memcpy(word, values[compiled->plan.error_word].data(), sizeof word);
  EXPECT_EQ(word[error_word::kCodes], error_word::kIndex);
  EXPECT_EQ(word[error_word::kValue], 7);
  EXPECT_EQ(word[error_word::kPosition], 1);
  EXPECT_EQ(word[error_word::kBound], 5);
  EXPECT_EQ(word[error_word::kExtra], 0);
  EXPECT_EQ(word[error_word::kOp], 1);
  EXPECT_THAT(std::string(error_word::decode(compiled->plan, word).message()),
              StartsWith("mstep::index_select: index 7 (element 1 of the index) is out of range "
                         "[0, 5) for dim 0 of the input. Indices must be in [0, size); negative "
                         "indices are not wrapped. Found on the device by kernel "));
}

TEST(CudaErrorWordIndex, IndexAddReportsABadIndexOnceInEitherForm) {
  // index_add (op #0) of 4 rows into 5 by indices {1, 9, 1, 0}: the bad
  // index is reported (value, element, bound, dim) and adds nothing; the
  // other rows add as usual. The sequential form (a lane per column) and
  // the owner form (a lane per output element, lane 0 reporting).
  testing::CudaStepContext step(R"(
func.func @step(%x: tensor<5x3xf32>, %i: tensor<4xi64>, %s: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %y = mstep.index_add %x, %i, %s {dim = 0 : i64} : tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32>
  return %y : tensor<5x3xf32>
})");
  for (double ratio : {0.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(ratio == 0.0 ? "sequential" : "owner");
    CudaCompileOptions options = default_cuda_compile_options();
    options.codegen.index_add_owner_max_ratio = ratio;
    auto compiled = compile_cuda_step(step.module(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    ASSERT_GE(compiled->plan.error_word, 0);
    std::vector<std::vector<char>> values;
    for (const TensorType& type : compiled->plan.values)
      values.emplace_back(type.bytes(), char{0x7f});
    values[0] = bytes_of(std::vector<float>(15, 1.f));
    values[1] = bytes_of(std::vector<int64_t>{1, 9, 1, 0});
    values[2] = bytes_of(std::vector<float>{1, 2, 3, 10, 20, 30, 100, 200, 300, 5, 6, 7});
    ASSERT_NO_FATAL_FAILURE(testing::run_tiled_on_host(step.context(), *compiled, values));
    int64_t word[error_word::kWords];
    std::memcpy(word, values[compiled->plan.error_word].data(), sizeof word);
    EXPECT_EQ(word[error_word::kCodes], error_word::kIndex);
    EXPECT_EQ(word[error_word::kValue], 9);
    EXPECT_EQ(word[error_word::kPosition], 1);
    EXPECT_EQ(word[error_word::kBound], 5);
    EXPECT_EQ(word[error_word::kExtra], 0);
    EXPECT_EQ(word[error_word::kOp], 0);
    EXPECT_EQ(values[compiled->plan.outputs[0]],
              bytes_of(std::vector<float>{6, 7, 8, 102, 203, 304, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  }
}

/// `op_text` (an index op, op #0, reading %x f32[5x4] and %i i64[3x4]
/// into %y) then AdamW on one parameter, as kLossAndUpdateStep.
std::string index_and_update_step(const std::string& op_text, const std::string& y_type) {
  return R"(
func.func @step(%x: tensor<5x4xf32>, %i: tensor<3x4xi64>, %w: tensor<100xf32>, %gw: tensor<100xf32>,
                %m: tensor<100xf32>, %v: tensor<100xf32>, %t0: tensor<i64>, %lr: tensor<f64>,
                %b1: tensor<f64>, %b2: tensor<f64>, %eps: tensor<f64>, %wd: tensor<f64>)
    -> ()" + y_type + R"(, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<i64>) {
  )" + op_text + R"(
  %p, %s:2, %k = mstep.multi_tensor_update <adamw> params(%w : tensor<100xf32>) grads(%gw : tensor<100xf32>) states(%m, %v : tensor<100xf32>, tensor<100xf32>) steps(%t0) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps) weight_decay(%wd)
  return %y, %p, %s#0, %s#1, %k : )" + y_type + R"(, tensor<100xf32>, tensor<100xf32>, tensor<100xf32>, tensor<i64>
})";
}

// gather and scatter_add (their own loop nests, CudaOpLoops.cpp) report an
// index out of range as index_select does, naming the op, and the step's
// update then leaves the parameter, its moments and the counter bitwise
// as they were; good indices update.
TEST(CudaErrorWordIndex, GatherAndScatterAddReportABadIndexAndTheUpdateChangesNothing) {
  struct Case {
    const char* op;
    std::string text, y_type;
    int64_t bound, dim;
  };
  const Case cases[] = {
      {"gather",
       "%y = mstep.gather %x, %i {dim = 0 : i64} : tensor<5x4xf32>, tensor<3x4xi64> -> "
       "tensor<3x4xf32>",
       "tensor<3x4xf32>", 5, 0},
      {"scatter_add",
       "%y = mstep.scatter_add %x, %i, %x {dim = 1 : i64} : tensor<5x4xf32>, tensor<3x4xi64>, "
       "tensor<5x4xf32>",
       "tensor<5x4xf32>", 4, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    const std::string text = index_and_update_step(c.text, c.y_type);
    testing::CudaStepContext step(text.c_str());
    auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    ASSERT_GE(compiled->plan.error_word, 0);
    for (int64_t bad : {int64_t{-1}, int64_t{0}}) {  // -1 at element 6, or none
      std::vector<int64_t> index(12);
      for (size_t k = 0; k < index.size(); ++k) index[k] = static_cast<int64_t>(k % 3);
      if (bad < 0) index[6] = bad;
      std::vector<std::vector<char>> inputs = step_inputs({0, 0, 0, 0});
      inputs[0] = bytes_of(testing::random_floats(20, 8));
      inputs[1] = bytes_of(index);
      std::vector<std::vector<char>> values;
      for (const TensorType& type : compiled->plan.values)
        values.emplace_back(type.bytes(), char{0x7f});
      for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
      ASSERT_NO_FATAL_FAILURE(testing::run_tiled_on_host(step.context(), *compiled, values));
      int64_t word[error_word::kWords];
      std::memcpy(word, values[compiled->plan.error_word].data(), sizeof word);
      auto output = [&](int k) { return values[compiled->plan.outputs[k]]; };
      if (bad == 0) {
        for (int64_t w : word) EXPECT_EQ(w, 0);
        EXPECT_NE(output(1), inputs[2]) << "good indices: the parameter is updated";
        EXPECT_EQ(output(4), bytes_of(std::vector<int64_t>{8}));
        continue;
      }
      EXPECT_EQ(word[error_word::kCodes], error_word::kIndex);
      EXPECT_EQ(word[error_word::kValue], -1);
      EXPECT_EQ(word[error_word::kPosition], 6);
      EXPECT_EQ(word[error_word::kBound], c.bound);
      EXPECT_EQ(word[error_word::kExtra], c.dim);
      EXPECT_EQ(word[error_word::kOp], 0);
      EXPECT_EQ(output(1), inputs[2]);  // w
      EXPECT_EQ(output(2), inputs[4]);  // m
      EXPECT_EQ(output(3), inputs[5]);  // v
      EXPECT_EQ(output(4), inputs[6]);  // the counter
      const absl::Status error = error_word::decode(compiled->plan, word);
      EXPECT_EQ(error.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(error.message()),
                  StartsWith(absl::StrCat("mstep::", c.op, ": index -1 (element 6 of the index) "
                                          "is out of range [0, ", c.bound, ") for dim ", c.dim,
                                          " of the input.")));
      EXPECT_THAT(std::string(error.message()), HasSubstr(absl::StrCat("(mstep.", c.op, " #0)")));
    }
  }
}

TEST(CudaErrorWordPlan, OneWordOutsideTheArenaOnlyWhereAKernelChecks) {
  testing::CudaStepContext step(kLossAndUpdateStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_GE(plan.error_word, static_cast<int>(plan.num_inputs));
  EXPECT_EQ(plan.values[plan.error_word], (TensorType{Shape({8}), DType::i64}));
  EXPECT_EQ(plan.arena_offsets[plan.error_word], -1);
  // Both ops' kernels take it: the nll_loss kernel sets it, the update reads it.
  int takers = 0;
  for (const CudaLaunchStep& launch : plan.launches)
    takers += std::count(launch.args.begin(), launch.args.end(), plan.error_word) > 0;
  EXPECT_GE(takers, 2);
  // It survives the stored form.
  auto back = deserialize_cuda_plan(serialize_cuda_plan(plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->error_word, plan.error_word);
  // A plan with a bad word does not check.
  CudaPlan bad = plan;
  bad.error_word = 0;  // an input
  EXPECT_THAT(std::string(validate_cuda_plan(bad).message()), HasSubstr("the error word"));
  // A step with no checking kernel has none.
  auto chain = testing::plan_of(testing::kChainStep);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->error_word, -1);
}

class CudaErrorWordExecutable : public testing::FakeCudaBackendTest {
protected:
  void SetUp() override {
    FakeCudaBackendTest::SetUp();
    auto compiled = compile_cuda_step(step_.module(), default_cuda_compile_options());
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    plan_ = compiled->plan;
    add_kernels(plan_);
    auto exe = CudaExecutable::create(*backend_, plan_);
    ASSERT_TRUE(exe.ok()) << exe.status();
    exe_ = std::move(*exe);
    ASSERT_NE(exe_->error_word_pointer(), 0u);
    for (size_t i = 0; i < plan_.num_inputs; ++i) inputs_.push_back(input(plan_.values[i]));
    const std::vector<std::vector<char>> bytes = step_inputs({3, 0, 1, 9});
    for (size_t i = 0; i < bytes.size(); ++i)
      ASSERT_TRUE(backend_->copy_in(*inputs_[i], bytes[i].data(), bytes[i].size()).ok());
    for (const CudaKernelInfo& k : plan_.kernels)
      if (absl::StartsWith(k.origin, "mstep.nll_loss")) nll_kernel_ = k.name;
    ASSERT_FALSE(nll_kernel_.empty());
  }
  /// From now on, the nll_loss kernel "finds" target 12 at row 2 (false:
  /// it finds nothing).
  void bad_target(bool on) {
    if (!on) {
      fake_.on_kernel = nullptr;
      return;
    }
    const CUdeviceptr word = exe_->error_word_pointer();
    const std::string kernel = nll_kernel_;
    fake_.on_kernel = [word, kernel](const testing::FakeCall& call) {
      if (call.kernel != kernel) return;
      const int64_t found[error_word::kWords] = {error_word::kNllTarget, 1, 12, 2, 10, -100, 0, 0};
      std::memcpy(reinterpret_cast<void*>(word), found, sizeof found);
    };
  }
  /// The loss through copy_out (the sync point), or its error.
  absl::StatusOr<float> loss(const BufferPtr& buffer) {
    float value = 0;
    MSTEP_RETURN_IF_ERROR(backend_->copy_out(*buffer, &value, sizeof value));
    return value;
  }
  testing::CudaStepContext step_{kLossAndUpdateStep};
  CudaPlan plan_;
  std::unique_ptr<CudaExecutable> exe_;
  std::vector<BufferPtr> inputs_;
  std::string nll_kernel_;
};

TEST_F(CudaErrorWordExecutable, EachRunResetsTheWordFirstAndCopiesItBackLast) {
  const size_t before = fake_.calls.size();
  auto outputs = exe_->run(inputs_, {});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<testing::FakeCall> calls(fake_.calls.begin() + before, fake_.calls.end());
  std::vector<std::string> names;
  for (const testing::FakeCall& c : calls)
    if (c.name == "cuMemcpyHtoDAsync" || c.name == "cuMemcpyDtoHAsync" || c.name == "cuLaunchKernel")
      names.push_back(c.name);  // the stream's work (no allocations, events)
  ASSERT_GE(names.size(), 4u);
  EXPECT_EQ(names.front(), "cuMemcpyHtoDAsync");
  EXPECT_EQ(names.back(), "cuMemcpyDtoHAsync");
  for (const testing::FakeCall& c : calls) {
    if (c.name == "cuMemcpyHtoDAsync") EXPECT_EQ(c.target, exe_->error_word_pointer());
    if (c.name == "cuMemcpyDtoHAsync") EXPECT_EQ(c.source, exe_->error_word_pointer());
    if (c.name == "cuMemcpyHtoDAsync" || c.name == "cuMemcpyDtoHAsync") EXPECT_EQ(c.bytes, 64u);
  }
  EXPECT_TRUE(loss((*outputs)[0]).ok());
}

TEST_F(CudaErrorWordExecutable, TheWaitForTheLossReturnsTheErrorOnceAndTheNextRunIsClean) {
  bad_target(true);
  auto failed = exe_->run(inputs_, {});
  ASSERT_TRUE(failed.ok()) << failed.status();  // queued: the error comes at the sync point
  const absl::StatusOr<float> first = loss((*failed)[0]);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(first.status().message()), StartsWith(kCpuText));
  EXPECT_THAT(std::string(first.status().message()), HasSubstr("wrote the parameters and its state back unchanged"));
  // Reported once: a later sync point has nothing to say.
  EXPECT_TRUE(backend_->synchronize().ok());
  EXPECT_TRUE(backend_->health().ok());
  bad_target(false);
  auto next = exe_->run(inputs_, {});
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(loss((*next)[0]).ok());
}

TEST_F(CudaErrorWordExecutable, InsideACapturedGraphTheResetAndTheCopyAreItsFirstAndLastNodes) {
  std::vector<BufferPtr> offered;
  for (int v : plan_.outputs) offered.push_back(input(plan_.values[v]));
  auto graph = backend_->record_graph([&]() -> absl::Status {
    auto results = exe_->run(inputs_, {.inputs = {}, .outputs = offered});
    return results.status();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_GE(fake_.last_captured.size(), 3u);
  EXPECT_EQ(fake_.last_captured.front().name, "cuMemcpyHtoDAsync");
  EXPECT_EQ(fake_.last_captured.front().target, exe_->error_word_pointer());
  EXPECT_EQ(fake_.last_captured.back().name, "cuMemcpyDtoHAsync");
  EXPECT_EQ(fake_.last_captured.back().source, exe_->error_word_pointer());

  ASSERT_TRUE((*graph)->launch().ok());
  EXPECT_TRUE(loss(offered[0]).ok());
  bad_target(true);
  ASSERT_TRUE((*graph)->launch().ok());
  const absl::StatusOr<float> failed = loss(offered[0]);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(std::string(failed.status().message()), StartsWith(kCpuText));
  // The next replay resets the word: clean again.
  bad_target(false);
  ASSERT_TRUE((*graph)->launch().ok());
  EXPECT_TRUE(loss(offered[0]).ok());
  EXPECT_TRUE(backend_->synchronize().ok());
}

}  // namespace
}  // namespace mstep::cuda
