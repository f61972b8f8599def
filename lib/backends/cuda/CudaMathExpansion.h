// The math ops convert-gpu-to-nvvm leaves unconverted, rewritten into
// arith before the kernels are tiled (CudaKernelGen.cpp), so that the
// kernels and the host runs of their tiled loops (test/cuda/TiledHost.h)
// compute the same thing:
// - math.absf: the sign bit cleared (llvm.intr.fabs is illegal for NVVM,
//   and libdevice has __nv_fabsf / __nv_fabs only: no bf16 or f16);
// - math.absi: x < 0 ? 0 - x : x (wraps at the minimum, as ref's abs);
// - math.ipowi: lib/passes/IntegerPowExpansion.h (ref's integer pow).
// All three are exact. Library-internal; MLIR.
#pragma once

namespace mlir::func {
class FuncOp;
}

namespace mstep::cuda {

/// Rewrites math.absf, math.absi and math.ipowi in `func` into arith.
void expand_math_for_nvvm(mlir::func::FuncOp func);

} // namespace mstep::cuda
