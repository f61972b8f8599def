// The mstep compile pipeline (see Pipeline.h), shared by the compiler's miss
// path and mstep-opt.
#include "mstep/passes/Pipeline.h"

#include "mlir/Transforms/Passes.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {

void build_pipeline(mlir::OpPassManager& pm, const PipelineOptions& options,
                    TargetPasses target_passes) {
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (options.fuse) {
    mlir::OpPassManager& func_pm = pm.nest<mlir::func::FuncOp>();
    func_pm.addPass(createFuseAttention());
    func_pm.addPass(createFuseOptimizer());
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
    FuseElementwiseOptions elementwise;
    elementwise.customScalarForms = options.custom_scalar_forms;
    pm.nest<mlir::func::FuncOp>().addPass(createFuseElementwise(elementwise));
  }
  if (target_passes) target_passes(pm);
  if (options.fuse) pm.addPass(createVerifyBackendContract());
}

void add_arena_plan(mlir::OpPassManager& pm) {
  // Before the plan: the moved readers change the values' lifetimes.
  pm.nest<mlir::func::FuncOp>().addPass(createSinkCollectiveReaders());
  pm.nest<mlir::func::FuncOp>().addPass(createPlanMemory());
}

}  // namespace mstep::passes
