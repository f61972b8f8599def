// The training steps of the two examples on cuda. mnist_mlp's whole step
// (the MLP with dropout and Adadelta: forward, backward and update in one
// graph, after the fused pipeline) compiles here: every op is lowered
// (fusions, reductions, log_softmax, nll_loss, dropout, arange, reshapes,
// permutes and the optimizer update become kernels that ptxas assembles
// for sm_80 and sm_90; matmuls are cuBLASLt steps, counted apart).
// GPT-mini's f32 step (embedding, layer norms, attention, clipped AdamW)
// compiles whole too: its attention (causal, valid_seq_len) is composed of
// cuBLASLt steps and kernels of our own, f32 being beyond cuDNN. What each
// op became is printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "lib/backends/cuda/CudaAttentionLowering.h"
#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPtxas.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/mstep.h"
#include "mstep/passes/Pipeline.h"
#include "test/cuda/CudaStepText.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

/// What the cuda codegen makes of each op of a training step.
struct Coverage {
  std::map<std::string, int> lowered, not_lowered;
  std::map<std::string, std::string> why;  // the first error of each op name
  int kernels = 0, cublaslt_steps = 0;
  int attention = 0; // mstep.sdpa / sdpa_backward, lowered by compile_cuda_step
};

/// Generates every op's kernels (ptxas assembling each for every arch of
/// `options`) and prints what each op became.
/// The kernel launches of the plan's epilogue fallbacks (one kernel each).
int fallback_launches(const CudaPlan& plan) {
  int n = 0;
  for (const CudaMatmulInfo& m : plan.matmuls) n += static_cast<int>(m.fallback.size());
  return n;
}

/// Per kernel of the plan: whether an epilogue fallback launches it.
std::vector<bool> fallback_kernels_of(const CudaPlan& plan) {
  std::vector<bool> fallback(plan.kernels.size(), false);
  for (const CudaMatmulInfo& m : plan.matmuls)
    for (const CudaLaunchStep& launch : m.fallback) fallback[launch.kernel] = true;
  return fallback;
}

/// The bias gradients' column-sum kernels among the epilogue fallbacks:
/// one or two per sum, as its rows make one chunk or more (CudaColumnSums.h).
int fallback_sum_kernels(const CudaPlan& plan) {
  int n = 0;
  for (const CudaMatmulInfo& m : plan.matmuls) {
    if (m.shape.bias_grad == MatmulBiasGrad::none) continue;
    EXPECT_GE(m.fallback.size(), 1u);
    EXPECT_LE(m.fallback.size(), 2u);
    n += static_cast<int>(m.fallback.size());
  }
  return n;
}

Coverage coverage_of(mlir::func::FuncOp func, const CudaCompileOptions& options,
                     const char* label) {
  Coverage c;
  int index = 0;
  for (mlir::Operation& op : func.getBody().front()) {
    if (mlir::isa<mlir::func::ReturnOp>(op)) continue;
    const std::string name = op.getName().getStringRef().str();
    if (name == "mstep.matmul") {  // a cuBLASLt step, not a kernel (CudaCompiler.cpp)
      ++c.cublaslt_steps;
      ++index;
      continue;
    }
    if (CudaAttentionLowering::is_attention(&op)) { // cuDNN or composed: compile_cuda_step's
      ++c.attention;
      ++index;
      continue;
    }
    auto generated = generate_op_kernels(&op, "op" + std::to_string(index++), options.codegen);
    if (!generated.ok()) {
      EXPECT_THAT(generated.status().message(), HasSubstr("not yet lowered for cuda")) << name;
      if (!c.not_lowered[name]++) c.why[name] = std::string(generated.status().message());
      continue;
    }
    ++c.lowered[name];
    for (const GeneratedLaunch& launch : generated->launches) {
      ++c.kernels;
      for (const std::string& arch : options.archs) {
        auto assembled = assemble_ptx(launch.ptx, arch, launch.kernel);
        EXPECT_TRUE(assembled.ok()) << name << ": " << assembled.status();
      }
    }
  }
  std::printf("%s step on cuda: %d kernels assembled for sm_80 and sm_90, %d cuBLASLt matmul "
              "steps\n",
              label, c.kernels, c.cublaslt_steps);
  for (const auto& [name, n] : c.lowered) std::printf("  lowered:         %3d x %s\n", n, name.c_str());
  for (const auto& [name, n] : c.not_lowered)
    std::printf("  not yet lowered: %3d x %s (%s)\n", n, name.c_str(), c.why[name].c_str());
  return c;
}

