// A CUDA graph of a cuda backend's work (issue 22 §1): what
// CudaBackend::record_graph returns. The work is captured once from the
// backend's stream (CudaBackend::capture) and instantiated once; launch()
// is one cuGraphLaunch, queued through CudaBackend::enqueue like any work
// (a ticket, an event, and the captured writes remembered, so copy_out of
// a buffer the graph writes waits for it). update() captures the work
// again over other buffers and applies it with cuGraphExecUpdate, which
// keeps the instantiated graph (no new instantiation); only where the
// driver refuses the update (the work changed shape) is it instantiated
// anew. A fault while a launch runs surfaces at the next sync point as
// CudaBackend's error naming this graph's captured step (what()). The
// buffers the captured work uses must stay alive while the graph
// can launch (DeviceGraph's contract); the backend must outlive the graph.
// Thread-safety: one thread at a time, and no other capture on the
// backend meanwhile. Library-internal; runtime half.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaBackend.h"

namespace mstep::cuda {

class CudaGraph final : public DeviceGraph {
public:
  /// Captures `record`'s work on `backend` and instantiates it. Errors:
  /// `record`'s own (an allocation or host sync inside it names itself),
  /// or the driver's for the capture or the instantiation.
  static absl::StatusOr<std::unique_ptr<CudaGraph>>
  record(CudaBackend& backend, const std::function<absl::Status()>& record);
  ~CudaGraph() override;

  absl::Status launch() override;
  absl::Status update(const std::function<absl::Status()>& record) override;
  int64_t updates() const override { return updates_; }
  /// update()s the driver refused, which instantiated the graph anew.
  int64_t reinstantiations() const { return reinstantiations_; }

  /// What launch() names in errors: "cuda graph of a captured step (3
  /// operations: kernel op0 (mstep.exp #0), ..., kernel op2 (mstep.tanh #2))".
  const std::string& what() const { return what_; }

private:
  explicit CudaGraph(CudaBackend& backend) : backend_(backend) {}
  /// Sets what_ from the captured work's names.
  void describe(const std::vector<std::string>& work);
  /// cuGraphInstantiateWithFlags of `graph`, which it then destroys.
  absl::StatusOr<CUgraphExec> instantiate(CUgraph graph);

  CudaBackend& backend_;
  CUgraphExec exec_ = nullptr;
  std::vector<const Buffer*> writes_; // what the captured work writes
  /// The captured work's checks (the executables' error words), run after
  /// each launch completes.
  std::vector<std::function<absl::Status()>> checks_;
  std::string what_;
  int64_t updates_ = 0;
  int64_t reinstantiations_ = 0;
};

} // namespace mstep::cuda
