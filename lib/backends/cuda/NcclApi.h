// NCCL for the cuda backend's collectives (issue 23): the library loaded
// at run time with dlopen into a table of functions, as cuBLASLt and cuDNN
// are, so nothing links it and a machine without it reports
// "nccl: unavailable: <reason>"; the types come from the toolkit's nccl.h.
// A collective node becomes one NCCL call (plan_nccl_call, a pure
// function) issued on the backend's stream (issue_nccl_call). A world of
// one process needs no MPI (NcclComm::world_of_one). Library-internal.
//
// The cuda compile half lowers mstep.all_reduce & co. into the plan's
// collective steps (CudaPlan.h) and CudaCollective.h runs them through
// this layer; all of it is tested against a fake libnccl
// (test/cuda/fake_libnccl.cpp) and has never run on a GPU.
//
// Thread-safety: an NcclApi is immutable; an NcclComm is used by one thread
// at a time (NCCL's rule for communicators).
#pragma once

#include <nccl.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaCollectiveInfo.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/OpKind.h"

namespace mstep::cuda {

#define MSTEP_NCCL_FUNCTIONS(X)                                                                    \
  X(ncclGetVersion)                                                                                \
  X(ncclGetErrorString)                                                                            \
  X(ncclGetUniqueId)                                                                               \
  X(ncclCommInitRankConfig)                                                                        \
  X(ncclCommDestroy)                                                                               \
  X(ncclCommAbort)                                                                                 \
  X(ncclCommGetAsyncError)                                                                         \
  X(ncclAllReduce)                                                                                 \
  X(ncclAllGather)                                                                                 \
  X(ncclBroadcast)                                                                                 \
  X(ncclReduceScatter)

/// The table: a field per function, named and typed as nccl.h declares it.
struct NcclApi {
#define MSTEP_NCCL_FIELD(name) decltype(&::name) name = nullptr;
  MSTEP_NCCL_FUNCTIONS(MSTEP_NCCL_FIELD)
#undef MSTEP_NCCL_FIELD
  int version = 0;   ///< ncclGetVersion(): 10000 * major + 100 * minor + patch
  std::string path;  ///< as dlopen'ed
};

/// dlopen's `path` ("libnccl.so.2" by name: the loader's path, where the
/// toolkit's NCCL is) and every function of the table. Unavailable
/// "nccl: unavailable: <reason>" on failure, or for an NCCL older than
/// 2.14 (ncclAvg is 2.10, ncclCommInitRankConfig's non-blocking init
/// 2.14). Loaded once per path; the table lives forever.
absl::StatusOr<const NcclApi*> load_nccl(const std::string& path = "libnccl.so.2");

/// "ncclInvalidArgument (invalid argument)" for a failed call.
std::string describe_nccl_result(const NcclApi& api, ncclResult_t result);

/// One NCCL call: which, and its arguments besides the buffers.
struct NcclCall {
  OpKind op = OpKind::all_reduce;
  size_t count = 0;  ///< elements: sent (all_reduce, broadcast, all_gather) or received (reduce_scatter)
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t reduce = ncclSum;
  int root = 0;
};

/// The NCCL call of collective step `info` (its reduce_op 0 sum, 1 mean =
/// ncclAvg, 2 max, 3 min) from `input` into `result`: what
/// check_cuda_collective (CudaCollectiveInfo.h) refuses is refused here
/// with its error, then the dtype, reduction and count map onto NCCL's.
absl::StatusOr<NcclCall> plan_nccl_call(const CudaCollectiveInfo& info, const TensorType& input,
                                        const TensorType& result);

/// A communicator. Destroyed with ncclCommDestroy.
class NcclComm {
 public:
  /// A world of this process alone (ncclGetUniqueId + a 1-rank join): no
  /// MPI needed.
  static absl::StatusOr<std::unique_ptr<NcclComm>> world_of_one(const NcclApi& api,
                                                                double timeout_s);
  /// Rank `rank` of `world` ranks that share `id` (rank 0 made it with
  /// ncclGetUniqueId and sent it to the others, e.g. by MPI). The init is
  /// non-blocking (ncclCommInitRankConfig with blocking = 0), polled with
  /// ncclCommGetAsyncError until it is done: an init that fails, or that is
  /// not done within `timeout_s` seconds (a peer that never joins), aborts
  /// the communicator (ncclCommAbort) and returns an error naming the rank,
  /// the world and the timeout.
  static absl::StatusOr<std::unique_ptr<NcclComm>> join(const NcclApi& api, const ncclUniqueId& id,
                                                        int rank, int world, double timeout_s);
  ~NcclComm();
  ncclComm_t get() const { return comm_; }
  /// ncclCommGetAsyncError: ncclSuccess while the communicator is healthy
  /// (ncclInternalError once aborted).
  ncclResult_t async_error() const;
  /// ncclCommAbort: its queued and running calls end (with an error);
  /// the communicator is unusable after. Idempotent.
  void abort();
  bool aborted() const { return comm_ == nullptr; }
  int rank() const { return rank_; }
  int world_size() const { return world_; }

 private:
  NcclComm(const NcclApi& api, ncclComm_t comm, int rank, int world)
      : api_(api), comm_(comm), rank_(rank), world_(world) {}
  const NcclApi& api_;
  ncclComm_t comm_;
  int rank_, world_;
};

/// Queues `call` on `stream` (the backend's stream, a CUstream or
/// cudaStream_t): `in` and `out` are device pointers. Returns when queued;
/// the error names the call and NCCL's result.
absl::Status issue_nccl_call(const NcclApi& api, const NcclComm& comm, const NcclCall& call,
                             const void* in, void* out, void* stream);

}  // namespace mstep::cuda
