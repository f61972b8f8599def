// Small steps in the mstep dialect for the cuda compile-half tests, and a
// context that parses them with the cuda compiler's dialects loaded.
#pragma once

#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaCompiler.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/core/Error.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"

namespace mstep::cuda::testing {

/// One fusion, two results: s = a + exp(b) (b broadcast over rows), s > 0.
inline constexpr const char* kFusionStep = R"(
func.func @step(%a: tensor<37x300xf32>, %b: tensor<300xf32>)
    -> (tensor<37x300xf32>, tensor<37x300xi1>) {
  %r:2 = mstep.fusion ins(%a, %b : tensor<37x300xf32>, tensor<300xf32>)
      -> tensor<37x300xf32>, tensor<37x300xi1> {
  ^bb0(%x: tensor<37x300xf32>, %y: tensor<300xf32>):
    %e = mstep.exp %y : tensor<300xf32>
    %s = mstep.add %x, %e : tensor<37x300xf32>, tensor<300xf32> -> tensor<37x300xf32>
    %z = mstep.constant 0.000000e+00 : tensor<f32>
    %m = mstep.gt %s, %z : tensor<37x300xf32>, tensor<f32> -> tensor<37x300xi1>
    mstep.yield %s, %m : tensor<37x300xf32>, tensor<37x300xi1>
  }
  return %r#0, %r#1 : tensor<37x300xf32>, tensor<37x300xi1>
}
)";

/// Three unfused ops: tanh(exp(x) * y), and exp(x) also returned.
inline constexpr const char* kChainStep = R"(
func.func @step(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>)
    -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %0 = mstep.exp %x : tensor<8x64xf32>
  %1 = mstep.mul %0, %y : tensor<8x64xf32>, tensor<8x64xf32> -> tensor<8x64xf32>
  %2 = mstep.tanh %1 : tensor<8x64xf32>
  return %2, %0 : tensor<8x64xf32>, tensor<8x64xf32>
}
)";

/// exp, tanh, exp, tanh: three 2048-byte intermediates, %1 live over
/// launches 0..1, %2 over 1..2, %3 over 2..3, so %1 and %3 can share.
inline constexpr const char* kFourChainStep = R"(
func.func @step(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = mstep.exp %x : tensor<8x64xf32>
  %1 = mstep.tanh %0 : tensor<8x64xf32>
  %2 = mstep.exp %1 : tensor<8x64xf32>
  %3 = mstep.tanh %2 : tensor<8x64xf32>
  return %3 : tensor<8x64xf32>
}
)";

/// A row sum (keepdim): a fill and an accumulation, one thread per row.
inline constexpr const char* kRowSumStep = R"(
func.func @step(%x: tensor<300x33xf32>) -> tensor<300x1xf32> {
  %s = mstep.sum %x {dims = array<i64: 1>, keepdim = true} : tensor<300x33xf32> -> tensor<300x1xf32>
  return %s : tensor<300x1xf32>
}
)";

/// A column sum (the bias gradient's form): a parallel loop over columns.
inline constexpr const char* kColumnSumStep = R"(
func.func @step(%x: tensor<33x300xf32>) -> tensor<300xf32> {
  %s = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<33x300xf32> -> tensor<300xf32>
  return %s : tensor<300xf32>
}
)";

/// A sum to a scalar: one thread.
inline constexpr const char* kScalarSumStep = R"(
func.func @step(%x: tensor<7x45xf32>) -> tensor<f32> {
  %s = mstep.sum %x {dims = array<i64: 0, 1>, keepdim = false} : tensor<7x45xf32> -> tensor<f32>
  return %s : tensor<f32>
}
)";

/// An integer matmul (cuBLASLt steps take f32, bf16 or f16): not lowered for
/// cuda yet.
inline constexpr const char* kNotLoweredStep = R"(
func.func @step(%a: tensor<4x5xi64>, %b: tensor<5x2xi64>) -> tensor<4x2xi64> {
  %c = mstep.matmul %a, %b : tensor<4x5xi64>, tensor<5x2xi64> -> tensor<4x2xi64>
  return %c : tensor<4x2xi64>
}
)";

/// A context with the mstep dialects and the cuda compiler's, and `text`
/// parsed in it (none when null).
class CudaStepContext {
 public:
  explicit CudaStepContext(const char* text) : context_(mlir::MLIRContext::Threading::DISABLED) {
    register_mstep_dialects(context_);
    absl::StatusOr<BackendCompiler*> compiler = CompilerRegistry::get("cuda");
    EXPECT_TRUE(compiler.ok()) << compiler.status();
    if (compiler.ok()) load_dependent_dialects(context_, **compiler);
    if (text == nullptr) return;
    auto module = parse_mstep_module(text, context_, "test step");
    EXPECT_TRUE(module.ok()) << module.status();
    if (module.ok()) module_ = std::move(*module);
  }
  mlir::ModuleOp module() { return *module_; }
  mlir::MLIRContext& context() { return context_; }

 private:
  mlir::MLIRContext context_;
  mlir::OwningOpRef<mlir::ModuleOp> module_;
};

/// The plan compile_cuda_step makes of `text` (default options).
inline absl::StatusOr<CudaPlan> plan_of(const char* text) {
  CudaStepContext step(text);
  MSTEP_ASSIGN_OR_RETURN(CompiledCudaStep compiled,
                         compile_cuda_step(step.module(), default_cuda_compile_options()));
  return std::move(compiled.plan);
}

}  // namespace mstep::cuda::testing
