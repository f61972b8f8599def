// A cuBLASLt epilogue the device's cuBLASLt has no algorithm for (issue 21:
// whether cuBLASLt has f32 BGRADB algorithms on Hopper is not known): the
// plan carries each epilogue's fallback (the absorbed bias add and
// activation's kernels, over C in place; the bias gradient's column sum
// over the summed operand), and the executable, asking the heuristic for
// every call when it loads the plan, runs such a call without its epilogue
// and then those kernels, counted in metrics().epilogue_fallbacks. Checked
// against a fake cuBLASLt that finds no algorithm for chosen epilogues:
// the plan the executable loads, run on the host, equals ref.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "mstep/runtime/Metrics.h"
#include "test/cuda/AutocastBiasSteps.h"
#include "test/cuda/BiasGradSteps.h"
#include "test/cuda/FakeCublasLt.h"
#include "test/cuda/FakeCudaBackendTest.h"
#include "test/cuda/HostStepCheck.h"
#include "test/cuda/LinearReluStep.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::fake_cublaslt;
using testing::fake_cublaslt_state;
using testing::plan_of;

/// Every matmul of `plan` with a fallback.
std::vector<int> with_fallbacks(const CudaPlan& plan) {
  std::vector<int> matmuls;
  for (size_t m = 0; m < plan.matmuls.size(); ++m)
    if (!plan.matmuls[m].fallback.empty()) matmuls.push_back(static_cast<int>(m));
  return matmuls;
}

/// linear(x, w) + b, then `activation` (empty: none), a step output.
std::string linear_then(const std::string& activation) {
  std::string text = R"(
func.func @step(%x: tensor<64x96xf32>, %w: tensor<96x80xf32>, %b: tensor<80xf32>)
    -> tensor<64x80xf32> {
  %0 = mstep.matmul %x, %w : tensor<64x96xf32>, tensor<96x80xf32> -> tensor<64x80xf32>
  %1 = mstep.add %0, %b : tensor<64x80xf32>, tensor<80xf32> -> tensor<64x80xf32>
)";
  if (activation.empty()) return text + "  return %1 : tensor<64x80xf32>\n}\n";
  return text + "  %2 = " + activation + " : tensor<64x80xf32>\n  return %2 : tensor<64x80xf32>\n}\n";
}

TEST(CudaEpilogueFallbackPlan, ABiasGradientsFallbackIsTheColumnSumOverTheSummedMatrix) {
  for (const char* text : {testing::kWeightAndBiasGrad, testing::kMnistForm, testing::kGptForm}) {
    SCOPED_TRACE(text);
    auto plan = plan_of(text);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const CudaMatmulInfo& m = plan->matmuls[0];
    ASSERT_FALSE(m.fallback.empty());
    const CudaLaunchStep& call = plan->launches[0];
    const int grad = call.writes[1];
    // The sum's kernels read dz's bytes (%1, the step input, or an alias
    // of it) and write the gradient the call would have written.
    bool reads_dz = false;
    for (const CudaLaunchStep& launch : m.fallback) {
      EXPECT_EQ(launch.matmul, -1);
      for (int arg : launch.args) {
        const CudaAlias* alias = plan->alias_of(arg);
        reads_dz |= (alias != nullptr ? alias->root : arg) == 1;
      }
    }
    EXPECT_TRUE(reads_dz) << describe_cuda_plan(*plan);
    EXPECT_EQ(m.fallback.back().writes.back(), grad) << describe_cuda_plan(*plan);
    EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << validate_cuda_plan(*plan);
  }
}

