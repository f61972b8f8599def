// A stand-in libnccl.so.2 for the NCCL layer's tests (lib/backends/cuda/
// NcclApi.h, dlopen'ed by path): every call is appended to a log, one line
// each, that the test reads through mstep_fake_nccl_log(); no GPU, no
// transfer. A world of one copies nothing either: the log is what is checked.
// A test may also get each collective's line through a hook (to interleave
// it with the fake driver's calls), make the next collective fail, and make
// the next non-blocking communicator init take some polls, fail or never
// end (mstep_fake_nccl_set_init).
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

namespace {
std::string g_log;
int g_comms = 0;
void (*g_hook)(const char* fn, void* stream, const char* line) = nullptr;
ncclResult_t g_fail_next = ncclSuccess;
ncclResult_t g_async_error = ncclSuccess;
// The next ncclCommInitRankConfig: how many polls of ncclCommGetAsyncError
// answer ncclInProgress (-1: every one, an init that never ends), and
// what the init ends with.
int g_init_polls = 0;
ncclResult_t g_init_result = ncclSuccess;
ncclComm_t g_initializing = nullptr;

void log_line(const char* fn, const void* in, const void* out, size_t count, int type, int op,
              int root, ncclComm_t comm, cudaStream_t stream) {
  char line[256];
  std::snprintf(line, sizeof(line), "%s in=%p out=%p count=%zu type=%d op=%d root=%d comm=%p stream=%p\n",
                fn, in, out, count, type, op, root, static_cast<void*>(comm), static_cast<void*>(stream));
  g_log += line;
  if (g_hook) g_hook(fn, static_cast<void*>(stream), line);
}

/// The result of the collective being logged: g_fail_next once.
ncclResult_t result() { return std::exchange(g_fail_next, ncclSuccess); }
}  // namespace

extern "C" {

const char* mstep_fake_nccl_log() { return g_log.c_str(); }
void mstep_fake_nccl_clear() { g_log.clear(); }
void mstep_fake_nccl_set_hook(void (*hook)(const char*, void*, const char*)) { g_hook = hook; }
void mstep_fake_nccl_fail_next(int result) { g_fail_next = static_cast<ncclResult_t>(result); }
void mstep_fake_nccl_set_async_error(int result) { g_async_error = static_cast<ncclResult_t>(result); }
void mstep_fake_nccl_set_init(int polls, int result) {
  g_init_polls = polls;
  g_init_result = static_cast<ncclResult_t>(result);
}

ncclResult_t ncclGetVersion(int* version) {
  *version = 22805;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t) { return "fake error"; }
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 7, sizeof(*id));
  g_log += "ncclGetUniqueId\n";
  return ncclSuccess;
}
// Non-blocking when config->blocking is 0: ncclInProgress until the
// polls set by mstep_fake_nccl_set_init are used up (one init at a time).
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  *comm = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0x1000 + ++g_comms));
  char line[128];
  // The id's first byte: 7 when it is one ncclGetUniqueId made.
  std::snprintf(line, sizeof(line), "ncclCommInitRankConfig nranks=%d rank=%d id=%d blocking=%d\n",
                nranks, rank, static_cast<int>(static_cast<unsigned char>(id.internal[0])),
                config->blocking);
  g_log += line;
  if (config->blocking != 0 || g_init_polls == 0) {
    g_init_polls = 0;
    return std::exchange(g_init_result, ncclSuccess);
  }
  g_initializing = *comm;
  return ncclInProgress;
}
ncclResult_t ncclCommDestroy(ncclComm_t) {
  g_log += "ncclCommDestroy\n";
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == g_initializing) g_initializing = nullptr, g_init_polls = 0;
  g_log += "ncclCommAbort\n";
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async) {
  if (comm != nullptr && comm == g_initializing) {
    g_log += "ncclCommGetAsyncError\n";
    if (g_init_polls != 0) {
      if (g_init_polls > 0) --g_init_polls;
      *async = ncclInProgress;
      return ncclSuccess;
    }
    g_initializing = nullptr;
    *async = std::exchange(g_init_result, ncclSuccess);
    return ncclSuccess;
  }
  *async = g_async_error;
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclAllReduce", in, out, count, type, op, -1, comm, stream);
  return result();
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclAllGather", in, out, count, type, -1, -1, comm, stream);
  return result();
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclBroadcast", in, out, count, type, -1, root, comm, stream);
  return result();
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclReduceScatter", in, out, count, type, op, -1, comm, stream);
  return result();
}

}  // extern "C"
