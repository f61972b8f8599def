// Tracer: records ops into the lazy DAG and runs cuts of it.
//
// Internal to the library (lib/api uses it to build ops). One thread
// traces at a time; mstep does not lock on the tracing hot path.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mstep/runtime/ModuleCache.h"
#include "mstep/runtime/Options.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {

class DiskCache;

/// One executable run in lazy mode, as a capture sees it (mstep::Graph).
struct ExecutedGraph {
  const std::shared_ptr<Executable>& executable;
  absl::Span<const DataLeaf* const> input_nodes;  // the `data` leaves, in input order
  absl::Span<const BufferPtr> inputs;
  absl::Span<const int32_t> donated_to;       // TraceGraph::donated_to of the graph run
  absl::Span<TensorImpl* const> outputs;      // the tensors bound to results
  absl::Span<const uint32_t> output_slot;     // per tensor: its result
  absl::Span<const BufferPtr> results;
  uint64_t rng_offset;                        // the Philox offset of the rng state input
  absl::Span<const CustomOpNeed> custom_ops;  // the custom ops the executable calls
  // The graph the executable was compiled from (Graph::export_stablehlo
  // re-emits it); kept with the cache entry while a capture records.
  const std::shared_ptr<const TraceGraph>& graph;
};

/// Receives every execution while a capture is active.
class CaptureRecorder {
 public:
  virtual ~CaptureRecorder() = default;
  virtual void record(const ExecutedGraph& run) = 0;
};

/// The last graph mark_step() ran, kept while recording is on (NaN guard).
struct StepRecord {
  GraphKey key;
  std::shared_ptr<const TraceGraph> graph;
  std::vector<BufferPtr> inputs;
  std::vector<BufferPtr> results;
  uint64_t rng_seed = 0;
  uint64_t rng_offset = 0;
};

class Tracer {
 public:
  static Tracer& get();

  const RuntimeOptions& options() const { return options_; }
  /// For tests and tools that change options after start-up.
  RuntimeOptions& mutable_options() { return options_; }
  Device default_device() const { return default_device_; }
  void set_default_device(Device d) { default_device_ = d; }
  ModuleCache& cache() { return cache_; }
  /// The disk cache of MSTEP_CACHE (options().disk_cache), opened on first
  /// use; null when off or when the setting is invalid (warned once).
  DiskCache* disk_cache();
  /// Closes the disk cache (finishing its writes); the next disk_cache()
  /// opens options().disk_cache afresh. For tests and tools.
  void reset_disk_cache();

  /// Adds / removes a pending tensor from the live list.
  void link_live(TensorImpl* impl);
  void unlink_live(TensorImpl* impl);
  bool has_pending() const { return num_pending_ != 0; }
  /// How many tensors are pending (on the live list).
  size_t num_pending() const { return num_pending_; }

  /// mark_step(): materializes every live pending tensor.
  absl::Status mark_step();
  /// Materializes `impl` alone (a sync point: item(), to_vector()).
  absl::Status sync(TensorImpl& impl);
  /// Materializes the pending tensors among `impls` as one graph (the C
  /// API's compiled-graph runs); other pending work stays pending.
  absl::Status sync(absl::Span<TensorImpl* const> impls);
  /// The graph mark_step() would cut now; nothing runs or changes.
  absl::StatusOr<TraceGraph> pending_graph();

  /// Capture: while set, every execution is reported to `recorder`.
  void set_capture_recorder(CaptureRecorder* recorder) { recorder_ = recorder; }
  CaptureRecorder* capture_recorder() const { return recorder_; }
  /// NaN guard: keep the last executed graph, its inputs and results.
  void set_record_steps(bool on);
  const StepRecord& last_step() const { return last_step_; }

  /// RNG: the current (seed, offset) state, an i64[2] tensor to pass as
  /// the op's operand, and the offset this random op adds to it. Reserves
  /// `count` numbers. An error (no backend for `device`, or it cannot
  /// allocate or fill the state) reserves nothing and changes no state.
  struct RandomDraw {
    TensorImplPtr state;
    int64_t offset;
  };
  absl::StatusOr<RandomDraw> draw_random(int64_t count, Device device);
  void manual_seed(uint64_t seed);
  uint64_t rng_seed() const { return rng_seed_; }
  /// The offset the next step's state starts from (after mark_step()).
  uint64_t rng_offset() const { return rng_offset_; }
  /// Numbers reserved by ops traced since the last mark_step().
  int64_t rng_reserved() const { return rng_reserved_; }
  /// Moves the offset (a replay consumed numbers without tracing).
  void set_rng_offset(uint64_t offset);

 private:
  Tracer();
  /// One cut: its key, its outputs (deduplicated) and, per requested
  /// tensor, its output slot. Fills order_, inputs_ and input_nodes_.
  struct Cut {
    GraphKey key;
    std::vector<ValueRef> graph_outputs;
    std::vector<uint32_t> output_slot;
  };
  absl::StatusOr<Cut> cut(absl::Span<TensorImpl* const> outputs, Device device);
  /// The TraceGraph of the cut in order_/inputs_, with roles and donations.
  TraceGraph build_cut_graph(const Cut& c, absl::Span<TensorImpl* const> outputs);
  /// Memory miss: the disk cache, else a compile. Inserts into the cache.
  absl::StatusOr<ModuleCache::Entry*> load_or_compile(const Cut& c,
                                                      absl::Span<TensorImpl* const> outputs,
                                                      Backend& backend);
  /// Cuts, looks up or compiles, runs, and binds results to `outputs`.
  absl::Status execute(absl::Span<TensorImpl* const> outputs);
  /// Per input of the cut in inputs_: whether execute() of a cut that
  /// materializes `num_outputs` tensors donates it (see the .cpp).
  absl::Span<const uint8_t> donations(size_t num_outputs);
  void advance_rng_after_step();
  /// Drops the cut's scratch (order_, inputs_, input_nodes_), keeping capacity.
  void clear_scratch();

  RuntimeOptions options_;
  Device default_device_;
  ModuleCache cache_;
  std::unique_ptr<DiskCache> disk_;
  bool disk_opened_ = false;
  CaptureRecorder* recorder_ = nullptr;
  bool record_steps_ = false;
  StepRecord last_step_;

  TensorImpl live_head_{TensorType{}, Device{}};  // sentinel of live list
  size_t num_pending_ = 0;                         // tensors on the live list
  uint64_t epoch_ = 0;
  // Scratch reused across cuts so a cache hit allocates nothing new.
  std::vector<const Node*> order_;
  std::vector<BufferPtr> inputs_;
  std::vector<uint8_t> donated_;  // per input: what execute() donates to run()
  std::vector<const DataLeaf*> input_nodes_;

  uint64_t rng_seed_ = 0x5EEDull;
  uint64_t rng_offset_ = 0;
  int64_t rng_reserved_ = 0;  // numbers reserved by ops since the last step
  // i64[2] {seed, offset} on the default device; the tracer's own, not a
  // user handle (TensorImpl::has_handles).
  TensorImplPtr rng_state_;
  // End of the last mark_step(), for the "trace" span of MSTEP_TRACE.
  std::chrono::steady_clock::time_point last_step_end_;
};

}  // namespace mstep
