// The multi-tensor optimizer update as a cuda loop nest (CudaOpLoops.h
// says how the loop nests are built and checked). Library-internal; MLIR.
#pragma once

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda::loops {

/// `op`'s update of every parameter (and the clipping norm, when it has
/// one) in `nest`; not_lowered_for_cuda for a rule not handled yet.
absl::Status multi_tensor_update_loops(dialect::MultiTensorUpdateOp op, Nest& nest);

} // namespace mstep::cuda::loops
