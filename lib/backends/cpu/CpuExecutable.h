// The cpu backend's executable: a precomputed list of kernel calls over one
// static arena. Every intermediate value has a fixed address in the arena
// (from mstep-plan-memory), so a run only fills in the addresses of the
// inputs and of the outputs, then calls the kernels in order: no
// allocation besides the output buffers, no lookup, no dispatch on op kind.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "mstep/runtime/Backend.h"

namespace mstep::dist {
class CollectiveRun;  // lib/runtime/distributed/Communicator.h
}  // namespace mstep::dist

namespace mstep::cpu {

class FusionJit;

class CpuExecutable final : public Executable {
 public:
  /// The runtime options the cpu backend reads (RuntimeOptions::cpu_disable
  /// and cpu_profile).
  struct BuildOptions {
    /// Kernel families turned off: "onednn,flash,jit,host" or "all".
    std::string disabled_families;
    /// Time every call; report the slowest at exit.
    bool profile = false;
    /// Say on stderr when a run rebuilds the kernels for a new thread count.
    bool log_rebuilds = false;
    /// The settings RuntimeOptions holds (MSTEP_CPU_DISABLE, MSTEP_CPU_PROFILE,
    /// MSTEP_LOG_RECOMPILES).
    static BuildOptions from(const RuntimeOptions& options) {
      return {.disabled_families = options.cpu_disable,
              .profile = options.cpu_profile,
              .log_rebuilds = options.log_recompiles};
    }
  };
  /// Builds the call list for `graph` (exported from the step function that
  /// `plan` was read from). `jit` holds the compiled fusions (may be null:
  /// every fusion then runs on the ref interpreter as a fallback).
  static absl::StatusOr<std::unique_ptr<CpuExecutable>> create(TraceGraph graph, ArenaPlan plan,
                                                               std::shared_ptr<FusionJit> jit,
                                                               BuildOptions options);
  ~CpuExecutable() override;

  using Executable::run;
  /// Runs the step. When OpenMP's thread count (omp_get_max_threads())
  /// differs from the one the kernels were built for, first rebuilds them
  /// for the new count (Metrics::thread_rebuilds): oneDNN fixes a
  /// primitive's thread split when it is created, and some kernels size
  /// per-thread scratch then.
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override;
  size_t num_kernels() const override { return calls_.size(); }
  /// The OpenMP thread count the kernels were last built for.
  int built_for_threads() const { return built_threads_; }
  absl::Span<const HostFallbackOp> host_fallbacks() const override { return fallbacks_; }
  absl::StatusOr<std::string> serialize(absl::string_view module_text) const override;

  /// Kernel names in call order ("onednn.matmul", "jit.fusion", ...), for
  /// tests and logs.
  std::vector<std::string> kernel_names() const;
  int64_t arena_bytes() const { return plan_.arena_bytes; }
  /// With BuildOptions::profile (MSTEP_CPU_PROFILE=1): prints time per call, slowest first, to
  /// stderr (also done at exit and on destruction).
  void report_profile();

 private:
  CpuExecutable(TraceGraph graph, ArenaPlan plan, std::shared_ptr<FusionJit> jit,
                BuildOptions options);
  absl::Status build();
  /// build() again for the current thread count, from a clean slate (the
  /// arena is kept: the plan has not changed).
  absl::Status rebuild_for_threads(int threads);
  /// Removes the calls whose results nobody reads.
  void drop_unread_calls();
  /// Moves each collective's wait right before the first call that reads
  /// its result (they were appended at the end).
  void place_collective_waits();
  /// Fills see_through_ (KernelRequest::see_through_permutes).
  void plan_see_through(const std::vector<int64_t>& slot_offset);

  /// Where a value's memory comes from on each run.
  enum class SlotKind : uint8_t { arena, input, output };
  struct Call {
    CpuKernel* kernel;
    uint32_t first_operand, num_operands;  // into operand_slots_
    uint32_t first_result, num_results;    // into result_slots_
    std::optional<HostFallbackOp> fallback;  // runs a ref kernel
    bool can_fail = false;                   // check last_error() after it
  };
  struct Output {
    uint32_t slot;
    int32_t input = -1;        // a graph input returned as is
    int32_t donated_arg = -1;  // the argument the plan writes this output into
  };

  TraceGraph graph_;
  ArenaPlan plan_;
  std::shared_ptr<FusionJit> jit_;
  BuildOptions options_;
  std::vector<std::unique_ptr<CpuKernel>> kernels_;
  std::vector<Call> calls_;
  /// The collectives (CollectiveKernel.h): while one is in flight, run()
  /// lets MPI progress between calls. `waits_`: each one's wait call and
  /// result slot, until place_collective_waits().
  std::vector<std::shared_ptr<dist::CollectiveRun>> collectives_;
  struct PendingWait {
    CpuKernel* start;
    CpuKernel* kernel;  // the wait
    uint32_t result_slot;
  };
  std::vector<PendingWait> waits_;
  std::vector<HostFallbackOp> fallbacks_;

  std::vector<uint32_t> value_base_;  // per node: slot of its result 0
  std::vector<SlotKind> slot_kind_;
  std::vector<int64_t> slot_arg_;     // input slots: the argument index
  std::vector<std::byte*> slot_ptr_;  // filled per run for input/output slots
  std::vector<uint32_t> operand_slots_, result_slots_;
  std::vector<Output> outputs_;       // per graph output
  std::vector<bool> see_through_;     // per node, see plan_see_through()
  std::vector<uint32_t> output_values_;  // distinct output slots

  std::unique_ptr<std::byte, void (*)(std::byte*)> arena_{nullptr, nullptr};
  // Scratch reused by every run.
  std::vector<const void*> operand_ptrs_;
  std::vector<void*> result_ptrs_;
  // Positions in operand_ptrs_ / result_ptrs_ of input and output slots.
  std::vector<uint32_t> dynamic_operands_, dynamic_results_;
  std::vector<BufferPtr> output_buffers_;  // per slot, during a run
  // MSTEP_CPU_PROFILE=1: seconds per call, summed over runs.
  std::vector<double> profile_;
  bool profile_registered_ = false;
  int64_t runs_ = 0;
  /// omp_get_max_threads() when build() last ran.
  int built_threads_ = 0;
};

}  // namespace mstep::cpu
