// NCCL (NcclApi.h): the loader, the planning of one call per collective
// node and its issue on a stream.
#include "lib/backends/cuda/NcclApi.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

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

/// The op's name without lib/ir (this file is also linked without it, in
/// the GPU check's binary).
absl::string_view collective_name(OpKind op) {
  switch (op) {
    case OpKind::all_reduce: return "all_reduce";
    case OpKind::all_gather: return "all_gather";
    case OpKind::broadcast: return "broadcast";
    case OpKind::reduce_scatter: return "reduce_scatter";
    default: return "(not a collective)";
  }
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
    if (api->version < 21000)
      return unavailable(absl::StrCat(path, " is NCCL ", api->version,
                                      "; mstep needs 2.10 or newer (ncclAvg)"));
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

absl::StatusOr<NcclCall> plan_nccl_call(OpKind op, int64_t reduce_code, int64_t root, int64_t dim,
                                        const TensorType& input, int world_size) {
  NcclCall call;
  call.op = op;
  call.root = static_cast<int>(root);
  const bool reduces = op == OpKind::all_reduce || op == OpKind::reduce_scatter;
  switch (input.dtype) {
    case DType::f32: call.datatype = ncclFloat32; break;
    case DType::f64: call.datatype = ncclFloat64; break;
    case DType::f16: call.datatype = ncclFloat16; break;
    case DType::bf16: call.datatype = ncclBfloat16; break;
    case DType::i32: call.datatype = ncclInt32; break;
    case DType::i64: call.datatype = ncclInt64; break;
    case DType::boolean:
      if (reduces)
        return absl::UnimplementedError(absl::StrCat("nccl: mstep.", collective_name(op), " of bool"));
      call.datatype = ncclUint8;
      break;
  }
  switch (reduce_code) {
    case 0: call.reduce = ncclSum; break;
    case 1: call.reduce = ncclAvg; break;
    case 2: call.reduce = ncclMax; break;
    case 3: call.reduce = ncclMin; break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("nccl: reduce_op ", reduce_code));
  }
  call.count = static_cast<size_t>(input.numel());
  if (op == OpKind::all_gather || op == OpKind::reduce_scatter) {
    for (int64_t d = 0; d < dim; ++d)
      if (input.shape[d] != 1)
        return absl::UnimplementedError(absl::StrCat(
            "nccl: mstep.", collective_name(op), " along dim ", dim, " of ", input.to_string(),
            " is not yet lowered (one NCCL call concatenates whole buffers: only dim 0, or dims "
            "of size 1 before it)"));
    if (op == OpKind::reduce_scatter) call.count /= static_cast<size_t>(world_size);
  }
  return call;
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::world_of_one(const NcclApi& api) {
  ncclUniqueId id;
  if (ncclResult_t r = api.ncclGetUniqueId(&id); r != ncclSuccess)
    return nccl_error(api, "ncclGetUniqueId", r);
  return join(api, id, 0, 1);
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::join(const NcclApi& api, const ncclUniqueId& id,
                                                          int rank, int world) {
  ncclComm_t comm = nullptr;
  if (ncclResult_t r = api.ncclCommInitRank(&comm, world, id, rank); r != ncclSuccess)
    return nccl_error(api, absl::StrCat("ncclCommInitRank (rank ", rank, " of ", world, ")"), r);
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
      return absl::InternalError(absl::StrCat("nccl: not a collective: ", collective_name(c.op)));
  }
  if (r != ncclSuccess) return nccl_error(api, absl::StrCat("mstep.", collective_name(c.op)), r);
  return absl::OkStatus();
}

}  // namespace mstep::cuda
