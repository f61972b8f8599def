// CudaCollectives: see CudaCollective.h.
#include "lib/backends/cuda/CudaCollective.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

#if MSTEP_HAS_NCCL
#include "lib/backends/cuda/NcclApi.h"
#include "lib/runtime/distributed/Communicator.h"
#endif

namespace mstep::cuda {

#if MSTEP_HAS_NCCL

namespace {

/// The backend's communicator: made once (see the header), kept in
/// CudaBackend::collective_state.
absl::StatusOr<NcclComm*> backend_comm(CudaBackend& backend, const NcclApi& api,
                                       const std::string& first) {
  std::shared_ptr<void>& state = backend.collective_state();
  if (state) return static_cast<NcclComm*>(state.get());
  if (backend.capturing())
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda: ", first, ": the NCCL communicator cannot be made inside a CUDA graph capture; "
        "run the step once before capturing it"));
  MSTEP_RETURN_IF_ERROR(backend.context().make_current());
  // The communicator's non-blocking init and every later wait give up
  // after this long (a rank that never comes must not hang the others).
  const double timeout = backend.options().collective_timeout_s > 0
                             ? backend.options().collective_timeout_s
                             : dist::timeout_seconds();
  absl::StatusOr<std::unique_ptr<NcclComm>> comm;
  if (!dist::is_initialized() || dist::world_size() == 1) {
    comm = NcclComm::world_of_one(api, timeout);
  } else {
    // Rank 0's unique id to every rank, over MPI (as i64[16]: its 128 bytes).
    static_assert(sizeof(ncclUniqueId) == 16 * sizeof(int64_t));
    ncclUniqueId id{};
    if (dist::rank() == 0)
      if (ncclResult_t r = api.ncclGetUniqueId(&id); r != ncclSuccess)
        return absl::InternalError(absl::StrCat("nccl: ncclGetUniqueId on rank 0 failed: ",
                                                describe_nccl_result(api, r)));
    dist::Collective c;
    c.op = OpKind::broadcast;
    c.root = 0;
    c.world_size = dist::world_size();
    c.input = c.result = TensorType{Shape{16}, DType::i64};
    c.label = "the NCCL unique id's broadcast";
    ncclUniqueId received{};
    MSTEP_RETURN_IF_ERROR(dist::run_collective(c, &id, &received));
    comm = NcclComm::join(api, received, dist::rank(), dist::world_size(), timeout);
  }
  if (!comm.ok())
    return absl::Status(comm.status().code(),
                        absl::StrCat("cuda: making the NCCL communicator for ", first, ": ",
                                     comm.status().message()));
  NcclComm* made = comm->get();
  state = std::shared_ptr<void>(comm->release(), [](void* p) { delete static_cast<NcclComm*>(p); });
  // Waits poll NCCL's asynchronous error and give up after the timeout,
  // aborting the communicator (its calls on the stream then end).
  backend.set_wait_watch([made, timeout, &api](absl::string_view what, double waited) -> absl::Status {
    if (made->aborted())
      return absl::FailedPreconditionError(absl::StrCat(
          "nccl: waiting for ", what, ": the NCCL communicator was aborted after an earlier "
          "failure; end the job"));
    const ncclResult_t async = made->async_error();
    if (async != ncclSuccess && async != ncclInProgress) {
      made->abort();
      return absl::InternalError(absl::StrCat("nccl: waiting for ", what, " on rank ",
                                              made->rank(), " of ", made->world_size(),
                                              ": NCCL failed: ", describe_nccl_result(api, async),
                                              "; the communicator was aborted, end the job"));
    }
    if (waited <= timeout) return absl::OkStatus();
    made->abort();
    return absl::DeadlineExceededError(absl::StrCat(
        "nccl: waiting for ", what, " on rank ", made->rank(), " of ", made->world_size(),
        ": not done within ", timeout,
        " s (MSTEP_DIST_TIMEOUT). A rank that died, hangs or skips a collective stalls the "
        "others; the NCCL communicator was aborted, end the job"));
  });
  return made;
}

class NcclCollectives final : public CudaCollectives {
 public:
  NcclCollectives(CudaBackend& backend, const NcclApi& api, const NcclComm& comm)
      : backend_(backend), api_(api), comm_(comm) {}

  absl::Status issue(const CudaCollectiveInfo& c, const TensorType& input,
                     const TensorType& result, CUdeviceptr in, CUdeviceptr out) override {
    MSTEP_ASSIGN_OR_RETURN(NcclCall call, plan_nccl_call(c, input, result));
    absl::Status s = issue_nccl_call(api_, comm_, call, reinterpret_cast<const void*>(in),
                                     reinterpret_cast<void*>(out), backend_.context().stream());
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat(c.origin, " on rank ", comm_.rank(), " of ",
                                                 comm_.world_size(), ": ", s.message()));
    return absl::OkStatus();
  }

 private:
  CudaBackend& backend_;
  const NcclApi& api_;
  const NcclComm& comm_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaCollectives>> CudaCollectives::create(CudaBackend& backend,
                                                                         const CudaPlan& plan) {
  if (plan.collectives.empty()) return nullptr;
  const std::string& first = plan.collectives.front().origin;
  std::string library = backend.options().nccl_library;
  if (library.empty()) {
    const char* env = std::getenv("MSTEP_NCCL_LIBRARY");
    library = env != nullptr && *env != '\0' ? env : "libnccl.so.2";
  }
  absl::StatusOr<const NcclApi*> api = load_nccl(library);
  if (!api.ok())
    return absl::Status(api.status().code(), absl::StrCat("cuda: ", first, " needs NCCL: ",
                                                          api.status().message()));
  MSTEP_ASSIGN_OR_RETURN(NcclComm * comm, backend_comm(backend, **api, first));
  for (const CudaCollectiveInfo& c : plan.collectives)
    if (c.world_size != comm->world_size())
      return absl::FailedPreconditionError(absl::StrCat(
          "cuda: ", c.origin, " was recorded in a world of ", c.world_size,
          " processes but this backend's NCCL communicator has ", comm->world_size(),
          " ranks; call mstep::distributed::init() before recording collectives"));
  return std::unique_ptr<CudaCollectives>(new NcclCollectives(backend, **api, *comm));
}

#else

absl::StatusOr<std::unique_ptr<CudaCollectives>> CudaCollectives::create(CudaBackend& backend,
                                                                         const CudaPlan& plan) {
  if (plan.collectives.empty()) return nullptr;
  return absl::UnimplementedError(absl::StrCat(
      "cuda: ", plan.collectives.front().origin,
      " needs NCCL, and this mstep was built without nccl.h; run the collectives on the cpu "
      "backend"));
}

#endif

}  // namespace mstep::cuda
