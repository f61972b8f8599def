// mstep-lower-to-linalg: lowers mstep ops to linalg on tensors for the
// codegen backends. This file only wires the op families together; the
// patterns live in lib/passes/linalg/ (elementwise and fusion, reductions,
// matmul) and the scalar forms of the elementwise ops in
// mstep/ir/dialect/ScalarForms.h (shared with the cpu backend).
#include "lib/passes/linalg/LinalgLowering.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_LOWERTOLINALG
#include "mstep/passes/Passes.h.inc"

namespace {

/// A partial conversion: the ops a family lowers are illegal, every other
/// mstep op (sdpa, conv2d, softmax, gather, ...) stays as it is.
struct LowerToLinalgPass : impl::LowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    mlir::MLIRContext* context = &getContext();
    mlir::ConversionTarget target(*context);
    target.addLegalDialect<mlir::linalg::LinalgDialect, mlir::tensor::TensorDialect,
                           mlir::arith::ArithDialect, mlir::math::MathDialect>();
    mlir::RewritePatternSet patterns(context);
    linalg_lowering::populateElementwiseToLinalg(patterns, target);
    linalg_lowering::populateReductionToLinalg(patterns, target);
    linalg_lowering::populateMatmulToLinalg(patterns, target);
    if (mlir::failed(mlir::applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
} // namespace mstep::passes
