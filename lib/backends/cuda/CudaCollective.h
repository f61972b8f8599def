// The cuda executable's collective steps (issue 23): each CudaPlan
// collective is one NCCL call (NcclApi.h) queued on the backend's stream
// over the executable's arena and buffers; mean is ncclAvg (NCCL >= 2.10;
// load_nccl requires 2.14), so no scale kernel.
//
// The communicator is the backend's, made at the first executable with a
// collective and destroyed with the backend (CudaBackend::
// collective_state): in a world of one process (no
// mstep::distributed::init) a 1-rank communicator (ncclGetUniqueId +
// a 1-rank init, no MPI); in an MPI world rank 0's ncclGetUniqueId,
// broadcast over mstep::distributed's communicator (under its timeout,
// MSTEP_DIST_TIMEOUT), then ncclCommInitRankConfig(world, id, rank) on the
// backend's device. The init is non-blocking and polled: one not done
// within the timeout (CudaBackendOptions::collective_timeout_s, else
// MSTEP_DIST_TIMEOUT) is aborted with an error naming the rank, the world
// and the timeout (NcclComm::join). It is made outside any CUDA graph
// capture; the calls themselves are captured like kernels (NCCL >= 2.9
// supports capture).
//
// Built with nccl.h only (MSTEP_HAS_NCCL); without it a plan with a
// collective fails to load, naming the op. Never run on a GPU with a real
// libnccl here: tested against fake_libnccl (test/cuda). Library-internal.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

class CudaCollectives {
 public:
  /// Loads NCCL (CudaBackendOptions::nccl_library, $MSTEP_NCCL_LIBRARY or
  /// libnccl.so.2), gets or makes the
  /// backend's communicator and checks each of `plan`'s collectives
  /// against it (its world size). Errors name the first collective.
  static absl::StatusOr<std::unique_ptr<CudaCollectives>> create(CudaBackend& backend,
                                                                 const CudaPlan& plan);
  virtual ~CudaCollectives() = default;
  /// Queues collective `c` (its plan entry) on the backend's stream: call
  /// inside CudaBackend::enqueue's `queue`. `input`, `result`: its values'
  /// types; `in`, `out`: their device addresses. NCCL's error names the
  /// op, the rank and NCCL's text.
  virtual absl::Status issue(const CudaCollectiveInfo& c, const TensorType& input,
                             const TensorType& result, CUdeviceptr in, CUdeviceptr out) = 0;
};

}  // namespace mstep::cuda
