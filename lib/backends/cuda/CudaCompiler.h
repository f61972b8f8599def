// The cuda backend's compile half (registered as "cuda" in
// libmstep_compiler): the step function's ops, in program order, become a
// CudaPlan: matmuls are cuBLASLt steps; elementwise fusions, standalone
// elementwise ops, reductions, softmax, norms, losses, dropout, the shape
// and index ops, convolutions and pools, and the optimizer update are GPU
// kernels (CudaKernelGen.h, CudaOpLoops.h) assembled by ptxas for each
// architecture with -v (its report kept per kernel); the PTX is kept for
// the JIT; attention is a cuDNN step, or composed of cuBLASLt steps and
// kernels where cuDNN cannot express it (CudaAttentionLowering.h); a
// custom op (mstep.custom) is its registered CUDA C++ kernel compiled with
// NVRTC (CudaCustomLowering.h); a collective is an NCCL step. An op it
// cannot lower is an error naming it: "... is not yet lowered for cuda"
// (no silent host fallback). Library-internal; MLIR.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mstep/runtime/Options.h"

namespace mlir {
class ModuleOp;
}

namespace mstep::cuda {

struct CudaCompileOptions {
  CudaCodegenOptions codegen;
  /// The cubins built for each kernel.
  std::vector<std::string> archs = {"sm_80", "sm_90"};
};

/// The defaults: this build's toolkit, sm_80 PTX, cubins for sm_80 and sm_90.
CudaCompileOptions default_cuda_compile_options();

/// The defaults with `runtime`'s choices (MSTEP_CUDA_ROW_REDUCTION,
/// MSTEP_CUDA_COLUMN_REDUCTION, MSTEP_CUDA_OPTIMIZER).
CudaCompileOptions cuda_compile_options(const RuntimeOptions& runtime);

/// A tiled loop nest, right before the GPU mapping: func @<name> on
/// memrefs of an op's operands, then its results and temporaries (or, for
/// the composed attention's kernels, the buffers they take).
struct TiledOp {
  std::string name;      ///< "op3", "op5_probs"
  std::string module;    ///< MLIR text
  std::vector<int> params;  ///< plan value ids of the func's parameters
  std::vector<int> kernels; ///< the plan's kernels of its launches
  /// The kernels of a cuBLASLt epilogue's fallback (CudaMatmulInfo::
  /// fallback), which run only where the loaded plan takes it.
  bool fallback = false;
};

struct CompiledCudaStep {
  CudaPlan plan;
  /// One per func of kernels (an op's, or one of the composed
  /// attention's), in plan order.
  std::vector<TiledOp> tiled;
};

/// The plan of func @step in `module` (after the cuda pipeline). Needs no
/// device: a step compiles here and runs on the GPU machine.
absl::StatusOr<CompiledCudaStep> compile_cuda_step(mlir::ModuleOp module,
                                                   const CudaCompileOptions& options);

}  // namespace mstep::cuda
