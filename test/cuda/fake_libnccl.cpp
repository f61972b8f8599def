// A stand-in libnccl.so.2 for the NCCL layer's tests (lib/backends/cuda/
// NcclApi.h, dlopen'ed by path): every call is appended to a log, one line
// each, that the test reads through mstep_fake_nccl_log(); no GPU, no
// transfer. A world of one copies nothing either: the log is what is checked.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {
std::string g_log;
int g_comms = 0;

void log_line(const char* fn, const void* in, const void* out, size_t count, int type, int op,
              int root, ncclComm_t comm, cudaStream_t stream) {
  char line[256];
  std::snprintf(line, sizeof(line), "%s in=%p out=%p count=%zu type=%d op=%d root=%d comm=%p stream=%p\n",
                fn, in, out, count, type, op, root, static_cast<void*>(comm), static_cast<void*>(stream));
  g_log += line;
}
}  // namespace

extern "C" {

const char* mstep_fake_nccl_log() { return g_log.c_str(); }
void mstep_fake_nccl_clear() { g_log.clear(); }

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
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = reinterpret_cast<ncclComm_t>(static_cast<uintptr_t>(0x1000 + ++g_comms));
  char line[96];
  std::snprintf(line, sizeof(line), "ncclCommInitRank nranks=%d rank=%d\n", nranks, rank);
  g_log += line;
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t) {
  g_log += "ncclCommDestroy\n";
  return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclAllReduce", in, out, count, type, op, -1, comm, stream);
  return ncclSuccess;
}
ncclResult_t ncclAllGather(const void* in, void* out, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclAllGather", in, out, count, type, -1, -1, comm, stream);
  return ncclSuccess;
}
ncclResult_t ncclBroadcast(const void* in, void* out, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclBroadcast", in, out, count, type, -1, root, comm, stream);
  return ncclSuccess;
}
ncclResult_t ncclReduceScatter(const void* in, void* out, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  log_line("ncclReduceScatter", in, out, count, type, op, -1, comm, stream);
  return ncclSuccess;
}

}  // extern "C"
