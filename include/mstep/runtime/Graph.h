// Graph: capture a step once, replay it many times (HPU Graphs / CUDA
// Graphs style).
//
//   mstep::Graph g;
//   for (int i = 0; i < 3; ++i) train_step(static_x, static_y);   // warmup (lazy)
//   g.capture_begin();
//   train_step(static_x, static_y);     // traced and run once, like a lazy step
//   g.capture_end();
//   for (auto& [x, y] : batches) {
//     static_x.copy_(x);  static_y.copy_(y);   // materialized: no copy, no trace
//     g.replay();                              // no tracing, hashing or lookup
//     float loss = static_loss.item();
//   }
//
// Capture runs the step once in lazy mode and records, per executable run
// (each mark_step() or sync point inside the capture is one segment), where
// every input came from and which tensors its results went to. replay()
// re-runs those executables in order: an input is re-read from the tensor
// it came from (static inputs, parameters, optimizer state), from an
// earlier segment's result, or is a constant frozen at capture; results
// are bound to the same tensors as in the capture, so parameters and
// optimizer state update in place and static outputs show the new values.
//
// Memory, as with CUDA Graphs' static tensors: a replay writes a static
// output (the loss, the gradients) into the buffer its tensor already holds
// when nothing else holds that buffer; a tensor that shares it (through
// copy_()) keeps the old value, because the replay then allocates. Between
// replays the graph keeps a reference to the buffers its inputs last read
// (parameters, optimizer state, the last batch copied into a static input),
// so that an unchanged input costs no reference counting.
// The Philox offset advances by as much as the captured step consumed, so
// each replay draws fresh dropout masks and a seed reproduces them: replay
// gives the same numbers as lazy mode.
//
// On a backend that records device graphs (Backend::record_graph: cuda's
// CUDA Graphs), capture_end() also records the captured executables' work
// into one device graph, instantiated once, and replay() launches it: one
// graph launch plus the checks and bindings below. Its buffers stay at
// fixed addresses while the graph lives: each data input (a batch, a
// mask: InputRole::input) is copied at the head of the graph into a buffer
// the graph owns, which the step reads; parameters are read where they
// were at capture, the results go to buffers the graph owns, and a
// parameter or optimizer state the step updates is copied back into its
// own buffer at the end of the graph. When an input's buffer moved (a new
// buffer after copy_() from a lazy value, or a copy_() snapshot that
// shares a buffer the graph writes), replay() patches the graph's
// operations that use it to the new buffer in place where the backend can
// (CUDA: the kernel and copy nodes, not a library's such as cuBLASLt's,
// which is why data inputs go through a head copy; Metrics::
// device_graph_node_patches), else re-records the work over the new
// buffers and updates the graph in place, without a new capture (either
// counted in Metrics::device_graph_updates; the re-records also in
// device_graph_rerecords). Work that cannot
// be recorded (an allocation, a host sync, a host fallback) fails
// capture_end() with an error naming it, and the graph stays uncaptured.
//
// Host constants (doubles in the traced code) are frozen into the captured
// executables. Pass values that change as device scalars
// (Tensor::scalar + fill_), or use ModuleCacher, which keys on them.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "mstep/core/Error.h"

namespace mstep {

class Tensor;

/// A replay that cannot run as captured. Nothing ran and nothing changed.
class ReplayError : public Error {
 public:
  enum class Kind {
    not_captured,      // replay() before capture_end()
    capture_active,    // replay() or capture_begin() inside a capture
    input_freed,       // a captured input tensor no longer exists
    // Graph::replay raises the three above and device_mismatch (a tensor
    // moved by Module::to since the capture); GraphedCallable raises the
    // mismatches of the inputs it is called with.
    shape_mismatch,    // an input has another shape than at capture
    dtype_mismatch,
    device_mismatch,
    argument_changed,  // reserved: nothing raises it (ModuleCacher keys on arguments)
    arity_mismatch,    // a different number of inputs
  };
  ReplayError(Kind kind, const std::string& message);
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// Runs mark_step() for work traced before, then records every graph the
  /// tracer runs until capture_end(). Throws if another capture is active.
  void capture_begin();
  /// Runs mark_step() for the captured work and closes the capture.
  void capture_end();
  /// Drops a capture that was begun (after an exception inside it).
  void capture_abort();

  /// Runs the captured executables. Throws ReplayError (before running
  /// anything): capture_active inside a capture; not_captured before
  /// capture_end(); input_freed when an input tensor was freed, or its
  /// handle was assigned another tensor (which may have another shape): a
  /// captured tensor keeps its type, so new data must come in through
  /// copy_(); device_mismatch when Module::to moved a tensor the graph
  /// reads or writes to another device (capture again after the move).
  /// It checks no shape or dtype: it re-reads the tensors it captured.
  void replay();

  /// Writes the captured step to `path` as one versioned, checksummed file
  /// (mode 0600, replaced atomically) that mstep::load_graph
  /// (runtime/LoadedGraph.h) and tools/mstep-run replay with the runtime
  /// alone: every executable in its backend's serialized form, where each
  /// input comes from, the RNG offsets, and every tensor the step reads or
  /// writes with its current value. `names` names those tensors (static
  /// inputs, outputs, parameters); the others are named after their role
  /// and position ("optimizer_state_7"; "output_12" for a result). Throws ReplayError(not_captured)
  /// before capture_end(), and an Error when a segment's backend cannot
  /// serialize its executable or the file cannot be written.
  void save(const std::string& path, const std::map<std::string, Tensor>& names = {}) const;

  /// Writes the captured step (forward, backward and optimizer; all its
  /// segments) as one StableHLO function `@main` in MLIR text, which XLA
  /// (jaxlib) and IREE compile and run (compiler/StableHloExport.h). Its
  /// arguments are the tensors the step reads (named as by save(), in
  /// `mstep.name`, with `mstep.role`), the frozen constants
  /// ("constant_<n>") and, if it draws random numbers, "rng_state" =
  /// (seed, offset) i64[2]; its results are the tensors it writes. A
  /// tensor both read and written (parameters, optimizer state) is donated:
  /// its argument has `tf.aliasing_output = <result>`. With `values_path`,
  /// the arguments' current values go to that safetensors file under their
  /// names, with metadata rng_seed, rng_offset and rng_advance (how far one
  /// step moves the offset). Throws ReplayError(not_captured) before
  /// capture_end(), and an Error naming the op (and its trace node) when
  /// an op has no StableHLO form, or a file cannot be written.
  void export_stablehlo(const std::string& path, const std::map<std::string, Tensor>& names = {},
                        const std::string& values_path = "") const;

  bool captured() const;
  /// Executable runs per replay, and kernel launches among them.
  size_t num_segments() const;
  size_t num_kernels() const;
  /// Whether replay() launches one device graph (see the top).
  bool on_device_graph() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Captures into `graph` for its scope: capture_begin() now, capture_end()
/// at scope exit, or capture_abort() when an exception leaves the scope.
class CaptureGuard {
 public:
  explicit CaptureGuard(Graph& graph);
  ~CaptureGuard() noexcept(false);
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;

 private:
  Graph& graph_;
  int exceptions_;
};

/// Whether a capture is active (dynamic-shape ops refuse to run in one).
bool is_capturing();

}  // namespace mstep
