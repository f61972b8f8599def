// mstep-opt: parses, verifies and transforms MLIR that uses the mstep
// dialect, like mlir-opt. It registers the mstep dialect and passes, the
// upstream dialects mstep modules use or lower to (func, arith, math,
// tensor, linalg) and the upstream transforms (canonicalize, cse,
// symbol-dce, inline, ...) and the pipelines `mstep-pipeline` and
// `mstep-pipeline-unfused`. MlirOptMain provides the flags:
// --pass-pipeline, --split-input-file, --verify-diagnostics,
// --mlir-print-ir-after-all and the rest.
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "mstep/passes/Passes.h"
#include "mstep/passes/Pipeline.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  registry.insert<mstep::dialect::MstepDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect,
                  mlir::linalg::LinalgDialect>();
  mlir::registerTransformsPasses();
  mstep::passes::registerMstepPasses();
  mstep::passes::register_pipelines();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "mstep optimizer driver\n", registry));
}