TEST(CudaMnistCoverage, TheWholeTrainingStepCompilesEveryKernelAssembledForBothArchs) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(testing::mnist_step_graph(), step);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<mlir::func::FuncOp>("step");
  const CudaCompileOptions options = default_cuda_compile_options();
  Coverage c = coverage_of(func, options, "mnist_mlp");
  // Every op is lowered, and the whole step compiles: each kernel with a
  // cubin for sm_80 and one for sm_90 (and its PTX for newer GPUs).
  EXPECT_TRUE(c.not_lowered.empty());
  for (const char* name : {"mstep.fusion", "mstep.sum", "mstep.log_softmax", "mstep.nll_loss",
                           "mstep.dropout", "mstep.multi_tensor_update", "mstep.permute",
                           "mstep.reshape", "mstep.arange"})
    EXPECT_GT(c.lowered[name], 0) << name;
  EXPECT_EQ(c.cublaslt_steps, 5);
  auto compiled = compile_cuda_step(*module, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // Every reshape and permute launches nothing: the reshapes are aliases
  // (or written straight into the output they return), the permutes are
  // the matmuls' transpose flags.
  // The output layer's bias add (a fusion of its own) is the cuBLASLt
  // call's epilogue; the hidden layer's fusion also makes relu's mask, so
  // it stays a kernel.
  // Both layers' bias gradients (dz summed over the batch) are written by
  // their weight gradients' calls instead of a column sum's kernels.
  int epilogues = 0, bias_grads = 0;
  for (const CudaMatmulInfo& m : compiled->plan.matmuls) {
    epilogues += m.shape.bias;
    bias_grads += m.shape.bias_grad != MatmulBiasGrad::none;
  }
  EXPECT_EQ(epilogues, 1);
  EXPECT_EQ(bias_grads, 2);
  // Each epilogue's fallback has the kernels it saves (the fusion's; the
  // sum's: one or two, as its rows make one chunk or more,
  // CudaColumnSums.h), launched only where cuBLASLt has no algorithm for it.
  const int fallback_kernels = fallback_launches(compiled->plan);
  const int sum_kernels = fallback_sum_kernels(compiled->plan);
  EXPECT_GE(sum_kernels, bias_grads);
  EXPECT_LE(sum_kernels, 2 * bias_grads);
  EXPECT_EQ(fallback_kernels, epilogues + sum_kernels);
  EXPECT_EQ(static_cast<int>(compiled->plan.kernels.size()) - fallback_kernels,
            c.kernels - c.lowered["mstep.reshape"] - c.lowered["mstep.permute"] - epilogues -
                sum_kernels);
  const std::vector<bool> fallback = fallback_kernels_of(compiled->plan);
  for (size_t k = 0; k < compiled->plan.kernels.size(); ++k) {
    const CudaKernelInfo& kernel = compiled->plan.kernels[k];
    std::vector<std::string> archs;
    for (const CudaCubin& cubin : kernel.cubins) archs.push_back(cubin.arch);
    if (fallback[k])
      EXPECT_TRUE(archs.empty()) << kernel.name << ": a fallback's kernels are PTX only";
    else
      EXPECT_THAT(archs, ::testing::ElementsAre("sm_80", "sm_90")) << kernel.name;
    EXPECT_THAT(kernel.ptx, HasSubstr(".entry " + kernel.name)) << kernel.origin;
  }
  // Its outputs are the step's: loss, gradients, the updated parameters,
  // states and counters.
  EXPECT_EQ(compiled->plan.outputs.size(), func.getNumResults());
}

