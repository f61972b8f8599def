// A collective step of the cuda plan (issue 23) and the one check of what
// a single NCCL call can compute, shared by the compiler (CudaCompiler.cpp),
// the plan's validation at load (CudaExecutable.cpp) and the NCCL call's
// planning (NcclApi.h: plan_nccl_call). No NCCL header: it is part of the
// backend's objects whether or not nccl.h was found. Library-internal.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/OpKind.h"

namespace mstep::cuda {

/// One collective step (issue 23): mstep.all_reduce, all_gather, broadcast
/// or reduce_scatter as one NCCL call on the backend's stream
/// (CudaCollective.h), over the communicator of the backend. Its values:
/// args {input}, writes {result}. The node's attributes as recorded:
/// reduce_op as mstep::dist::ReduceCode (0 sum, 1 mean, 2 max, 3 min),
/// root (broadcast), dim (all_gather, reduce_scatter), world_size.
struct CudaCollectiveInfo {
  std::string origin;  ///< the op it computes ("mstep.all_reduce #4")
  OpKind op = OpKind::all_reduce;
  int64_t reduce_op = 0;
  int64_t root = 0;
  int64_t dim = 0;
  int64_t world_size = 1;
  friend bool operator==(const CudaCollectiveInfo&, const CudaCollectiveInfo&) = default;
};

/// Whether one NCCL call computes `info` from `input` into `result`: a
/// collective op, a reduce code 0..3, a dtype NCCL has (bool only moved,
/// never reduced), a gather or scatter along dim 0 (or dims of size 1
/// before it: NCCL concatenates whole buffers), a root inside the world,
/// and the result's element count the call's. Unimplemented (the op, its
/// type and why) or InvalidArgument (a corrupt plan).
absl::Status check_cuda_collective(const CudaCollectiveInfo& info, const TensorType& input,
                                   const TensorType& result);

/// "all_reduce" for a collective op, null for any other op.
const char* cuda_collective_name(OpKind op);

}  // namespace mstep::cuda
