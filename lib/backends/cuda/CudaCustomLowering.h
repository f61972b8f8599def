// mstep.custom on cuda: the op's registered CUDA C++ kernel
// (mstep/runtime/CudaCustomKernel.h) compiled with NVRTC to PTX for
// compute_80 (CudaNvrtc.h), assembled by ptxas -v for each architecture of
// the compile (cubins and the register/shared-memory report, like mstep's
// own kernels), and one launch of the plan with the grid, block and
// parameters the kernel's rules give for this call. The plan stores all of
// it, so the disk cache, exported graphs and CUDA graph capture treat the
// launch like any other. A process compiles one (source, entry, options)
// once: calls of an op with equal types share the PTX and cubins.
//
// There is no host fallback on cuda (a plan runs on the device only): an
// op without a cuda kernel is an error naming it and the backends that
// have kernels. Compile half (MLIR).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

/// Adds the kernel and the launch of `op` (`origin` names it in errors:
/// "mstep.custom #3") to `plan`: the launch reads values `operands` (the
/// op's inputs' plan values) and writes `results` (its results'), which
/// the caller has added to the plan. Errors name the op and, for NVRTC,
/// the entry and NVRTC's log; for an unregistered op, a missing or
/// non-cuda kernel, a rule's error, an argument naming an input, output or
/// attribute the op lacks (or a string/list attribute), an output the
/// kernel is not given, a launch with no threads or over 1024 a block.
absl::Status lower_custom_op(dialect::CustomOp op, const std::string& origin,
                             const std::vector<int>& operands, const std::vector<int>& results,
                             const std::vector<std::string>& archs, CudaPlan& plan);

} // namespace mstep::cuda
