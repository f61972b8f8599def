// CudaGraph: see CudaGraph.h.
#include "lib/backends/cuda/CudaGraph.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

/// Work that a library queued (CudaExecutable's names for its cuBLASLt,
/// cuDNN and NCCL steps): its nodes may reach a buffer through more than
/// their parameters (a descriptor in device memory), so rebind() leaves a
/// move of a buffer such work uses to update().
bool is_library_work(absl::string_view what) {
  return absl::StartsWith(what, "cublasLt step") || absl::StartsWith(what, "cudnn") ||
         absl::StartsWith(what, "nccl");
}

/// Where `value` lies in a moved buffer: the same offset in its new one.
std::optional<CUdeviceptr> moved_to(CUdeviceptr value,
                                 absl::Span<const std::pair<BufferPtr, BufferPtr>> moved) {
  for (const auto& [from, to] : moved) {
    const CUdeviceptr base = CudaBackend::device_pointer(*from);
    if (value >= base && value - base < from->type().bytes())
      return CudaBackend::device_pointer(*to) + (value - base);
  }
  return std::nullopt;
}

} // namespace

absl::StatusOr<CUgraphExec> CudaGraph::instantiate(CUgraph graph) {
  const CudaDriverApi& api = backend_.context().api();
  CUgraphExec exec = nullptr;
  CUresult result = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
  if (result != CUDA_SUCCESS) api.cuGraphDestroy(graph);
  MSTEP_RETURN_IF_ERROR(check_cuda(api, result, "cuGraphInstantiateWithFlags",
                                   "instantiating the captured CUDA graph"));
  if (graph_ != nullptr) api.cuGraphDestroy(graph_);
  graph_ = graph;
  return exec;
}

void CudaGraph::note_work(const std::vector<CudaBackend::CapturedWork>& work) {
  std::vector<std::string> names;
  library_ranges_.clear();
  for (const CudaBackend::CapturedWork& w : work) {
    names.push_back(w.what);
    if (is_library_work(w.what))
      library_ranges_.insert(library_ranges_.end(), w.ranges.begin(), w.ranges.end());
  }
  has_library_work_ = std::ranges::any_of(work, [](const CudaBackend::CapturedWork& w) {
    return is_library_work(w.what);
  });
  describe(names);
}

bool CudaGraph::library_uses(const Buffer& buffer) const {
  const CUdeviceptr begin = CudaBackend::device_pointer(buffer);
  const CUdeviceptr end = begin + buffer.type().bytes();
  return std::ranges::any_of(library_ranges_, [&](const std::pair<CUdeviceptr, size_t>& r) {
    return r.first < end && begin < r.first + r.second;
  });
}

bool CudaGraph::read_patch_nodes() {
  const CudaDriverApi& api = backend_.context().api();
  patch_nodes_.clear();
  opaque_nodes_ = 0;
  if (api.cuFuncGetParamInfo == nullptr || api.cuGraphGetNodes == nullptr ||
      api.cuGraphNodeGetType == nullptr || api.cuGraphKernelNodeGetParams == nullptr ||
      api.cuGraphMemcpyNodeGetParams == nullptr || api.cuGraphExecKernelNodeSetParams == nullptr ||
      api.cuGraphExecMemcpyNodeSetParams == nullptr)
    return false;
  size_t count = 0;
  if (api.cuGraphGetNodes(graph_, nullptr, &count) != CUDA_SUCCESS) return false;
  std::vector<CUgraphNode> nodes(count);
  if (count > 0 && api.cuGraphGetNodes(graph_, nodes.data(), &count) != CUDA_SUCCESS) return false;
  // mstep's own work makes kernel and copy nodes only, all readable. A node
  // that is not (another kind, a kernel launched with `extra`) is a
  // library's: left out, since rebind() never moves a buffer library work
  // uses (library_uses). Without library work it turns patching off.
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    if (api.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS) return false;
    PatchNode patch;
    patch.node = node;
    bool readable = false;
    if (type == CU_GRAPH_NODE_TYPE_MEMCPY) {
      readable = api.cuGraphMemcpyNodeGetParams(node, &patch.copy) == CUDA_SUCCESS;
    } else if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
      patch.kernel = true;
      CUDA_KERNEL_NODE_PARAMS& p = patch.kernel_params;
      readable = api.cuGraphKernelNodeGetParams(node, &p) == CUDA_SUCCESS && p.extra == nullptr &&
                 (p.func != nullptr || p.kern != nullptr);
      // Each argument's bytes, as long as the kernel's layout says (by its
      // function, or by its library kernel where the node names only that).
      auto param_info = [&](size_t i, size_t* offset, size_t* size) {
        return p.func != nullptr ? api.cuFuncGetParamInfo(p.func, i, offset, size)
                                 : api.cuKernelGetParamInfo(p.kern, i, offset, size);
      };
      size_t offset = 0, size = 0;
      for (size_t i = 0; readable && param_info(i, &offset, &size) == CUDA_SUCCESS; ++i) {
        if (p.kernelParams == nullptr || p.kernelParams[i] == nullptr) {
          readable = false;
          break;
        }
        const auto* bytes = static_cast<const std::byte*>(p.kernelParams[i]);
        patch.args.emplace_back(bytes, bytes + size);
      }
      p.kernelParams = nullptr;  // the driver's storage: set anew at each patch
    }
    if (!readable) {
      if (!has_library_work_) return false;
      ++opaque_nodes_;
      continue;
    }
    patch_nodes_.push_back(std::move(patch));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<CudaGraph>>
