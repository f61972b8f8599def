// The cpu compile half declares the dialects its fused kernels are built
// in (BackendCompiler::get_dependent_dialects); the compiler driver loads
// them into its one context. The fusion JIT no longer loads them itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cpu/FusionJit.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"

namespace mstep::cpu {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

constexpr absl::string_view kFusion = R"(
func.func @step(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %f = mstep.fusion ins(%x, %y : tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    %s = mstep.add %a, %b : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    mstep.yield %s : tensor<8xf32>
  }
  return %f : tensor<8xf32>
}
)";

TEST(CpuKernelDialects, TheCpuCompilerDeclaresThemAndTheDriverLoadsThem) {
  auto compiler = CompilerRegistry::get("cpu");
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  mlir::DialectRegistry registry;
  (*compiler)->get_dependent_dialects(registry);
  std::vector<std::string> names;
  for (llvm::StringRef name : registry.getDialectNames()) names.push_back(name.str());
  EXPECT_THAT(names, Contains("linalg"));
  EXPECT_THAT(names, Contains("vector"));
  EXPECT_THAT(names, Contains("llvm"));

  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  register_mstep_dialects(context);
  EXPECT_EQ(context.getLoadedDialect("vector"), nullptr);
  load_dependent_dialects(context, **compiler);
  for (const std::string& name : names) EXPECT_NE(context.getLoadedDialect(name), nullptr) << name;
  auto module = parse_mstep_module(kFusion, context, "the test module");
  ASSERT_TRUE(module.ok()) << module.status();
  auto jit = FusionJit::compile(module->get());
  EXPECT_TRUE(jit.ok()) << jit.status();
}

// The kernel dialects are the cpu compile half's declared dependencies,
// loaded by the compiler driver: compiling in a context that lacks them is
// a clear error, not a crash in the op builder (and not a silent load).
TEST(CpuKernelDialects, ACompileInAContextWithoutTheKernelDialectsIsAnError) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  register_mstep_dialects(context);
  auto module = parse_mstep_module(kFusion, context, "the test module");
  ASSERT_TRUE(module.ok()) << module.status();
  auto jit = FusionJit::compile(module->get());
  ASSERT_FALSE(jit.ok());
  EXPECT_THAT(jit.status().message(), HasSubstr("kernel dialects"));
  EXPECT_THAT(jit.status().message(), HasSubstr("vector"));
  EXPECT_THAT(jit.status().message(), HasSubstr("load_dependent_dialects"));
}

}  // namespace
}  // namespace mstep::cpu
