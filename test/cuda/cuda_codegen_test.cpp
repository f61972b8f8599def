// The cuda compile half without a GPU: steps compile to kernels that ptxas
// assembles for sm_80 and sm_90 (its -v report kept per kernel), the
// launch plan's grids, blocks and arguments are those of the step's
// shapes, and an op that is not lowered is an error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "lib/backends/cuda/CudaCompiler.h"
#include "lib/backends/cuda/CudaModule.h"
#include "lib/backends/cuda/CudaPtxas.h"
#include "mlir/IR/MLIRContext.h"
#include "mstep/compiler/BackendCompiler.h"
#include "mstep/ir/MlirImport.h"
#include "mstep/ir/MlirParse.h"
#include "test/cuda/CudaStepText.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CudaCodegen, ElementwiseFusionAssemblesForSm80AndSm90) {
  testing::CudaStepContext step(testing::kFusionStep);
  absl::StatusOr<CompiledCudaStep> compiled =
      compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_EQ(plan.num_inputs, 2u);
  ASSERT_EQ(plan.values.size(), 4u);
  EXPECT_EQ(plan.values[3].to_string(), (TensorType{Shape({37, 300}), DType::boolean}).to_string());
  // 37 * 300 = 11100 elements in one dimension, 256 threads a block.
  const CudaKernelInfo& kernel = plan.kernels[0];
  EXPECT_THAT(kernel.grid, ElementsAre(44u, 1u, 1u));
  EXPECT_THAT(kernel.block, ElementsAre(256u, 1u, 1u));
  // Kernel parameters: both inputs, then both results, which it writes.
  EXPECT_THAT(plan.launches[0].args, ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(plan.launches[0].writes, ElementsAre(2, 3));
  EXPECT_THAT(plan.outputs, ElementsAre(2, 3));
  // The PTX (kept for the JIT) targets sm_80 and has the entry.
  EXPECT_EQ(describe_ptx_target(kernel.ptx), "compute_80");
  EXPECT_THAT(kernel.ptx, HasSubstr(".entry " + kernel.name));
  // ptxas accepted it for both architectures: each cubin's ELF header
  // says its architecture, and -v reported the kernel.
  ASSERT_EQ(kernel.cubins.size(), 2u);
  EXPECT_EQ(kernel.cubins[0].arch, "sm_80");
  EXPECT_EQ(describe_cubin_arch(kernel.cubins[0].image), "sm_80");
  EXPECT_EQ(kernel.cubins[1].arch, "sm_90");
  EXPECT_EQ(describe_cubin_arch(kernel.cubins[1].image), "sm_90");
  ASSERT_EQ(kernel.reports.size(), 2u);
  for (const PtxasKernelReport& report : kernel.reports) {
    EXPECT_EQ(report.kernel, kernel.name);
    EXPECT_GT(report.registers, 0);
    EXPECT_EQ(report.spill_store_bytes, 0);
  }
  // exp comes from libdevice: nothing is left unresolved for ptxas.
  EXPECT_THAT(describe_cuda_plan(plan), HasSubstr("sm_90: "));
}

TEST(CudaCodegen, UnfusedChainIsOneLaunchPerOpInProgramOrder) {
  testing::CudaStepContext step(testing::kChainStep);
  absl::StatusOr<CompiledCudaStep> compiled =
      compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  ASSERT_EQ(plan.launches.size(), 3u);
  // %0 = exp(x); %1 = mul(%0, y); %2 = tanh(%1): value ids 2, 3, 4.
  EXPECT_THAT(plan.launches[0].args, ElementsAre(0, 2));
  EXPECT_THAT(plan.launches[1].args, ElementsAre(2, 1, 3));
  EXPECT_THAT(plan.launches[2].args, ElementsAre(3, 4));
  EXPECT_THAT(plan.outputs, ElementsAre(4, 2));
  for (const CudaKernelInfo& kernel : plan.kernels) {
    EXPECT_THAT(kernel.grid, ElementsAre(2u, 1u, 1u)) << kernel.name;  // 8 * 64 = 512
    EXPECT_EQ(kernel.cubins.size(), 2u);
  }
}

TEST(CudaCodegen, AnOpThatIsNotLoweredIsNamed) {
  testing::CudaStepContext step(testing::kNotLoweredStep);
  absl::StatusOr<CompiledCudaStep> compiled =
      compile_cuda_step(step.module(), default_cuda_compile_options());
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(compiled.status().message(), HasSubstr("'mstep.matmul'"));
  EXPECT_THAT(compiled.status().message(), HasSubstr("not yet lowered for cuda"));
}

TEST(CudaCodegen, PtxasRefusingPtxIsAnErrorWithItsLog) {
  absl::StatusOr<AssembledPtx> assembled =
      assemble_ptx(".version 8.0\n.target sm_80\n.address_size 64\nthis is not ptx\n", "sm_90",
                   "kernel broken");
  ASSERT_FALSE(assembled.ok());
  EXPECT_THAT(assembled.status().message(), HasSubstr("assembling kernel broken for sm_90"));
  EXPECT_THAT(assembled.status().message(), HasSubstr("ptxas"));
}

TEST(CudaCodegen, AMissingPtxasIsAnError) {
  absl::StatusOr<AssembledPtx> assembled =
      assemble_ptx(".version 8.0\n", "sm_90", "kernel k", "/nonexistent/bin/ptxas");
  ASSERT_FALSE(assembled.ok());
  EXPECT_THAT(assembled.status().message(), HasSubstr("cannot run ptxas '/nonexistent/bin/ptxas'"));
}

TEST(CudaCodegen, TheSamePtxIsAssembledOncePerArchitecture) {
  // A ptxas that counts its runs before it runs the configured one.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("mstep_ptxas_runs_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path counter = dir / "runs", ptxas = dir / "ptxas";
  {
    std::ofstream script(ptxas);
    script << "#!/bin/sh\necho run >> '" << counter.string() << "'\nexec '" << configured_ptxas()
           << "' \"$@\"\n";
  }
  fs::permissions(ptxas, fs::perms::owner_all);
  auto runs = [&] {
    std::ifstream in(counter);
    return std::count(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>(), '\n');
  };
  testing::CudaStepContext step(testing::kFusionStep);
  CudaCompileOptions ptx_only = default_cuda_compile_options();
  ptx_only.archs.clear();
  absl::StatusOr<CompiledCudaStep> compiled = compile_cuda_step(step.module(), ptx_only);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string& ptx = compiled->plan.kernels.at(0).ptx;

  absl::StatusOr<AssembledPtx> first = assemble_ptx(ptx, "sm_80", "kernel k", ptxas.string());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(runs(), 1);
  absl::StatusOr<AssembledPtx> again = assemble_ptx(ptx, "sm_80", "kernel k", ptxas.string());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(runs(), 1);
  EXPECT_EQ(again->cubin, first->cubin);
  EXPECT_EQ(again->reports, first->reports);
  // Another architecture, or another text, runs ptxas again.
  ASSERT_TRUE(assemble_ptx(ptx, "sm_90", "kernel k", ptxas.string()).ok());
  EXPECT_EQ(runs(), 2);
  ASSERT_TRUE(assemble_ptx(ptx + "// again\n", "sm_80", "kernel k", ptxas.string()).ok());
  EXPECT_EQ(runs(), 3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mstep::cuda