CudaGraph::record(CudaBackend& backend, const std::function<absl::Status()>& record) {
  std::unique_ptr<CudaGraph> graph(new CudaGraph(backend));
  std::vector<CudaBackend::CapturedWork> work;
  MSTEP_ASSIGN_OR_RETURN(CUgraph captured,
                         backend.capture(record, graph->writes_, &work, &graph->checks_));
  graph->note_work(work);
  MSTEP_ASSIGN_OR_RETURN(graph->exec_, graph->instantiate(captured));
  graph->patchable_ = graph->read_patch_nodes();
  return graph;
}

void CudaGraph::describe(const std::vector<std::string>& work) {
  // The first and last two pieces of work, enough to say which step it is.
  std::vector<std::string> named;
  for (size_t i = 0; i < work.size(); ++i) {
    if (work.size() > 4 && i == 2) named.push_back("...");
    if (work.size() <= 4 || i < 2 || i + 2 >= work.size()) named.push_back(work[i]);
  }
  what_ = absl::StrCat("cuda graph of a captured step (", work.size(), " operation",
                       work.size() == 1 ? "" : "s", named.empty() ? "" : ": ",
                       absl::StrJoin(named, ", "), ")");
}

CudaGraph::~CudaGraph() {
  // An instantiated graph still running is freed when it completes.
  if (exec_ != nullptr) backend_.context().api().cuGraphExecDestroy(exec_);
  if (graph_ != nullptr) backend_.context().api().cuGraphDestroy(graph_);
}

int64_t CudaGraph::rebind(absl::Span<const std::pair<BufferPtr, BufferPtr>> moved) {
  if (!patchable_) return -1;
  // A buffer library work uses may be reached through more than node
  // parameters (and its nodes may be left out): recorded again instead.
  for (const auto& [from, to] : moved)
    if (library_uses(*from)) return -1;
  const CudaDriverApi& api = backend_.context().api();
  int64_t patched = 0;
  for (PatchNode& n : patch_nodes_) {
    bool changed = false;
    auto patch = [&](CUdeviceptr& value) {
      if (std::optional<CUdeviceptr> to = moved_to(value, moved)) {
        value = *to;
        changed = true;
      }
    };
    if (n.kernel) {
      for (std::vector<std::byte>& arg : n.args)
        for (size_t at = 0; at + sizeof(CUdeviceptr) <= arg.size(); at += sizeof(CUdeviceptr)) {
          CUdeviceptr value;
          std::memcpy(&value, arg.data() + at, sizeof value);
          patch(value);
          std::memcpy(arg.data() + at, &value, sizeof value);
        }
    } else {
      // A device address is srcDevice / dstDevice for unified memory too.
      auto device = [](CUmemorytype type) {
        return type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED;
      };
      if (device(n.copy.srcMemoryType)) patch(n.copy.srcDevice);
      if (device(n.copy.dstMemoryType)) patch(n.copy.dstDevice);
    }
    if (!changed) continue;
    CUresult result;
    if (n.kernel) {
      std::vector<void*> args;
      for (std::vector<std::byte>& arg : n.args) args.push_back(arg.data());
      CUDA_KERNEL_NODE_PARAMS params = n.kernel_params;
      params.kernelParams = args.data();
      result = api.cuGraphExecKernelNodeSetParams(exec_, n.node, &params);
    } else {
      result = api.cuGraphExecMemcpyNodeSetParams(exec_, n.node, &n.copy,
                                                  backend_.context().cu_context());
    }
    if (result != CUDA_SUCCESS) {
      // The nodes no longer agree with the exec: update() sets them all.
      patchable_ = false;
      return -1;
    }
    ++patched;
  }
  // What the graph writes moved with it (launch() names them to enqueue).
  for (const Buffer*& w : writes_)
    for (const auto& [from, to] : moved)
      if (w == from.get()) w = to.get();
  return patched;
}

absl::Status CudaGraph::launch() {
  const CudaDriverApi& api = backend_.context().api();
  return backend_.enqueue(
      what_,
      [&] { return MSTEP_CUDA_CALL(api, cuGraphLaunch, exec_, backend_.context().stream()); }, {},
      writes_, checks_.empty() ? std::function<absl::Status()>() : std::function<absl::Status()>([checks = checks_] {
        for (const std::function<absl::Status()>& check : checks)
          MSTEP_RETURN_IF_ERROR(check());
        return absl::OkStatus();
      }));
}

absl::Status CudaGraph::update(const std::function<absl::Status()>& record) {
  const CudaDriverApi& api = backend_.context().api();
  std::vector<const Buffer*> writes;
  std::vector<CudaBackend::CapturedWork> work;
  std::vector<std::function<absl::Status()>> checks;
  MSTEP_ASSIGN_OR_RETURN(CUgraph captured, backend_.capture(record, writes, &work, &checks));
  CUgraphExecUpdateResultInfo info{};
  CUresult result = api.cuGraphExecUpdate(exec_, captured, &info);
  if (result == CUDA_SUCCESS) {
    // The exec now has `captured`'s parameters, which graph_'s nodes do not
    // describe: rebind() would patch from stale values, so it declines.
    api.cuGraphDestroy(captured);
    patchable_ = false;
  } else if (result == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
    // The work changed in a way parameters cannot express: instantiate anew.
    MSTEP_ASSIGN_OR_RETURN(CUgraphExec exec, instantiate(captured));
    api.cuGraphExecDestroy(std::exchange(exec_, exec));
    ++reinstantiations_;
    note_work(work);
    patchable_ = read_patch_nodes();
  } else {
    api.cuGraphDestroy(captured);
    return cuda_error(api, result, "cuGraphExecUpdate", "updating a CUDA graph's buffers");
  }
  writes_ = std::move(writes);
  checks_ = std::move(checks);
  note_work(work);
  ++updates_;
  return absl::OkStatus();
}

} // namespace mstep::cuda