TEST(CudaEpilogueFallbackPlan, TakenTheCallLosesItsEpilogueAndTheKernelsFollowIt) {
  auto plan = plan_of(testing::kGptForm);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const CudaPlan compiled = *plan;
  apply_epilogue_fallbacks(*plan, {0});
  const CudaMatmulInfo& m = plan->matmuls[0];
  EXPECT_EQ(m.shape, compiled.matmuls[0].without_epilogue());
  EXPECT_EQ(cublaslt_epilogue(m.shape), CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_TRUE(m.fallback.empty());
  // The call (A, B -> C), the sum's kernels, then the add's kernel.
  ASSERT_EQ(plan->launches.size(), compiled.launches.size() + compiled.matmuls[0].fallback.size());
  EXPECT_EQ(plan->launches[0].args, std::vector<int>(compiled.launches[0].args));
  EXPECT_THAT(plan->launches[0].writes, ElementsAre(compiled.launches[0].writes[0]));
  for (size_t i = 0; i < compiled.matmuls[0].fallback.size(); ++i)
    EXPECT_EQ(plan->launches[1 + i], compiled.matmuls[0].fallback[i]);
  EXPECT_EQ(plan->launches.back(), compiled.launches.back());
  EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << validate_cuda_plan(*plan);
}

TEST(CudaEpilogueFallbackPlan, EachBiasGradientFormTakenOnTheHostMatchesRef) {
  for (const char* text : {testing::kWeightAndBiasGrad, testing::kMnistForm, testing::kGptForm}) {
    SCOPED_TRACE(text);
    testing::expect_host_matches_ref(
        text, [](CudaPlan& plan) { apply_epilogue_fallbacks(plan, with_fallbacks(plan)); });
  }
}

TEST(CudaEpilogueFallbackPlan, EachBiasAndActivationEpilogueTakenOnTheHostMatchesRef) {
  // BIAS, RELU_BIAS and GELU_BIAS (tanh form): the add (and activation)
  // kernels over the call's C in place.
  for (const std::string& text :
       {linear_then(""), linear_then("mstep.relu %1"),
        linear_then("mstep.gelu %1 {approximate = #mstep.gelu_approximation<tanh>}")}) {
    SCOPED_TRACE(text);
    auto plan = plan_of(text.c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_TRUE(plan->matmuls[0].shape.bias);
    ASSERT_FALSE(plan->matmuls[0].fallback.empty());
    testing::expect_host_matches_ref(text.c_str(), [](CudaPlan& plan) {
      apply_epilogue_fallbacks(plan, with_fallbacks(plan));
      ASSERT_FALSE(plan.matmuls[0].shape.bias);
    });
  }
}

TEST(CudaEpilogueFallbackPlan, TheStoredFormKeepsTheFallbacks) {
  auto plan = plan_of(testing::kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->matmuls[0].fallback.size(), 2u);
  auto back = deserialize_cuda_plan(serialize_cuda_plan(*plan));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *plan);
}

TEST(CudaEpilogueFallbackPlan, AFallbackThatIsNoKernelLaunchOrHasNoEpilogueIsRefused) {
  auto plan = plan_of(testing::kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  CudaPlan bad = *plan;
  bad.matmuls[0].fallback[0].kernel = 7;
  EXPECT_THAT(validate_cuda_plan(bad).message(),
              HasSubstr("launch 0's fallback names kernel 7 of 2"));
  bad = *plan;
  bad.matmuls[0].fallback[1].args[0] = 99;
  EXPECT_THAT(validate_cuda_plan(bad).message(), HasSubstr("launch 0's fallback uses value 99"));
  bad = *plan;
  bad.matmuls[0].fallback[0].matmul = 0;
  EXPECT_THAT(validate_cuda_plan(bad).message(), HasSubstr("a fallback step that is no kernel"));
  bad = *plan;
  bad.matmuls[0].shape = bad.matmuls[0].without_epilogue();
  bad.launches[0].args.pop_back();
  EXPECT_THAT(validate_cuda_plan(bad).message(),
              HasSubstr("has an epilogue fallback but no epilogue"));
}

// ---- the executable: the heuristic asked at load ----------------------------

class CudaEpilogueFallbackExecutable : public testing::FakeCudaBackendTest {
 protected:
  void SetUp() override {
    FakeCudaBackendTest::SetUp();
    fake_cublaslt_state() = {};
    fake_cublaslt_state().recorder = &fake_;
  }
  void TearDown() override { fake_cublaslt_state() = {}; }
  /// `graph`'s step loaded by an executable over the fake cuBLASLt, which
  /// has no algorithm for `refused`, expecting `fallbacks` of its calls to
  /// fall back; then its plan as loaded run on the host against ref.
  void expect_loaded_step_matches_ref(const TraceGraph& graph, int64_t max_integer,
                                      float tolerance, std::set<cublasLtEpilogue_t> refused,
                                      size_t fallbacks) {
    fake_cublaslt_state().no_algorithm = std::move(refused);
    testing::expect_step_on_host_matches_ref(
        graph, max_integer, tolerance, nullptr, [&](CompiledCudaStep& compiled) {
          add_kernels(compiled.plan);
          const int64_t before = metrics().epilogue_fallbacks;
          auto exe = CudaExecutable::create(*backend_, compiled.plan, fake_cublaslt());
          ASSERT_TRUE(exe.ok()) << exe.status();
          EXPECT_EQ((*exe)->epilogue_fallbacks().size(), fallbacks);
          EXPECT_EQ(metrics().epilogue_fallbacks - before, static_cast<int64_t>(fallbacks));
          compiled.plan = (*exe)->plan();
        });
  }
  /// The launches and cuBLASLt calls since `before`, by name.
  std::vector<std::string> work_since(size_t before) const {
    std::vector<std::string> work;
    for (size_t i = before; i < fake_.calls.size(); ++i)
      if (fake_.calls[i].name == "cuLaunchKernel" || fake_.calls[i].name == "cublasLtMatmul")
        work.push_back(fake_.calls[i].name);
    return work;
  }
};

TEST_F(CudaEpilogueFallbackExecutable, WithoutABgradAlgorithmTheCallRunsPlainAndTheSumAfterIt) {
  auto plan = plan_of(testing::kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  fake_cublaslt_state().no_algorithm = {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB};
  const int64_t before_load = metrics().epilogue_fallbacks;
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(metrics().epilogue_fallbacks - before_load, 1);
  EXPECT_THAT((*exe)->epilogue_fallbacks(), ElementsAre(0));
  // Asked at load: the BGRADA call (none found), then the plain one.
  EXPECT_EQ(fake_cublaslt_state().heuristic_queries, 2);
  EXPECT_EQ(fake_cublaslt_state().heuristic_misses, 1);
  CudaPlan expected = *plan;
  apply_epilogue_fallbacks(expected, {0});
  EXPECT_EQ((*exe)->plan(), expected);
  const size_t before = fake_.calls.size();
  auto outputs = (*exe)->run({input({Shape({64, 96}), DType::f32}),
                              input({Shape({64, 80}), DType::f32})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<std::string> work = work_since(before);
  ASSERT_EQ(work.size(), 1 + plan->matmuls[0].fallback.size());
  EXPECT_EQ(work[0], "cublasLtMatmul");
  for (size_t i = 1; i < work.size(); ++i) EXPECT_EQ(work[i], "cuLaunchKernel");
  EXPECT_THAT(fake_cublaslt_state().matmul_epilogues, ElementsAre(CUBLASLT_EPILOGUE_DEFAULT));
  // No heuristic at the run: the load asked it.
  EXPECT_EQ(fake_cublaslt_state().heuristic_queries, 2);
  // The stored form is the plan as compiled: another device may have the
  // algorithm.
  auto stored = (*exe)->serialize("");
  ASSERT_TRUE(stored.ok()) << stored.status();
  auto back = deserialize_cuda_plan(*stored);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *plan);
}

TEST_F(CudaEpilogueFallbackExecutable, WithTheAlgorithmNothingFallsBackAndNoFallbackKernelLoads) {
  auto plan = plan_of(testing::kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // The fake knows no kernel: loading one would fail.
  const int64_t before_load = metrics().epilogue_fallbacks;
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(metrics().epilogue_fallbacks, before_load);
  EXPECT_TRUE((*exe)->epilogue_fallbacks().empty());
  EXPECT_EQ((*exe)->plan(), *plan);
  auto outputs = (*exe)->run({input({Shape({64, 96}), DType::f32}),
                              input({Shape({64, 80}), DType::f32})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(fake_cublaslt_state().matmul_epilogues, ElementsAre(CUBLASLT_EPILOGUE_BGRADA));
}

TEST_F(CudaEpilogueFallbackExecutable, WithoutAReluBiasAlgorithmTheAddAndReluKernelsFollow) {
  auto plan = plan_of(testing::kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  fake_cublaslt_state().no_algorithm = {CUBLASLT_EPILOGUE_RELU_BIAS};
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_THAT((*exe)->epilogue_fallbacks(), ElementsAre(0));
  const size_t before = fake_.calls.size();
  BufferPtr x = input({Shape({64, 96}), DType::f32});
  BufferPtr w = input({Shape({96, 80}), DType::f32});
  BufferPtr b = input({Shape({80}), DType::f32});
  auto outputs = (*exe)->run({x, w, b});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_THAT(work_since(before), ElementsAre("cublasLtMatmul", "cuLaunchKernel", "cuLaunchKernel"));
  EXPECT_THAT(fake_cublaslt_state().matmul_epilogues, ElementsAre(CUBLASLT_EPILOGUE_DEFAULT));
  // The call writes the output; the add reads it and the bias.
  const CUdeviceptr out = CudaBackend::device_pointer(*(*outputs)[0]);
  const std::vector<testing::FakeCall> launches = fake_.calls_named("cuLaunchKernel");
  ASSERT_GE(launches.size(), 2u);
  const testing::FakeCall& add = launches[launches.size() - 2];
  auto bytes = [](CUdeviceptr p) { return std::string(reinterpret_cast<const char*>(&p), sizeof p); };
  EXPECT_THAT(add.args, ElementsAre(bytes(out), bytes(CudaBackend::device_pointer(*b)), bytes(out)));
}

TEST_F(CudaEpilogueFallbackExecutable, NoEpiloguesOptionTakesEveryFallbackWithoutAsking) {
  CudaBackendOptions options;
  options.no_epilogues = true;
  auto backend = CudaBackend::create(fake_.driver(), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto plan = plan_of(testing::kLinearReluStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  auto exe = CudaExecutable::create(**backend, *plan, fake_cublaslt());
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_THAT((*exe)->epilogue_fallbacks(), ElementsAre(0));
  // Only the plain call was asked for.
  EXPECT_EQ(fake_cublaslt_state().heuristic_queries, 1);
  EXPECT_EQ(fake_cublaslt_state().heuristic_misses, 0);
}

TEST_F(CudaEpilogueFallbackExecutable, APlanWithoutTheFallbackFailsItsLoadNamingTheCall) {
  auto plan = plan_of(testing::kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  plan->matmuls[0].fallback.clear();  // as a plan of format 7 reads
  fake_cublaslt_state().no_algorithm = {CUBLASLT_EPILOGUE_BGRADA};
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(exe.status().message(),
              HasSubstr("cuda: loading the cublasLt step (mstep.matmul #1): cublasLt matmul "
                        "[64, 96] x [64, 80] f32, A transposed, bias grad of B: the heuristic "
                        "found no algorithm on"));
  EXPECT_THAT(exe.status().message(), HasSubstr("compile the step again"));
}

TEST_F(CudaEpilogueFallbackExecutable, ACallWithoutAnyAlgorithmFailsItsLoadNamingTheCall) {
  auto plan = plan_of(testing::kWeightAndBiasGrad);
  ASSERT_TRUE(plan.ok()) << plan.status();
  add_kernels(*plan);
  fake_cublaslt_state().no_algorithm = {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_DEFAULT};
  auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
  ASSERT_FALSE(exe.ok());
  EXPECT_THAT(exe.status().message(), HasSubstr("with or without its epilogue"));
}

// An autocast linear (CudaAutocastBias.h): the GELU_BIAS call with its bf16
// bias, and the bf16 bias gradient's BGRADB.
TEST_F(CudaEpilogueFallbackExecutable, AutocastBiasAndItsGradientLoadTheirFallbacks) {
  for (const std::string& text : {testing::autocast_linear(testing::kGeluTanh),
                                  std::string(testing::kAutocastBiasGrad)}) {
    SCOPED_TRACE(text);
    fake_cublaslt_state() = {};
    fake_cublaslt_state().recorder = &fake_;
    auto plan = plan_of(text.c_str());
    ASSERT_TRUE(plan.ok()) << plan.status();
    add_kernels(*plan);
    fake_cublaslt_state().no_algorithm = {CUBLASLT_EPILOGUE_GELU_BIAS, CUBLASLT_EPILOGUE_BGRADA,
                                          CUBLASLT_EPILOGUE_BGRADB};
    const int64_t before = metrics().epilogue_fallbacks;
    auto exe = CudaExecutable::create(*backend_, *plan, fake_cublaslt());
    ASSERT_TRUE(exe.ok()) << exe.status();
    EXPECT_THAT((*exe)->epilogue_fallbacks(), ElementsAre(0));
    EXPECT_EQ(metrics().epilogue_fallbacks - before, 1);
    CudaPlan expected = *plan;
    apply_epilogue_fallbacks(expected, {0});
    EXPECT_EQ((*exe)->plan(), expected);
    std::vector<BufferPtr> inputs;
    for (size_t i = 0; i < plan->num_inputs; ++i) inputs.push_back(input(plan->values[i]));
    auto outputs = (*exe)->run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    EXPECT_THAT(fake_cublaslt_state().matmul_epilogues, ElementsAre(CUBLASLT_EPILOGUE_DEFAULT));
  }
}

TEST_F(CudaEpilogueFallbackExecutable, MnistWithoutBgradAlgorithmsLoadsAPlanThatMatchesRef) {
  // Both layers' bias gradients (BGRADB: dz is the transposed lhs) become
  // column sums; the output layer's bias epilogue stays.
  ASSERT_NO_FATAL_FAILURE(expect_loaded_step_matches_ref(
      testing::mnist_step_graph(), 1, 1e-5f,
      {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB}, 2));
}

TEST_F(CudaEpilogueFallbackExecutable, MnistWithoutAnyEpilogueLoadsAPlanThatMatchesRef) {
  ASSERT_NO_FATAL_FAILURE(expect_loaded_step_matches_ref(
      testing::mnist_step_graph(), 1, 1e-5f,
      {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB, CUBLASLT_EPILOGUE_BIAS,
       CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS},
      3));
}

TEST_F(CudaEpilogueFallbackExecutable, GptWithoutAnyEpilogueLoadsAPlanThatMatchesRef) {
  // GPT-mini's f32 step: both qkv projections' bias epilogues and the
  // eight bias gradients (dz [B, S, n] summed over two dims) as kernels;
  // the tolerance of its host test (CudaGptHost).
  ASSERT_NO_FATAL_FAILURE(expect_loaded_step_matches_ref(
      testing::gpt_step_graph(), 16, 5e-5f,
      {CUBLASLT_EPILOGUE_BGRADA, CUBLASLT_EPILOGUE_BGRADB, CUBLASLT_EPILOGUE_BIAS,
       CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU_BIAS},
      10));
}

}  // namespace
}  // namespace mstep::cuda
