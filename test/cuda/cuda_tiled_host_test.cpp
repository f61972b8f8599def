// Host numerics of the cuda kernels without a GPU (issue 21 §3): each op's
// tiled loop nest, taken right before the GPU mapping (the one-dimension
// collapse of its loops, tiles of 256 lanes, the guard of the last partial
// tile, the broadcast index arithmetic), is lowered for this CPU, JIT-run
// on random inputs and compared with the same chain computed directly in
// C++ here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lib/backends/cuda/CudaCompiler.h"
#include "llvm/Support/TargetSelect.h"
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "test/cuda/CudaStepText.h"

namespace mstep::cuda {
namespace {

/// Runs every tiled op of `compiled` in program order on host buffers
/// (one std::vector<char> per plan value; the inputs filled by the caller).
void run_tiled_on_host(mlir::MLIRContext& context, const CompiledCudaStep& compiled,
                       std::vector<std::vector<char>>& values) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  for (const TiledOp& op : compiled.tiled) {
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(op.module, &context);
    ASSERT_TRUE(module) << op.module;
    mlir::PassManager pm(&context);
    pm.addPass(mlir::createConvertSCFToCFPass());
    pm.addPass(mlir::createConvertMathToLibmPass());
    pm.addPass(mlir::createConvertMathToLLVMPass());
    pm.addPass(mlir::createArithToLLVMConversionPass());
    // Reshapes of the outputs (a keepdim) become pointer arithmetic.
    pm.addPass(mlir::memref::createExpandStridedMetadataPass());
    pm.addPass(mlir::createLowerAffinePass());
    pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass());
    mlir::ConvertFuncToLLVMPassOptions func;
    func.useBarePtrCallConv = true;  // one pointer per buffer, as the kernels take them
    pm.addPass(mlir::createConvertFuncToLLVMPass(func));
    pm.addPass(mlir::createConvertControlFlowToLLVMPass());
    pm.addPass(mlir::createReconcileUnrealizedCastsPass());
    ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << op.module;
    auto engine = mlir::ExecutionEngine::create(*module);
    ASSERT_TRUE(static_cast<bool>(engine)) << llvm::toString(engine.takeError());
    std::vector<void*> pointers, args;
    for (int value : op.params) pointers.push_back(values[value].data());
    for (void*& pointer : pointers) args.push_back(&pointer);
    llvm::Error error = (*engine)->invokePacked(op.name, args);
    ASSERT_FALSE(static_cast<bool>(error)) << llvm::toString(std::move(error));
  }
}

/// Host buffers for `plan`'s values; inputs filled from `inputs`.
std::vector<std::vector<char>> host_values(const CudaPlan& plan,
                                           const std::vector<std::vector<float>>& inputs) {
  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(values[i].data(), inputs[i].data(), values[i].size());
  return values;
}

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

template <typename T>
const T* as(const std::vector<char>& bytes) {
  return reinterpret_cast<const T*>(bytes.data());
}

TEST(CudaTiledHost, BroadcastFusionWithAPartialLastTile) {
  testing::CudaStepContext step(testing::kFusionStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> a = random_floats(37 * 300, 1), b = random_floats(300, 2);
  auto values = host_values(compiled->plan, {a, b});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* s = as<float>(values[compiled->plan.outputs[0]]);
  const bool* m = as<bool>(values[compiled->plan.outputs[1]]);
  for (int r = 0; r < 37; ++r)
    for (int c = 0; c < 300; ++c) {
      const float expected = a[r * 300 + c] + std::exp(b[c]);
      ASSERT_NEAR(s[r * 300 + c], expected, 1e-6f * (1 + std::fabs(expected))) << r << "," << c;
      ASSERT_EQ(m[r * 300 + c], expected > 0.f) << r << "," << c;
    }
}

TEST(CudaTiledHost, UnfusedChainThroughIntermediateValues) {
  testing::CudaStepContext step(testing::kChainStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> x = random_floats(8 * 64, 3), y = random_floats(8 * 64, 4);
  auto values = host_values(compiled->plan, {x, y});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* t = as<float>(values[compiled->plan.outputs[0]]);
  const float* e = as<float>(values[compiled->plan.outputs[1]]);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_NEAR(e[i], std::exp(x[i]), 1e-6f * std::exp(x[i])) << i;
    const float expected = std::tanh(std::exp(x[i]) * y[i]);
    ASSERT_NEAR(t[i], expected, 2e-6f) << i;
  }
}

TEST(CudaTiledHost, RowReductionOneThreadPerRow) {
  testing::CudaStepContext step(testing::kRowSumStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::vector<float> x = random_floats(300 * 33, 5);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  // A fill then the accumulation: two launches, each row one thread.
  ASSERT_EQ(compiled->plan.launches.size(), 2u);
  const float* sum = as<float>(values[compiled->plan.outputs[0]]);
  for (int r = 0; r < 300; ++r) {
    double expected = 0;
    for (int c = 0; c < 33; ++c) expected += x[r * 33 + c];
    ASSERT_NEAR(sum[r], expected, 1e-5) << r;
  }
}

TEST(CudaTiledHost, ColumnSumOneThreadPerColumn) {
  testing::CudaStepContext step(testing::kColumnSumStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  // The accumulation runs on 300 threads (two blocks), not on one.
  ASSERT_EQ(compiled->plan.launches.size(), 2u);
  EXPECT_THAT(compiled->plan.kernels[1].grid, ::testing::ElementsAre(2u, 1u, 1u));
  const std::vector<float> x = random_floats(33 * 300, 7);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  const float* sum = as<float>(values[compiled->plan.outputs[0]]);
  for (int c = 0; c < 300; ++c) {
    double expected = 0;
    for (int r = 0; r < 33; ++r) expected += x[r * 300 + c];
    ASSERT_NEAR(sum[c], expected, 1e-5) << c;
  }
}

TEST(CudaTiledHost, SumToAScalarOnOneThread) {
  testing::CudaStepContext step(testing::kScalarSumStep);
  auto compiled = compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  for (const CudaKernelInfo& kernel : compiled->plan.kernels) {
    EXPECT_THAT(kernel.grid, ::testing::ElementsAre(1u, 1u, 1u));
    EXPECT_THAT(kernel.block, ::testing::ElementsAre(1u, 1u, 1u));
  }
  const std::vector<float> x = random_floats(7 * 45, 6);
  auto values = host_values(compiled->plan, {x});
  ASSERT_NO_FATAL_FAILURE(run_tiled_on_host(step.context(), *compiled, values));
  double expected = 0;
  for (float v : x) expected += v;
  EXPECT_NEAR(*as<float>(values[compiled->plan.outputs[0]]), expected, 1e-4);
}

}  // namespace
}  // namespace mstep::cuda
