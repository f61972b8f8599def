// The training steps of the two examples on cuda. mnist_mlp's whole step
// (the MLP with dropout and Adadelta: forward, backward and update in one
// graph, after the fused pipeline) compiles here: every op is lowered
// (fusions, reductions, log_softmax, nll_loss, dropout, arange, reshapes,
// permutes and the optimizer update become kernels that ptxas assembles
// for sm_80 and sm_90; matmuls are cuBLASLt steps, counted apart).
// GPT-mini's step (embedding, layer norms, attention, clipped AdamW)
// lowers all but its attention (sdpa, sdpa_backward: not part of this
// codegen). What each op became is printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "examples/models/GptMini.h"
#include "examples/models/Mlp.h"
#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaPtxas.h"
#include "mlir/Pass/PassManager.h"
#include "mstep/ir/dialect/MstepDialect.h"
#include "mstep/mstep.h"
#include "mstep/passes/Pipeline.h"
#include "test/cuda/CudaStepText.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

/// The graph of mnist_mlp's second training step (Adadelta state exists).
TraceGraph mnist_step_graph() {
  manual_seed(7);
  examples::Mlp model;
  optim::Adadelta opt(model.parameters(), {.lr = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    opt.zero_grad();
    std::vector<float> x(32 * 784);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(((i * 31 + k * 7) % 97) / 97.0 - 0.5);
    std::vector<int64_t> y(32);
    for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>((i * 3 + k) % 10);
    Tensor loss = nll_loss(model.forward(from_vector(x, {32, 784})), from_vector(y, {32}));
    loss.backward();
    opt.step();
    if (k == 1) graph = pending_graph();
    mark_step();
  }
  return graph;
}

/// What the cuda codegen makes of each op of a training step.
struct Coverage {
  std::map<std::string, int> lowered, not_lowered;
  std::map<std::string, std::string> why;  // the first error of each op name
  int kernels = 0, cublaslt_steps = 0;
};

/// The step of `graph` after the fused pipeline, in `step`'s context.
mlir::OwningOpRef<mlir::ModuleOp> pipelined(const TraceGraph& graph,
                                            testing::CudaStepContext& step) {
  auto module = import_trace_graph(graph, step.context());
  EXPECT_TRUE(module.ok()) << module.status();
  if (!module.ok()) return {};
  mlir::PassManager pm(&step.context());
  passes::build_pipeline(pm, {.fuse = true}, [](mlir::OpPassManager&) {});
  EXPECT_TRUE(mlir::succeeded(pm.run(module->get())));
  return std::move(*module);
}

/// Generates every op's kernels (ptxas assembling each for every arch of
/// `options`) and prints what each op became.
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
  mlir::OwningOpRef<mlir::ModuleOp> module = pipelined(mnist_step_graph(), step);
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
  EXPECT_EQ(static_cast<int>(compiled->plan.kernels.size()), c.kernels);
  for (const CudaKernelInfo& kernel : compiled->plan.kernels) {
    std::vector<std::string> archs;
    for (const CudaCubin& cubin : kernel.cubins) archs.push_back(cubin.arch);
    EXPECT_THAT(archs, ::testing::ElementsAre("sm_80", "sm_90")) << kernel.name;
    EXPECT_THAT(kernel.ptx, HasSubstr(".entry " + kernel.name)) << kernel.origin;
  }
  // Its outputs are the step's: loss, gradients, the updated parameters,
  // states and counters.
  EXPECT_EQ(compiled->plan.outputs.size(), func.getNumResults());
}

/// GPT-mini's second training step as gpt_train runs it: cross-entropy,
/// clip_grad_norm_(1.0), AdamW with weight decay.
TraceGraph gpt_step_graph() {
  manual_seed(3);
  examples::GptMini model(
      examples::GptConfig{.vocab = 96, .dim = 32, .heads = 4, .layers = 2, .max_seq = 16});
  model.train();
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.1});
  TraceGraph graph;
  for (int k = 0; k < 2; ++k) {
    std::vector<int64_t> tokens(4 * 16), lengths = {16, 12, 9, 16};
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + k) % 96);
    Tensor x = from_vector(tokens, {4, 16});
    opt.zero_grad();
    Tensor logits = model.forward(x, from_vector(lengths, {4}));
    cross_entropy(logits.reshape({-1, 96}), x.reshape({-1})).backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    graph = pending_graph();
    mark_step();
  }
  return graph;
}
TEST(CudaGptCoverage, AllButAttentionLowersTheStepFailsNamingSdpa) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = pipelined(gpt_step_graph(), step);
  ASSERT_TRUE(module);
  auto func = module->lookupSymbol<mlir::func::FuncOp>("step");
  const CudaCompileOptions options = default_cuda_compile_options();
  Coverage c = coverage_of(func, options, "gpt_train (GPT-mini)");
  for (const char* name : {"mstep.index_select", "mstep.index_add", "mstep.layer_norm",
                           "mstep.log_softmax", "mstep.slice", "mstep.slice_scatter",
                           "mstep.multi_tensor_update", "mstep.mean"})
    EXPECT_GT(c.lowered[name], 0) << name;
  std::vector<std::string> missing;
  for (const auto& [name, n] : c.not_lowered) missing.push_back(name);
  EXPECT_THAT(missing, ::testing::ElementsAre("mstep.sdpa", "mstep.sdpa_backward"));
  auto compiled = compile_cuda_step(*module, options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_THAT(compiled.status().message(), HasSubstr("'mstep.sdpa'"));
}

}  // namespace
}  // namespace mstep::cuda
