// Tracer: records ops into the lazy DAG and runs cuts of it.
//
// Internal to the library (lib/api uses it to build ops). One thread
// traces at a time; mstep does not lock on the tracing hot path.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "mstep/runtime/GraphCache.h"
#include "mstep/runtime/Options.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep {

class Tracer {
 public:
  static Tracer& get();

  const RuntimeOptions& options() const { return options_; }
  /// For tests and tools that change options after start-up.
  RuntimeOptions& mutable_options() { return options_; }
  Device default_device() const { return default_device_; }
  void set_default_device(Device d) { default_device_ = d; }
  GraphCache& cache() { return cache_; }

  /// Adds / removes a pending tensor from the live list.
  void link_live(TensorImpl* impl);
  void unlink_live(TensorImpl* impl);

  /// mark_step(): materializes every live pending tensor.
  absl::Status mark_step();
  /// Materializes `impl` alone (a sync point: item(), to_vector()).
  absl::Status sync(TensorImpl& impl);
  /// The graph mark_step() would cut now; nothing runs or changes.
  absl::StatusOr<TraceGraph> pending_graph();

  /// RNG: the current (seed, offset) state, an i64[2] tensor to pass as
  /// the op's operand, and the offset this random op adds to it. Reserves
  /// `count` numbers.
  struct RandomDraw {
    TensorImplPtr state;
    int64_t offset;
  };
  RandomDraw draw_random(int64_t count, Device device);
  void manual_seed(uint64_t seed);

 private:
  Tracer();
  /// One cut: its key, its outputs (deduplicated) and, per requested
  /// tensor, its output slot. Fills order_ and inputs_.
  struct Cut {
    GraphKey key;
    std::vector<ValueRef> graph_outputs;
    std::vector<uint32_t> output_slot;
  };
  absl::StatusOr<Cut> cut(absl::Span<TensorImpl* const> outputs, Device device);
  /// The TraceGraph of the cut in order_/inputs_, with roles and donations.
  TraceGraph build_cut_graph(const Cut& c, absl::Span<TensorImpl* const> outputs);
  /// Cuts, looks up or compiles, runs, and binds results to `outputs`.
  absl::Status execute(absl::Span<TensorImpl* const> outputs);
  void advance_rng_after_step();

  RuntimeOptions options_;
  Device default_device_;
  GraphCache cache_;

  TensorImpl live_head_{TensorType{}, Device{}};  // sentinel of live list
  uint64_t epoch_ = 0;
  // Scratch reused across cuts so a cache hit allocates nothing new.
  std::vector<const Node*> order_;
  std::vector<BufferPtr> inputs_;

  uint64_t rng_seed_ = 0x5EEDull;
  uint64_t rng_offset_ = 0;
  int64_t rng_reserved_ = 0;  // numbers reserved by ops since the last step
  TensorImplPtr rng_state_;   // i64[2] {seed, offset} on the default device
};

}  // namespace mstep
