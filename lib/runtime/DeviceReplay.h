// Graph's device-graph replay (CUDA Graphs; see mstep/runtime/Graph.h):
// the captured segments' work recorded once into a DeviceGraph
// (Backend::record_graph) over static buffers, and per replay the checks
// that its buffers are still the tensors' (an update otherwise), the RNG
// state, one launch, and the results bound to their tensors.
// Ownership: refers to the Graph's segments (which must outlive it) and
// holds every buffer its graph reads or writes. Used by Graph on the
// tracing thread only. Library-internal.
#pragma once

#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "lib/runtime/CapturedSegment.h"

namespace mstep::internal {

class DeviceReplay {
 public:
  /// Records `segments` (a finished capture, all on `backend`'s device)
  /// into a device graph. Null when the backend records none
  /// (Backend::records_graphs): replay runs the segments one by one. Throws an
  /// Error naming the op when the work cannot be recorded (a host
  /// fallback, an allocation or host sync inside the executables).
  static std::unique_ptr<DeviceReplay> record(std::vector<Segment>& segments, Backend& backend);

  /// One replay: moves the graph to moved buffers (patching its nodes in
  /// place, else recording it again: device_graph_updates counts both,
  /// device_graph_node_patches the nodes patched, device_graph_rerecords
  /// the recordings), writes each
  /// segment's RNG state (seed, `rng_base` + its offset), launches the
  /// graph and binds the results to their tensors. The caller has checked
  /// the inputs (ReplayError) and synced pending ones.
  void replay(uint64_t rng_seed, uint64_t rng_base);

 private:
  /// A tensor the step reads and writes (a parameter, optimizer state):
  /// its new value is copied back into `buffer`, the one the graph reads.
  struct WriteBack {
    uint32_t segment, result;
    std::shared_ptr<TensorImpl> tensor;
    BufferPtr buffer;
  };
  /// A tensor the step only writes: bound to the result after each launch.
  struct Output {
    uint32_t segment, result;
    std::shared_ptr<TensorImpl> tensor;
  };
  /// A data input (InputRole::input, not written): the step reads `slot`,
  /// the graph's own buffer, which a copy at the head of the graph fills
  /// from `source`, the tensor's buffer it was recorded (or patched) with.
  struct StaticInput {
    std::shared_ptr<TensorImpl> tensor;
    BufferPtr source;
    BufferPtr slot;
  };
  DeviceReplay(std::vector<Segment>& segments, Backend& backend)
      : segments_(segments), backend_(backend) {}
  /// Queues every segment's run over the static buffers, then the copies
  /// back: the work recorded into the graph.
  absl::Status record_work();
  /// Whether a buffer moved since recording, so that the graph must be
  /// updated; fixes what must move first (a written buffer that someone
  /// else shares gets a buffer of its own) and lists in copies_ the moved
  /// read-only inputs other than data inputs whose values can be copied
  /// into the graph's buffers (a data input's move is its head copy's).
  bool buffers_moved();
  /// Moves the graph to moves_'s buffers by patching it in place
  /// (DeviceGraph::rebind), and the recorded buffers with it: false (nothing
  /// changed) when addresses would not identify the uses (a moved buffer
  /// is still read by a binding that stays, or a new one is already used)
  /// or the graph declines.
  bool rebind();


  std::vector<Segment>& segments_;
  Backend& backend_;
  std::unique_ptr<DeviceGraph> graph_;
  std::vector<std::vector<BufferPtr>> inputs_;   // per segment, per input: what it reads
  std::vector<std::vector<BufferPtr>> offered_;  // per segment, per result: its static buffer
  std::vector<std::vector<BufferPtr>> results_;  // per segment: what run() returned
  std::vector<StaticInput> static_inputs_;
  /// Per segment, per input: its index in static_inputs_, or -1.
  std::vector<std::vector<int32_t>> slot_of_;
  std::vector<WriteBack> write_backs_;
  std::vector<Output> outputs_;
  absl::flat_hash_set<const TensorImpl*> written_;  // the write-backs' tensors
  /// This replay's copies of moved static inputs' values: (from, into).
  std::vector<std::pair<BufferPtr, BufferPtr>> copies_;
  /// This replay's moved buffers: (recorded, new), for rebind().
  std::vector<std::pair<BufferPtr, BufferPtr>> moves_;
};

}  // namespace mstep::internal
