// CudaGraph: see CudaGraph.h.
#include "lib/backends/cuda/CudaGraph.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

absl::StatusOr<CUgraphExec> CudaGraph::instantiate(CUgraph graph) {
  const CudaDriverApi& api = backend_.context().api();
  CUgraphExec exec = nullptr;
  CUresult result = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
  api.cuGraphDestroy(graph);
  MSTEP_RETURN_IF_ERROR(check_cuda(api, result, "cuGraphInstantiateWithFlags",
                                   "instantiating the captured CUDA graph"));
  return exec;
}

absl::StatusOr<std::unique_ptr<CudaGraph>>
CudaGraph::record(CudaBackend& backend, const std::function<absl::Status()>& record) {
  std::unique_ptr<CudaGraph> graph(new CudaGraph(backend));
  std::vector<std::string> work;
  MSTEP_ASSIGN_OR_RETURN(CUgraph captured,
                         backend.capture(record, graph->writes_, &work, &graph->checks_));
  graph->describe(work);
  MSTEP_ASSIGN_OR_RETURN(graph->exec_, graph->instantiate(captured));
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
  std::vector<std::string> work;
  std::vector<std::function<absl::Status()>> checks;
  MSTEP_ASSIGN_OR_RETURN(CUgraph captured, backend_.capture(record, writes, &work, &checks));
  CUgraphExecUpdateResultInfo info{};
  CUresult result = api.cuGraphExecUpdate(exec_, captured, &info);
  if (result == CUDA_SUCCESS) {
    api.cuGraphDestroy(captured);
  } else if (result == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
    // The work changed in a way parameters cannot express: instantiate anew.
    MSTEP_ASSIGN_OR_RETURN(CUgraphExec exec, instantiate(captured));
    api.cuGraphExecDestroy(std::exchange(exec_, exec));
    ++reinstantiations_;
  } else {
    api.cuGraphDestroy(captured);
    return cuda_error(api, result, "cuGraphExecUpdate", "updating a CUDA graph's buffers");
  }
  writes_ = std::move(writes);
  checks_ = std::move(checks);
  describe(work);
  ++updates_;
  return absl::OkStatus();
}

} // namespace mstep::cuda