TEST(CudaGptCoverage, TheWholeF32StepCompilesAttentionComposedOfCublasLtAndKernels) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(testing::gpt_step_graph(), step);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<mlir::func::FuncOp>("step");
  // A kernel per op, which the counts below add up (row groups: their own
  // test, cuda_row_groups_test.cpp).
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = CudaRowReduction::block;
  Coverage c = coverage_of(func, options, "gpt_train (GPT-mini)");
  for (const char* name : {"mstep.index_select", "mstep.index_add", "mstep.layer_norm",
                           "mstep.log_softmax", "mstep.slice", "mstep.slice_scatter",
                           "mstep.multi_tensor_update", "mstep.mean"})
    EXPECT_GT(c.lowered[name], 0) << name;
  EXPECT_TRUE(c.not_lowered.empty());
  // Two layers: a forward and a backward each.
  EXPECT_EQ(c.attention, 4);
  auto compiled = compile_cuda_step(*module, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // f32 attention is not cuDNN's: each forward is 2 cuBLASLt steps and a
  // kernel, each backward 5 and 2 kernels.
  const CudaPlan& plan = compiled->plan;
  EXPECT_TRUE(plan.attentions.empty());
  EXPECT_EQ(static_cast<int>(plan.matmuls.size()), c.cublaslt_steps + 2 * (2 + 5));
  // Reshapes are aliases and 2-D transposes the matmuls' flags; only the
  // heads' 4-D permutes stay copy kernels.
  int head_permutes = 0;
  func.walk([&](dialect::PermuteOp permute) { head_permutes += permute.getPerm().size() == 4; });
  EXPECT_EQ(head_permutes, 16);
  // The two layers' qkv projections add their bias alone (an epilogue);
  // the other linears' fusions do more (a residual add, GELU's erf form).
  // Every linear's bias gradient (qkv, the projection, both MLP layers;
  // two layers) is its weight gradient's call's, each sum one or two
  // kernels less.
  int epilogues = 0, bias_grads = 0;
  for (const CudaMatmulInfo& m : plan.matmuls) {
    epilogues += m.shape.bias;
    bias_grads += m.shape.bias_grad != MatmulBiasGrad::none;
  }
  EXPECT_EQ(epilogues, 2);
  EXPECT_EQ(bias_grads, 8);
  const int fallback_kernels = fallback_launches(plan);
  const int sum_kernels = fallback_sum_kernels(plan);
  EXPECT_GE(sum_kernels, bias_grads);
  EXPECT_LE(sum_kernels, 2 * bias_grads);
  EXPECT_EQ(fallback_kernels, epilogues + sum_kernels);
  EXPECT_EQ(static_cast<int>(plan.kernels.size()) - fallback_kernels,
            c.kernels + 2 * (1 + 2) - c.lowered["mstep.reshape"] -
                (c.lowered["mstep.permute"] - head_permutes) - epilogues - sum_kernels);
  const std::vector<bool> fallback = fallback_kernels_of(plan);
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    std::vector<std::string> archs;
    for (const CudaCubin& cubin : plan.kernels[k].cubins) archs.push_back(cubin.arch);
    if (fallback[k])
      EXPECT_TRUE(archs.empty()) << plan.kernels[k].name;
    else
      EXPECT_THAT(archs, ::testing::ElementsAre("sm_80", "sm_90")) << plan.kernels[k].name;
  }
  EXPECT_EQ(plan.outputs.size(), func.getNumResults());
  EXPECT_TRUE(validate_cuda_plan(plan).ok()) << validate_cuda_plan(plan);
}

}  // namespace
}  // namespace mstep::cuda
