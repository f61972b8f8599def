// A CUDA graph of a cuda backend's work (issue 22 §1): what
// CudaBackend::record_graph returns. The work is captured once from the
// backend's stream (CudaBackend::capture) and instantiated once; launch()
// is one cuGraphLaunch, queued through CudaBackend::enqueue like any work
// (a ticket, an event, and the captured writes remembered, so copy_out of
// a buffer the graph writes waits for it). update() captures the work
// again over other buffers and applies it with cuGraphExecUpdate, which
// keeps the instantiated graph (no new instantiation); only where the
// driver refuses the update (the work changed shape) is it instantiated
// anew. rebind() is the cheaper way when only buffers moved: it patches
// the instantiated graph's nodes that use a moved buffer in place
// (cuGraphExecKernelNodeSetParams, cuGraphExecMemcpyNodeSetParams), from
// the nodes' parameters read once from the captured graph (kept for that),
// with no capture; it declines (-1, update() then) when the driver lacks
// those functions, a moved buffer is one that a library step (cuBLASLt,
// cuDNN, NCCL: their nodes may reach a buffer in ways the parameters do
// not show) reads or writes, a node of mstep's own work cannot be read,
// or after an update() (the captured graph's nodes no longer describe the
// instantiated one). Library steps elsewhere in the graph do not stop a
// patch: their nodes that cannot be read are left alone. So a step whose
// matmuls read static buffers (DeviceReplay copies each data input into
// one at the head of the graph) is moved to a new input by patching that
// copy node. A fault while a launch runs surfaces at the next sync point as
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
  /// A kernel parameter of 8 bytes at 8-byte alignment, or a copy node's
  /// source or destination, whose value lies in a moved buffer (first)
  /// is moved to the same offset in the new one (second). Only the nodes
  /// that change are set. -1 (nothing changed) where it declines (above)
  /// or the driver refuses a node (update() then sets every node).
  int64_t rebind(absl::Span<const std::pair<BufferPtr, BufferPtr>> moved) override;
  /// Library nodes rebind() leaves alone (they cannot be read).
  int64_t opaque_nodes() const { return opaque_nodes_; }
  /// update()s the driver refused, which instantiated the graph anew.
  int64_t reinstantiations() const { return reinstantiations_; }

  /// What launch() names in errors: "cuda graph of a captured step (3
  /// operations: kernel op0 (mstep.exp #0), ..., kernel op2 (mstep.tanh #2))".
  const std::string& what() const { return what_; }

private:
  explicit CudaGraph(CudaBackend& backend) : backend_(backend) {}
  /// Sets what_ from the captured work's names.
  void describe(const std::vector<std::string>& work);
  /// Sets what_, has_library_work_ and library_ranges_ from the captured work.
  void note_work(const std::vector<CudaBackend::CapturedWork>& work);
  /// Whether library work reads or writes memory of `buffer`.
  bool library_uses(const Buffer& buffer) const;
  /// cuGraphInstantiateWithFlags of `graph`, which it then keeps as
  /// graph_ (destroying the one before) for rebind(); destroyed on error.
  absl::StatusOr<CUgraphExec> instantiate(CUgraph graph);

  /// A node rebind() can patch: its parameters as the exec has them now.
  struct PatchNode {
    CUgraphNode node = nullptr;
    bool kernel = false;  // else a copy node
    CUDA_KERNEL_NODE_PARAMS kernel_params{};  // kernel: all but the arguments
    std::vector<std::vector<std::byte>> args;  // kernel: each argument's bytes
    CUDA_MEMCPY3D copy{};  // copy
  };
  /// Reads `graph_`'s nodes into patch_nodes_; false (patching off) when
  /// the driver lacks a function or a node cannot be patched.
  bool read_patch_nodes();

  CudaBackend& backend_;
  CUgraph graph_ = nullptr;  // the captured graph exec_ came from (rebind's nodes)
  CUgraphExec exec_ = nullptr;
  bool patchable_ = false;
  std::vector<PatchNode> patch_nodes_;
  bool has_library_work_ = false;
  /// The device memory the library work reads and writes: (address, bytes).
  std::vector<std::pair<CUdeviceptr, size_t>> library_ranges_;
  int64_t opaque_nodes_ = 0;  // library nodes read_patch_nodes() left out
  std::vector<const Buffer*> writes_; // what the captured work writes
  /// The captured work's checks (the executables' error words), run after
  /// each launch completes.
  std::vector<std::function<absl::Status()>> checks_;
  std::string what_;
  int64_t updates_ = 0;
  int64_t reinstantiations_ = 0;
};

} // namespace mstep::cuda
