// LoadedGraph: an exported step (Graph::save) loaded by the runtime alone,
// with no tracer, compiler, LLVM or MLIR: how a step compiled on one machine
// runs on another (tools/mstep-run, a deployment, a lent GPU machine).
//
//   auto step = mstep::load_graph("step.mstep");          // StatusOr
//   (*step)->write("x", batch.data(), batch.size());      // a static input
//   (*step)->replay();                                    // one training step
//   (*step)->read("loss", &loss, sizeof loss);
//
// Its tensors are slots, named when the graph was saved: static inputs,
// parameters, optimizer state and outputs. They start with their values at
// export, replay() updates them as the captured step did, and the RNG
// offset advances as in the exporting process, so N replays here give
// bitwise what N replays there gave. The loaded graph owns every slot's
// buffer alone; data moves only through write() and read() (copy_in and
// copy_out of the backend).
//
// A graph that calls custom ops lists them (name, version); load() refuses
// it unless this process has registered each, in its own code or from a
// plugin loaded first (mstep::load_plugin, runtime/Plugin.h;
// `mstep-run --plugin libmyops.so`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/InputRole.h"
#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/Options.h"

namespace mstep {

class LoadedGraph {
 public:
  struct SlotInfo {
    std::string name;
    InputRole role;
    /// Whether replay() reads it (static inputs, parameters, state).
    bool read;
    /// Whether replay() writes it (parameters, state, outputs).
    bool written;
    TensorType type;
  };

  ~LoadedGraph();
  LoadedGraph(const LoadedGraph&) = delete;
  LoadedGraph& operator=(const LoadedGraph&) = delete;

  /// Loads `path`. Errors name the file and the problem: not an exported
  /// graph, truncated, corrupt (checksum), another format version, a
  /// backend this runtime lacks, code for a CPU feature this host lacks, a
  /// custom op this process has not registered (or has under another
  /// version: FailedPrecondition naming each op, both versions, and the
  /// plugin to load), collectives captured in a world of another size
  /// (FailedPrecondition naming both sizes). Nothing runs on error.
  static absl::StatusOr<std::unique_ptr<LoadedGraph>> load(const std::string& path,
                                                           const RuntimeOptions& options = {});

  const std::vector<SlotInfo>& slots() const { return slots_; }
  /// The slot named `name`; NotFound lists the names.
  absl::StatusOr<size_t> find(absl::string_view name) const;
  /// The name of the backend it runs on.
  absl::string_view backend() const;
  /// The custom ops its executables call (registered in this process).
  const std::vector<CustomOpNeed>& custom_ops() const;

  /// Copies `bytes` (exactly the slot's size) into slot `name`.
  absl::Status write(absl::string_view name, const void* data, size_t bytes);
  /// Copies slot `name` out (waits for the work that writes it).
  absl::Status read(absl::string_view name, void* data, size_t bytes) const;

  /// Runs the step once. On error the slots hold unspecified values.
  absl::Status replay();
  /// From now on, replay() is one launch of a device graph (CUDA Graphs;
  /// Backend::record_graph) recorded here over the slots' buffers, which
  /// stay at their addresses: the step's new values are copied back into
  /// them at the end of the graph, and write() fills them in place. Each
  /// segment gets an RNG state buffer of its own, written before each
  /// launch. Unimplemented when the backend records no device graphs;
  /// FailedPrecondition naming the op when the work cannot be recorded
  /// (a host fallback, an allocation). On error replay() runs the
  /// executables one by one as before.
  absl::Status use_device_graph();
  /// Whether replay() launches a device graph.
  bool on_device_graph() const;

  /// Seconds the last replay() spent inside executables (the rest of its
  /// time is host overhead).
  double last_execute_seconds() const;
  /// Executable runs per replay.
  size_t num_segments() const;
  uint64_t rng_offset() const;

  struct Impl;

 private:
  explicit LoadedGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<SlotInfo> slots_;
};

/// LoadedGraph::load.
inline absl::StatusOr<std::unique_ptr<LoadedGraph>> load_graph(const std::string& path,
                                                               const RuntimeOptions& options = {}) {
  return LoadedGraph::load(path, options);
}

}  // namespace mstep
