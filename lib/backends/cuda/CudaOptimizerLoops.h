// The multi-tensor optimizer update as a cuda loop nest (CudaOpLoops.h
// says how the loop nests are built and checked). Library-internal; MLIR.
#pragma once

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {
struct CudaCodegenOptions;
}

namespace mstep::cuda::loops {

/// `op`'s update of every parameter (and the clipping norm, when it has
/// one) in `nest`; not_lowered_for_cuda for a rule not handled yet. The
/// parameters' updates are one launch for as many parameters as fit in
/// options.multi_tensor_max_buffers kernel parameters (each tensor's
/// elements from a block of options.threads lanes on;
/// MSTEP_CUDA_OPTIMIZER=multi), or a launch per parameter (=per_tensor,
/// the first form); the arithmetic of each element is the same in both.
/// The clipping norms are split over blocks (CudaColumnSums.h) or one
/// lane per gradient (options.column_reduction).
absl::Status multi_tensor_update_loops(dialect::MultiTensorUpdateOp op,
                                       const CudaCodegenOptions& options, Nest& nest);

} // namespace mstep::cuda::loops
