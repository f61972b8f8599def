// The mstep compile pipeline (see Pipeline.h), shared by the runtime's miss
// path and mstep-opt.
#include "mstep/passes/Pipeline.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {

void build_pipeline(mlir::OpPassManager& pm, const PipelineOptions& options) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (options.fuse) {
    mlir::OpPassManager& func_pm = pm.nest<mlir::func::FuncOp>();
    func_pm.addPass(createFuseAttention());
    func_pm.addPass(createFuseOptimizer());
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
    pm.nest<mlir::func::FuncOp>().addPass(createFuseElementwise());
  }
  if (options.plan_memory) pm.nest<mlir::func::FuncOp>().addPass(createPlanMemory());
  if (options.fuse) pm.addPass(createVerifyBackendContract());
}

void register_pipelines() {
  mlir::PassPipelineRegistration<>("mstep-pipeline",
                                   "The fused compile pipeline mark_step() runs",
                                   [](mlir::OpPassManager& pm) { build_pipeline(pm); });
  mlir::PassPipelineRegistration<>(
      "mstep-pipeline-unfused", "The compile pipeline without the fusion passes",
      [](mlir::OpPassManager& pm) { build_pipeline(pm, {.fuse = false}); });
}

}  // namespace mstep::passes
