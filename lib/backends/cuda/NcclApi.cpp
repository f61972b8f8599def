// NCCL (NcclApi.h): the loader, the planning of one call per collective
// node and its issue on a stream.
#include "lib/backends/cuda/NcclApi.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

namespace mstep::cuda {

namespace {

absl::Status unavailable(absl::string_view reason) {
  return absl::UnavailableError(absl::StrCat("nccl: unavailable: ", reason));
}

absl::Status nccl_error(const NcclApi& api, absl::string_view call, ncclResult_t result) {
  return absl::InternalError(absl::StrCat("nccl: ", call, " failed: ",
                                          describe_nccl_result(api, result)));
}

}  // namespace

absl::StatusOr<const NcclApi*> load_nccl(const std::string& path) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, absl::StatusOr<const NcclApi*>>();
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = loaded->find(path); it != loaded->end()) return it->second;
  auto load = [&]() -> absl::StatusOr<const NcclApi*> {
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* error = dlerror();
      return unavailable(error != nullptr ? error : absl::StrCat("cannot dlopen ", path));
    }
    auto api = std::make_unique<NcclApi>();
#define MSTEP_NCCL_LOAD(name)                                                                      \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(library, #name));                        \
  if (api->name == nullptr) return unavailable(absl::StrCat(path, " has no ", #name));
    MSTEP_NCCL_FUNCTIONS(MSTEP_NCCL_LOAD)
#undef MSTEP_NCCL_LOAD
    api->path = path;
    if (api->ncclGetVersion(&api->version) != ncclSuccess)
      return unavailable(absl::StrCat(path, ": ncclGetVersion failed"));
    if (api->version < 21400)
      return unavailable(absl::StrCat(path, " is NCCL ", api->version,
                                      "; mstep needs 2.14 or newer (ncclAvg, and "
                                      "ncclCommInitRankConfig's non-blocking init)"));
    return api.release();
  };
  auto result = load();
  loaded->emplace(path, result);
  return result;
}

std::string describe_nccl_result(const NcclApi& api, ncclResult_t result) {
  const char* text = api.ncclGetErrorString ? api.ncclGetErrorString(result) : nullptr;
  return absl::StrCat("ncclResult ", static_cast<int>(result), text ? absl::StrCat(" (", text, ")") : "");
}

absl::StatusOr<NcclCall> plan_nccl_call(const CudaCollectiveInfo& info, const TensorType& input,
                                        const TensorType& result) {
  if (absl::Status checked = check_cuda_collective(info, input, result); !checked.ok())
    return checked;
  NcclCall call;
  call.op = info.op;
  call.root = static_cast<int>(info.root);
  switch (input.dtype) {
    case DType::f32: call.datatype = ncclFloat32; break;
    case DType::f64: call.datatype = ncclFloat64; break;
    case DType::f16: call.datatype = ncclFloat16; break;
    case DType::bf16: call.datatype = ncclBfloat16; break;
    case DType::i32: call.datatype = ncclInt32; break;
    case DType::i64: call.datatype = ncclInt64; break;
    case DType::boolean: call.datatype = ncclUint8; break;  // moved only (checked above)
  }
  constexpr ncclRedOp_t kReduce[] = {ncclSum, ncclAvg, ncclMax, ncclMin};  // codes 0..3, checked
  call.reduce = kReduce[info.reduce_op];
  // Elements sent, but reduce_scatter's: received per rank.
  call.count = static_cast<size_t>(info.op == OpKind::reduce_scatter ? result.numel()
                                                                      : input.numel());
  return call;
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::world_of_one(const NcclApi& api,
                                                                   double timeout_s) {
  ncclUniqueId id;
  if (ncclResult_t r = api.ncclGetUniqueId(&id); r != ncclSuccess)
    return nccl_error(api, "ncclGetUniqueId", r);
  return join(api, id, 0, 1, timeout_s);
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::join(const NcclApi& api, const ncclUniqueId& id,
                                                          int rank, int world, double timeout_s) {
  const std::string what = absl::StrCat("ncclCommInitRankConfig (rank ", rank, " of ", world, ")");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = api.ncclCommInitRankConfig(&comm, world, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) api.ncclCommAbort(comm);
    return nccl_error(api, what, r);
  }
  // 1. Poll the init's state until it leaves ncclInProgress, sleeping a
  //    little longer each time (up to 10 ms), for at most timeout_s.
  // 2. An error, or the deadline: abort the half-made communicator.
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(50);
  ncclResult_t state = r;
  while (state == ncclInProgress) {
    if (ncclResult_t polled = api.ncclCommGetAsyncError(comm, &state); polled != ncclSuccess)
      state = polled;
    if (state != ncclInProgress) break;
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      api.ncclCommAbort(comm);
      return absl::DeadlineExceededError(absl::StrCat(
          "nccl: ", what, " not done within ", timeout_s,
          " s (MSTEP_DIST_TIMEOUT): a rank that died, hangs or never makes its NCCL "
          "communicator stalls the others; the communicator was aborted, end the job"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  if (state != ncclSuccess) {
    api.ncclCommAbort(comm);
    return absl::InternalError(absl::StrCat("nccl: ", what, " failed: ",
                                            describe_nccl_result(api, state),
                                            "; the communicator was aborted"));
  }
  return std::unique_ptr<NcclComm>(new NcclComm(api, comm, rank, world));
}

NcclComm::~NcclComm() {
  if (comm_) api_.ncclCommDestroy(comm_);
}

ncclResult_t NcclComm::async_error() const {
  if (comm_ == nullptr) return ncclInternalError;
  ncclResult_t async = ncclSuccess;
  if (ncclResult_t r = api_.ncclCommGetAsyncError(comm_, &async); r != ncclSuccess) return r;
  return async;
}

void NcclComm::abort() {
  if (comm_ == nullptr) return;
  api_.ncclCommAbort(comm_);
  comm_ = nullptr;
}

absl::Status issue_nccl_call(const NcclApi& api, const NcclComm& comm, const NcclCall& c,
                             const void* in, void* out, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  ncclResult_t r = ncclSuccess;
  switch (c.op) {
    case OpKind::all_reduce:
      r = api.ncclAllReduce(in, out, c.count, c.datatype, c.reduce, comm.get(), s);
      break;
    case OpKind::all_gather:
      r = api.ncclAllGather(in, out, c.count, c.datatype, comm.get(), s);
      break;
    case OpKind::broadcast:
      r = api.ncclBroadcast(in, out, c.count, c.datatype, c.root, comm.get(), s);
      break;
    case OpKind::reduce_scatter:
      r = api.ncclReduceScatter(in, out, c.count, c.datatype, c.reduce, comm.get(), s);
      break;
    default:
      return absl::InternalError("nccl: not a collective");
  }
  if (r != ncclSuccess)
    return nccl_error(api, absl::StrCat("mstep.", cuda_collective_name(c.op)), r);
  return absl::OkStatus();
}

}  // namespace mstep::cuda
