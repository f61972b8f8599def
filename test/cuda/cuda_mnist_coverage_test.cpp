// mnist_mlp's whole training step (the MLP with dropout and Adadelta:
// forward, backward and update in one graph, after the fused pipeline)
// compiles for cuda here: every op is lowered (fusions, reductions,
// log_softmax, nll_loss, dropout, arange, reshapes, permutes and the
// optimizer update become kernels that ptxas assembles for sm_80 and
// sm_90; matmuls are cuBLASLt steps, counted apart). What each op became
// is printed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

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

TEST(CudaMnistCoverage, TheWholeTrainingStepCompilesEveryKernelAssembledForBothArchs) {
  const TraceGraph graph = mnist_step_graph();
  testing::CudaStepContext step(nullptr);
  auto module = import_trace_graph(graph, step.context());
  ASSERT_TRUE(module.ok()) << module.status();
  mlir::PassManager pm(&step.context());
  passes::build_pipeline(pm, {.fuse = true}, [](mlir::OpPassManager&) {});
  ASSERT_TRUE(mlir::succeeded(pm.run(module->get())));
  auto func = (*module)->lookupSymbol<mlir::func::FuncOp>("step");

  const CudaCompileOptions options = default_cuda_compile_options();
  std::map<std::string, int> lowered, not_lowered;
  std::map<std::string, std::string> why;  // the first error of each op name
  int kernels = 0, index = 0, cublaslt_steps = 0;
  for (mlir::Operation& op : func.getBody().front()) {
    if (mlir::isa<mlir::func::ReturnOp>(op)) continue;
    const std::string name = op.getName().getStringRef().str();
    if (name == "mstep.matmul") {  // a cuBLASLt step, not a kernel (CudaCompiler.cpp)
      ++cublaslt_steps;
      ++index;
      continue;
    }
    auto generated = generate_op_kernels(&op, "op" + std::to_string(index++), options.codegen);
    if (!generated.ok()) {
      EXPECT_THAT(generated.status().message(), HasSubstr("not yet lowered for cuda")) << name;
      if (!not_lowered[name]++) why[name] = std::string(generated.status().message());
      continue;
    }
    ++lowered[name];
    for (const GeneratedLaunch& launch : generated->launches) {
      ++kernels;
      for (const std::string& arch : options.archs) {
        auto assembled = assemble_ptx(launch.ptx, arch, launch.kernel);
        EXPECT_TRUE(assembled.ok()) << name << ": " << assembled.status();
      }
    }
  }
  std::printf("mnist_mlp step on cuda: %d kernels assembled for sm_80 and sm_90, %d cuBLASLt "
              "matmul steps\n",
              kernels, cublaslt_steps);
  for (const auto& [name, n] : lowered) std::printf("  lowered:         %3d x %s\n", n, name.c_str());
  for (const auto& [name, n] : not_lowered)
    std::printf("  not yet lowered: %3d x %s (%s)\n", n, name.c_str(), why[name].c_str());
  // Every op is lowered, and the whole step compiles: each kernel with a
  // cubin for sm_80 and one for sm_90 (and its PTX for newer GPUs).
  EXPECT_TRUE(not_lowered.empty());
  for (const char* name : {"mstep.fusion", "mstep.sum", "mstep.log_softmax", "mstep.nll_loss",
                           "mstep.dropout", "mstep.multi_tensor_update", "mstep.permute",
                           "mstep.reshape", "mstep.arange"})
    EXPECT_GT(lowered[name], 0) << name;
  EXPECT_EQ(cublaslt_steps, 5);
  auto compiled = compile_cuda_step(module->get(), options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(static_cast<int>(compiled->plan.kernels.size()), kernels);
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

}  // namespace
}  // namespace mstep::cuda
