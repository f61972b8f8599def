// FakeCudaDriver: each fake function records its call and does the
// least that keeps the code above it honest (copies copy, allocations
// allocate host memory, library loads check the image's architecture).
#include "test/cuda/FakeCudaDriver.h"
#include "test/cuda/PtxEntries.h"

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <cstring>

#include "absl/strings/match.h"
#include "lib/backends/cuda/CudaModule.h"

namespace mstep::cuda::testing {
namespace {

FakeCudaDriver* g_fake = nullptr;

// Stream capture: the stream being captured (one at a time), the nodes
// recorded so far, and why the capture became invalid (a refused call).
CUstream g_capturing = nullptr;
std::vector<FakeCall> g_nodes;
CUresult g_capture_broken = CUDA_SUCCESS;
/// A graph and an instantiated graph: their nodes, in stream order.
struct FakeGraph {
  std::vector<FakeCall> nodes;
  /// An instantiated graph: the graph it came from, whose node handles
  /// (pointers to its FakeCalls) name its nodes by position.
  const FakeGraph* source = nullptr;
};
int g_graph_launches = 0;

/// The call's record: in the graph being captured when it is queued on the
/// capturing stream, else in the log.
FakeCall& record(const char* name, CUstream stream = nullptr) {
  if (stream != nullptr && stream == g_capturing) {
    g_nodes.push_back({.name = name, .stream = stream});
    return g_nodes.back();
  }
  g_fake->calls.push_back({.name = name, .stream = stream});
  return g_fake->calls.back();
}
/// A call CUDA refuses while this thread captures (thread-local mode): it
/// fails and invalidates the capture.
bool refused_in_capture(const char* name) {
  if (g_capturing == nullptr) return false;
  record(name).args.push_back("refused: capturing");
  g_capture_broken = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return true;
}

/// A kernel the fake knows: its name and parameter layout.
struct FakeKernelInfo {
  const char* name;
  std::vector<CudaKernelParam> params;
  std::string owned_name;  // the storage of `name` for added kernels
  CUlibrary library = nullptr;  // the library that got it (added kernels)
};
const std::vector<FakeKernelInfo>& known_kernels() {
  static const std::vector<FakeKernelInfo> kernels = {
      {"saxpy", {{0, 4}, {4, 4}, {8, 8}, {16, 8}}}, // int n, float a, const float*, float*
      {"empty_kernel", {}},
      {"write_out_of_bounds", {{0, 8}}}}; // float*
  return kernels;
}
/// Kernels a test added (add_kernel); a deque, so their addresses hold.
std::deque<FakeKernelInfo>& added_kernels() {
  static std::deque<FakeKernelInfo> kernels;
  return kernels;
}
// CUkernel and CUfunction handles are pointers to the kernel's info.
const FakeKernelInfo* info_of(const void* handle) {
  return static_cast<const FakeKernelInfo*>(handle);
}

// A fake handle for contexts, streams, events and libraries.
template <typename Handle> Handle new_handle() {
  static uintptr_t next = 0x1000;
  next += 0x10;
  return reinterpret_cast<Handle>(next);
}
CUcontext g_context = nullptr;
/// The size of each live cuMemAlloc, for cuMemFree and device_bytes.
std::map<CUdeviceptr, size_t> g_device_sizes;
/// The sticky error, once a launch has faulted (see device_fault).
CUresult g_sticky = CUDA_SUCCESS;

CUresult get_error_name(CUresult result, const char** name) {
  switch (result) {
  case CUDA_SUCCESS:
    *name = "CUDA_SUCCESS";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NO_DEVICE:
    *name = "CUDA_ERROR_NO_DEVICE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    *name = "CUDA_ERROR_NO_BINARY_FOR_GPU";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_PTX:
    *name = "CUDA_ERROR_INVALID_PTX";
    return CUDA_SUCCESS;
  case CUDA_ERROR_NOT_FOUND:
    *name = "CUDA_ERROR_NOT_FOUND";
    return CUDA_SUCCESS;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *name = "CUDA_ERROR_OUT_OF_MEMORY";
    return CUDA_SUCCESS;
  case CUDA_ERROR_INVALID_VALUE:
    *name = "CUDA_ERROR_INVALID_VALUE";
    return CUDA_SUCCESS;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    return CUDA_SUCCESS;
  case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
    *name = "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE";
    return CUDA_SUCCESS;
  default:
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}
CUresult get_error_string(CUresult result, const char** text) {
  *text = result == CUDA_ERROR_NO_BINARY_FOR_GPU ? "no kernel image is available for execution on "
                                                   "the device"
                                                 : "fake driver error";
  return CUDA_SUCCESS;
}
CUresult init(unsigned) {
  record("cuInit");
  return g_fake->init_result;
}
CUresult driver_get_version(int* version) {
  *version = g_fake->driver_version;
  return CUDA_SUCCESS;
}
CUresult device_get(CUdevice* device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult device_get_count(int* count) {
  *count = g_fake->device_count;
  return CUDA_SUCCESS;
}
CUresult device_get_name(char* name, int length, CUdevice) {
  std::strncpy(name, "Fake GPU", length);
  return CUDA_SUCCESS;
}
CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = g_fake->compute_major;
    break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = g_fake->compute_minor;
    break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    *value = 132;
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult device_total_mem(size_t* bytes, CUdevice) {
  *bytes = size_t{80} << 30;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_retain(CUcontext* context, CUdevice) {
  record("cuDevicePrimaryCtxRetain");
  if (g_context == nullptr) g_context = new_handle<CUcontext>();
  *context = g_context;
  ++g_fake->retained_contexts;
  return CUDA_SUCCESS;
}
CUresult primary_ctx_release(CUdevice) {
  record("cuDevicePrimaryCtxRelease");
  --g_fake->retained_contexts;
  return CUDA_SUCCESS;
}
CUresult ctx_set_current(CUcontext) { return CUDA_SUCCESS; }
CUresult stream_create(CUstream* stream, unsigned) {
  *stream = new_handle<CUstream>();
  record("cuStreamCreate", *stream);
  return CUDA_SUCCESS;
}
CUresult stream_destroy(CUstream stream) {
  record("cuStreamDestroy", stream);
  return CUDA_SUCCESS;
}
CUresult stream_synchronize(CUstream stream) {
  if (refused_in_capture("cuStreamSynchronize")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  record("cuStreamSynchronize", stream);
  return g_sticky;
}
CUresult stream_query(CUstream stream) {
  if (refused_in_capture("cuStreamQuery")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return g_sticky;
}
CUresult event_create(CUevent* event, unsigned) {
  *event = new_handle<CUevent>();
  return CUDA_SUCCESS;
}
/// Per event: the kernel launches made before its last record (its
/// "time": elapsed time is 1 ms per launch between two events).
std::map<CUevent, size_t> g_event_launches;
/// Kernel launches logged so far (a counter, not a scan of the log: a lazy
/// step records an event per plan step, and the host bench times this fake).
size_t g_logged_launches = 0;
CUresult event_record(CUevent event, CUstream stream) {
  record("cuEventRecord", stream);
  g_event_launches[event] = g_logged_launches;
  return CUDA_SUCCESS;
}
CUresult event_query(CUevent) {
  if (refused_in_capture("cuEventQuery")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (g_sticky == CUDA_SUCCESS && g_fake->work_hangs) return CUDA_ERROR_NOT_READY;
  return g_sticky;
}
CUresult event_synchronize(CUevent) {
  if (refused_in_capture("cuEventSynchronize")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  record("cuEventSynchronize");
  return g_sticky;
}
CUresult event_elapsed_time(float* ms, CUevent start, CUevent end) {
  *ms = static_cast<float>(g_event_launches[end]) - static_cast<float>(g_event_launches[start]);
  return CUDA_SUCCESS;
}
CUresult event_destroy(CUevent) { return CUDA_SUCCESS; }
CUresult mem_alloc(CUdeviceptr* pointer, size_t bytes) {
  if (g_sticky != CUDA_SUCCESS) return g_sticky;
  if (refused_in_capture("cuMemAlloc")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes > g_fake->device_memory - g_fake->device_bytes) {
    record("cuMemAlloc").bytes = bytes;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pointer = reinterpret_cast<CUdeviceptr>(std::malloc(bytes));
  g_device_sizes[*pointer] = bytes;
  g_fake->device_bytes += bytes;
  ++g_fake->live_device;
  FakeCall& call = record("cuMemAlloc");
  call.target = *pointer;
  call.bytes = bytes;
  return CUDA_SUCCESS;
}
CUresult mem_free(CUdeviceptr pointer) {
  auto it = g_device_sizes.find(pointer);
  if (it == g_device_sizes.end()) {
    std::fprintf(stderr, "FakeCudaDriver: cuMemFree of %p, not allocated (a double free)\n",
                 reinterpret_cast<void*>(pointer));
    std::abort();
  }
  g_fake->device_bytes -= it->second;
  g_device_sizes.erase(it);
  record("cuMemFree").target = pointer;
  std::free(reinterpret_cast<void*>(pointer));
  --g_fake->live_device;
  return CUDA_SUCCESS;
}
CUresult mem_host_alloc(void** pointer, size_t bytes, unsigned) {
  *pointer = std::malloc(bytes);
  ++g_fake->live_pinned;
  FakeCall& call = record("cuMemHostAlloc");
  call.target = reinterpret_cast<uintptr_t>(*pointer);
  call.bytes = bytes;
  return CUDA_SUCCESS;
}
CUresult mem_free_host(void* pointer) {
  std::free(pointer);
  --g_fake->live_pinned;
  return CUDA_SUCCESS;
}
CUresult copy(const char* name, uintptr_t target, uintptr_t source, size_t bytes, CUstream stream) {
  if (g_sticky != CUDA_SUCCESS) return g_sticky;
  // Captured: a copy node, done when the graph is launched.
  if (stream != nullptr && stream == g_capturing && g_capture_broken != CUDA_SUCCESS)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (stream == nullptr || stream != g_capturing)
    std::memcpy(reinterpret_cast<void*>(target), reinterpret_cast<const void*>(source), bytes);
  FakeCall& call = record(name, stream);
  call.target = target;
  call.source = source;
  call.bytes = bytes;
  return CUDA_SUCCESS;
}
CUresult memcpy_htod(CUdeviceptr target, const void* source, size_t bytes, CUstream stream) {
  return copy("cuMemcpyHtoDAsync", target, reinterpret_cast<uintptr_t>(source), bytes, stream);
}
CUresult memcpy_dtoh(void* target, CUdeviceptr source, size_t bytes, CUstream stream) {
  return copy("cuMemcpyDtoHAsync", reinterpret_cast<uintptr_t>(target), source, bytes, stream);
}
CUresult memcpy_dtod(CUdeviceptr target, CUdeviceptr source, size_t bytes, CUstream stream) {
  return copy("cuMemcpyDtoDAsync", target, source, bytes, stream);
}
/// The JIT option value for `wanted`, or null.
void* option(CUjit_option* options, void** values, unsigned count, CUjit_option wanted) {
  for (unsigned i = 0; i < count; ++i)
    if (options[i] == wanted) return values[i];
  return nullptr;
}
/// kernels_from_ptx: the entries of `ptx` known to `library`.
void add_ptx_entries(absl::string_view ptx, CUlibrary library) {
  for (PtxEntry& entry : ptx_entries(ptx)) {
    FakeKernelInfo info{"", std::move(entry.params)};
    info.owned_name = std::move(entry.name);
    info.library = library;
    added_kernels().push_back(std::move(info));
    added_kernels().back().name = added_kernels().back().owned_name.c_str();
  }
}
CUresult library_load_data(CUlibrary* library, const void* code, CUjit_option* options,
                           void** values, unsigned count, CUlibraryOption*, void**, unsigned) {
  absl::string_view image(static_cast<const char*>(code));
  bool elf = absl::StartsWith(image, "\x7f"
                                     "ELF");
  FakeCall& call = record("cuLibraryLoadData");
  call.kernel = elf ? "cubin" : "ptx";
  if (elf) {
    // The whole cubin (it has NUL bytes): its header says its architecture.
    std::string arch = describe_cubin_arch(absl::string_view(static_cast<const char*>(code), 64));
    std::string device = "sm_" + std::to_string(g_fake->compute_major * 10 + g_fake->compute_minor);
    if (arch != device) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  } else if (!g_fake->ptx_error.empty()) {
    auto* log = static_cast<char*>(option(options, values, count, CU_JIT_ERROR_LOG_BUFFER));
    size_t size = reinterpret_cast<uintptr_t>(
        option(options, values, count, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES));
    if (log != nullptr && size > 0) std::strncpy(log, g_fake->ptx_error.c_str(), size);
    return CUDA_ERROR_INVALID_PTX;
  }
  *library = new_handle<CUlibrary>();
  if (!elf && g_fake->kernels_from_ptx) add_ptx_entries(image, *library);
  return CUDA_SUCCESS;
}
CUresult library_unload(CUlibrary) {
  record("cuLibraryUnload");
  return CUDA_SUCCESS;
}
CUresult library_get_kernel(CUkernel* kernel, CUlibrary library, const char* name) {
  // Kernels of one name in several libraries (a plan's per-launch kernels
  // of one op): the libraries get the added ones in the order they were
  // added; once each is taken, the last one serves every other library.
  FakeKernelInfo* found = nullptr;
  for (FakeKernelInfo& info : added_kernels()) {
    if (std::strcmp(info.name, name) != 0) continue;
    if (info.library == library) {
      found = &info;
      break;
    }
    if (info.library == nullptr) {
      info.library = library;
      found = &info;
      break;
    }
    found = &info;
  }
  if (found != nullptr) {
    *kernel = reinterpret_cast<CUkernel>(found);
    return CUDA_SUCCESS;
  }
  for (const FakeKernelInfo& info : known_kernels())
    if (std::strcmp(info.name, name) == 0) {
      *kernel = reinterpret_cast<CUkernel>(const_cast<FakeKernelInfo*>(&info));
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
CUresult kernel_get_function(CUfunction* function, CUkernel kernel) {
  *function = reinterpret_cast<CUfunction>(kernel);
  return CUDA_SUCCESS;
}
CUresult kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset, size_t* size) {
  const FakeKernelInfo* info = info_of(kernel);
  if (index >= info->params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = info->params[index].offset;
  *size = info->params[index].size;
  return CUDA_SUCCESS;
}
CUresult func_get_attribute(int* value, CUfunction_attribute, CUfunction) {
  *value = 0;
  return CUDA_SUCCESS;
}
CUresult launch_kernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared, CUstream stream, void** params,
                       void** extra) {
  if (g_sticky != CUDA_SUCCESS) return g_sticky;
  if (stream != nullptr && stream == g_capturing && g_capture_broken != CUDA_SUCCESS)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  const FakeKernelInfo* info = info_of(function);
  FakeCall& call = record("cuLaunchKernel", stream);
  if (stream == nullptr || stream != g_capturing) ++g_logged_launches;
  if (g_fake->device_fault != CUDA_SUCCESS) g_sticky = std::exchange(g_fake->device_fault, CUDA_SUCCESS);
  call.kernel = info->name;
  call.function = info;  // kernels of one name in several libraries differ
  call.grid[0] = gx, call.grid[1] = gy, call.grid[2] = gz;
  call.block[0] = bx, call.block[1] = by, call.block[2] = bz;
  call.shared_bytes = shared;
  // As the driver does: each parameter's bytes read through its pointer.
  for (size_t i = 0; i < info->params.size(); ++i)
    call.args.emplace_back(static_cast<const char*>(params[i]), info->params[i].size);
  if (g_fake->on_kernel && (stream == nullptr || stream != g_capturing) &&
      g_fake->launch_result == CUDA_SUCCESS)
    g_fake->on_kernel(FakeCall(call));
  return std::exchange(g_fake->launch_result, CUDA_SUCCESS);
}

CUresult stream_begin_capture(CUstream stream, CUstreamCaptureMode mode) {
  record("cuStreamBeginCapture", nullptr).stream = stream;
  if (g_capturing != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) return CUDA_ERROR_INVALID_VALUE;
  g_capturing = stream;
  g_nodes.clear();
  g_capture_broken = CUDA_SUCCESS;
  return CUDA_SUCCESS;
}
CUresult stream_end_capture(CUstream stream, CUgraph* graph) {
  record("cuStreamEndCapture", nullptr).stream = stream;
  if (stream != g_capturing) return CUDA_ERROR_ILLEGAL_STATE;
  g_capturing = nullptr;
  g_fake->last_captured = std::exchange(g_nodes, {});
  *graph = nullptr;
  if (g_capture_broken != CUDA_SUCCESS) return std::exchange(g_capture_broken, CUDA_SUCCESS);
  *graph = reinterpret_cast<CUgraph>(new FakeGraph{g_fake->last_captured});
  ++g_fake->live_graphs;
  return CUDA_SUCCESS;
}
CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status) {
  *status = stream == g_capturing ? (g_capture_broken != CUDA_SUCCESS
                                         ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                         : CU_STREAM_CAPTURE_STATUS_ACTIVE)
                                  : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult graph_instantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  record("cuGraphInstantiate");
  if (refused_in_capture("cuGraphInstantiate")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  const FakeGraph* source = reinterpret_cast<FakeGraph*>(graph);
  *exec = reinterpret_cast<CUgraphExec>(new FakeGraph{source->nodes, source});
  ++g_fake->live_graph_execs;
  return CUDA_SUCCESS;
}
CUresult graph_launch(CUgraphExec exec, CUstream stream) {
  if (g_sticky != CUDA_SUCCESS) return g_sticky;
  record("cuGraphLaunch", stream);
  // A fault in one of the graph's kernels: accepted, then sticky.
  if (g_fake->device_fault != CUDA_SUCCESS) g_sticky = std::exchange(g_fake->device_fault, CUDA_SUCCESS);
  const int launch = ++g_graph_launches;
  if (!g_fake->run_graph_nodes) return CUDA_SUCCESS;
  for (const FakeCall& node : reinterpret_cast<FakeGraph*>(exec)->nodes) {
    if (node.name != "cuLaunchKernel" && node.bytes > 0)  // a copy node: copy now
      std::memcpy(reinterpret_cast<void*>(node.target), reinterpret_cast<const void*>(node.source),
                  node.bytes);
    g_fake->calls.push_back(node);
    g_fake->calls.back().graph_launch = launch;
    if (node.name != "cuLaunchKernel") continue;
    ++g_logged_launches;  // logged as the launches it replays
    if (g_fake->on_kernel) g_fake->on_kernel(FakeCall(node));
  }
  return CUDA_SUCCESS;
}
/// As the driver: the new graph's node parameters replace the exec's when
/// the two have the same nodes in the same order (the kinds and kernels).
CUresult graph_exec_update(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  record("cuGraphExecUpdate");
  auto& target = reinterpret_cast<FakeGraph*>(exec)->nodes;
  const auto& source = reinterpret_cast<FakeGraph*>(graph)->nodes;
  bool same = target.size() == source.size();
  for (size_t i = 0; same && i < target.size(); ++i)
    same = target[i].name == source[i].name && target[i].kernel == source[i].kernel;
  *info = {};
  if (!same) {
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  target = source;
  return CUDA_SUCCESS;
}
// Node handles are pointers to a graph's FakeCalls.
const FakeCall& node_of(CUgraphNode node) { return *reinterpret_cast<const FakeCall*>(node); }
/// The exec's copy of `node` (a node of the graph it came from).
FakeCall& exec_node(CUgraphExec exec, CUgraphNode node) {
  FakeGraph& graph = *reinterpret_cast<FakeGraph*>(exec);
  return graph.nodes[&node_of(node) - graph.source->nodes.data()];
}
const FakeKernelInfo* kernel_named(const std::string& name) {
  for (const FakeKernelInfo& info : added_kernels())
    if (info.name == name) return &info;
  for (const FakeKernelInfo& info : known_kernels())
    if (info.name == name) return &info;
  return nullptr;
}
CUresult graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) {
  std::vector<FakeCall>& all = reinterpret_cast<FakeGraph*>(graph)->nodes;
  if (nodes != nullptr)
    for (size_t i = 0; i < std::min(*count, all.size()); ++i)
      nodes[i] = reinterpret_cast<CUgraphNode>(&all[i]);
  *count = all.size();
  return CUDA_SUCCESS;
}
/// Kernels and copies as themselves; a stand-in library's call
/// (record_stream_call) as a memset node: a kind CudaGraph does not read,
/// as a library's node may be.
CUresult graph_node_get_type(CUgraphNode node, CUgraphNodeType* type) {
  const std::string& name = node_of(node).name;
  *type = name == "cuLaunchKernel"              ? CU_GRAPH_NODE_TYPE_KERNEL
          : name.rfind("cuMemcpy", 0) == 0 ? CU_GRAPH_NODE_TYPE_MEMCPY
                                                : CU_GRAPH_NODE_TYPE_MEMSET;
  return CUDA_SUCCESS;
}
CUresult graph_kernel_node_get_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  const FakeCall& call = node_of(node);
  // As the driver: pointers to its own copies of the arguments.
  static thread_local std::vector<void*> args;
  args.clear();
  for (const std::string& arg : call.args) args.push_back(const_cast<char*>(arg.data()));
  *params = {};
  params->func = reinterpret_cast<CUfunction>(const_cast<FakeKernelInfo*>(
      call.function != nullptr ? info_of(call.function) : kernel_named(call.kernel)));
  params->gridDimX = call.grid[0], params->gridDimY = call.grid[1], params->gridDimZ = call.grid[2];
  params->blockDimX = call.block[0], params->blockDimY = call.block[1];
  params->blockDimZ = call.block[2];
  params->sharedMemBytes = call.shared_bytes;
  params->kernelParams = args.data();
  return CUDA_SUCCESS;
}
CUresult graph_memcpy_node_get_params(CUgraphNode node, CUDA_MEMCPY3D* params) {
  const FakeCall& call = node_of(node);
  *params = {};
  const bool from_host = call.name == "cuMemcpyHtoDAsync", to_host = call.name == "cuMemcpyDtoHAsync";
  params->srcMemoryType = from_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  params->dstMemoryType = to_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (from_host) params->srcHost = reinterpret_cast<const void*>(call.source);
  else params->srcDevice = call.source;
  if (to_host) params->dstHost = reinterpret_cast<void*>(call.target);
  else params->dstDevice = call.target;
  params->WidthInBytes = call.bytes, params->Height = 1, params->Depth = 1;
  return CUDA_SUCCESS;
}
CUresult func_get_param_info(CUfunction function, size_t index, size_t* offset, size_t* size) {
  return kernel_get_param_info(reinterpret_cast<CUkernel>(function), index, offset, size);
}
/// Logged as "cuGraphExecKernelNodeSetParams" with the kernel and its new
/// arguments; the exec's node runs with them from the next launch.
CUresult graph_exec_kernel_node_set_params(CUgraphExec exec, CUgraphNode node,
                                           const CUDA_KERNEL_NODE_PARAMS* params) {
  FakeCall& target = exec_node(exec, node);
  const FakeKernelInfo* info = info_of(params->func);
  if (info->name != target.kernel) return CUDA_ERROR_INVALID_VALUE;  // another kernel
  for (size_t i = 0; i < info->params.size(); ++i)
    target.args[i].assign(static_cast<const char*>(params->kernelParams[i]), info->params[i].size);
  FakeCall& call = record("cuGraphExecKernelNodeSetParams");
  call.kernel = target.kernel;
  call.args = target.args;
  return CUDA_SUCCESS;
}
/// Logged as "cuGraphExecMemcpyNodeSetParams" with the copy's new ends.
CUresult graph_exec_memcpy_node_set_params(CUgraphExec exec, CUgraphNode node,
                                           const CUDA_MEMCPY3D* params, CUcontext) {
  FakeCall& target = exec_node(exec, node);
  if (params->srcMemoryType == CU_MEMORYTYPE_DEVICE) target.source = params->srcDevice;
  if (params->dstMemoryType == CU_MEMORYTYPE_DEVICE) target.target = params->dstDevice;
  FakeCall& call = record("cuGraphExecMemcpyNodeSetParams");
  call.target = target.target;
  call.source = target.source;
  call.bytes = target.bytes;
  return CUDA_SUCCESS;
}
CUresult graph_destroy(CUgraph graph) {
  delete reinterpret_cast<FakeGraph*>(graph);
  --g_fake->live_graphs;
  return CUDA_SUCCESS;
}
CUresult graph_exec_destroy(CUgraphExec exec) {
  record("cuGraphExecDestroy");
  delete reinterpret_cast<FakeGraph*>(exec);
  --g_fake->live_graph_execs;
  return CUDA_SUCCESS;
}

} // namespace

FakeCudaDriver::FakeCudaDriver() {
  g_fake = this;
  g_sticky = CUDA_SUCCESS;
  g_capturing = nullptr;
  g_nodes.clear();
  g_capture_broken = CUDA_SUCCESS;
  g_graph_launches = 0;
}
FakeCudaDriver::~FakeCudaDriver() {
  g_fake = nullptr;
  added_kernels().clear();
  g_device_sizes.clear();
}
FakeCudaDriver& FakeCudaDriver::current() { return *g_fake; }

FakeCall& FakeCudaDriver::record_stream_call(const std::string& name, CUstream stream,
                                             std::string detail) {
  FakeCall& call = record(name.c_str(), stream);
  call.args.push_back(std::move(detail));
  return call;
}

void FakeCudaDriver::add_kernel(const std::string& name, size_t pointer_params) {
  std::vector<CudaKernelParam> params;
  for (size_t i = 0; i < pointer_params; ++i) params.push_back({8 * i, 8});
  add_kernel(name, std::move(params));
}

void FakeCudaDriver::add_kernel(const std::string& name, std::vector<CudaKernelParam> params) {
  FakeKernelInfo info{"", std::move(params)};
  info.owned_name = name;
  info.name = nullptr;
  added_kernels().push_back(std::move(info));
  added_kernels().back().name = added_kernels().back().owned_name.c_str();
}

CudaDriverApi FakeCudaDriver::api() const {
  CudaDriverApi api;
  api.cuGetErrorName = get_error_name;
  api.cuGetErrorString = get_error_string;
  api.cuInit = init;
  api.cuDriverGetVersion = driver_get_version;
  api.cuDeviceGet = device_get;
  api.cuDeviceGetCount = device_get_count;
  api.cuDeviceGetName = device_get_name;
  api.cuDeviceGetAttribute = device_get_attribute;
  api.cuDeviceTotalMem = device_total_mem;
  api.cuDevicePrimaryCtxRetain = primary_ctx_retain;
  api.cuDevicePrimaryCtxRelease = primary_ctx_release;
  api.cuCtxSetCurrent = ctx_set_current;
  api.cuStreamCreate = stream_create;
  api.cuStreamDestroy = stream_destroy;
  api.cuStreamSynchronize = stream_synchronize;
  api.cuStreamQuery = stream_query;
  api.cuEventCreate = event_create;
  api.cuEventRecord = event_record;
  api.cuEventQuery = event_query;
  api.cuEventSynchronize = event_synchronize;
  api.cuEventElapsedTime = event_elapsed_time;
  api.cuEventDestroy = event_destroy;
  api.cuMemAlloc = mem_alloc;
  api.cuMemFree = mem_free;
  api.cuMemHostAlloc = mem_host_alloc;
  api.cuMemFreeHost = mem_free_host;
  api.cuMemcpyHtoDAsync = memcpy_htod;
  api.cuMemcpyDtoHAsync = memcpy_dtoh;
  api.cuMemcpyDtoDAsync = memcpy_dtod;
  api.cuLibraryLoadData = library_load_data;
  api.cuLibraryUnload = library_unload;
  api.cuLibraryGetKernel = library_get_kernel;
  api.cuKernelGetFunction = kernel_get_function;
  api.cuKernelGetParamInfo = kernel_get_param_info;
  api.cuFuncGetAttribute = func_get_attribute;
  api.cuLaunchKernel = launch_kernel;
  api.cuStreamBeginCapture = stream_begin_capture;
  api.cuStreamEndCapture = stream_end_capture;
  api.cuStreamIsCapturing = stream_is_capturing;
  api.cuGraphInstantiateWithFlags = graph_instantiate;
  api.cuGraphLaunch = graph_launch;
  api.cuGraphExecUpdate = graph_exec_update;
  api.cuGraphDestroy = graph_destroy;
  api.cuGraphExecDestroy = graph_exec_destroy;
  api.cuFuncGetParamInfo = func_get_param_info;
  api.cuGraphGetNodes = graph_get_nodes;
  api.cuGraphNodeGetType = graph_node_get_type;
  api.cuGraphKernelNodeGetParams = graph_kernel_node_get_params;
  api.cuGraphMemcpyNodeGetParams = graph_memcpy_node_get_params;
  api.cuGraphExecKernelNodeSetParams = graph_exec_kernel_node_set_params;
  api.cuGraphExecMemcpyNodeSetParams = graph_exec_memcpy_node_set_params;
  return api;
}

std::shared_ptr<const CudaDriver> FakeCudaDriver::driver() const {
  auto driver = std::make_shared<CudaDriver>();
  driver->api = api();
  driver->info = {.driver_version = driver_version, .device_count = device_count};
  return driver;
}

std::vector<FakeCall> FakeCudaDriver::calls_named(const std::string& name) const {
  std::vector<FakeCall> found;
  for (const FakeCall& call : calls)
    if (call.name == name) found.push_back(call);
  return found;
}

} // namespace mstep::cuda::testing
