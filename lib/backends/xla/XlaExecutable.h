// The xla backend's executable: the whole step as one native function
// (XlaStep.h) in a shared object the compile half generated, one temp
// arena allocated once, and the runtime kernels of the ops the function
// calls out for. A run fills in the input and output pointers and makes
// one call; there is no per-op dispatch in the runtime.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backends/cpu/CpuKernel.h"
#include "lib/backends/cpu/SharedLibrary.h"
#include "lib/backends/xla/XlaStep.h"
#include "mstep/runtime/Backend.h"

namespace mstep::xla {

class XlaExecutable final : public Executable {
public:
  /// Loads `program`'s shared object, builds the kernel of each callout
  /// (the cpu backend's kernels, minus the families `disabled_families`
  /// turns off: RuntimeOptions::cpu_disable; a fusion the function does not
  /// compute runs on the ref interpreter), makes the oneDNN primitives of
  /// the step's gemm table (kXlaGemmCallsSymbol) and allocates the arena.
  /// `log_rebuilds` (MSTEP_LOG_RECOMPILES): say on stderr when a run
  /// rebuilds them for a new thread count.
  static absl::StatusOr<std::unique_ptr<XlaExecutable>>
  create(XlaProgram program, const std::string& disabled_families = "",
         bool log_rebuilds = false);

  using Executable::run;
  /// Runs the step. The function's own loops read the thread count at
  /// each run; when omp_get_max_threads() differs from the count the
  /// callouts (cpu kernels: oneDNN primitives, per-thread scratch) were
  /// built for, they are rebuilt first and the gemm table's primitives
  /// made for the new count (Metrics::thread_rebuilds; the gemm library
  /// keys its primitives by the count, XlaGemm.h).
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override;
  /// One: the step function.
  size_t num_kernels() const override { return 1; }
  /// The callouts that run a ref kernel (no cpu kernel covers the op), as
  /// the cpu backend counts them.
  absl::Span<const HostFallbackOp> host_fallbacks() const override { return fallbacks_; }

  /// The stored form (XlaFormat.h): the disk cache's and an exported
  /// graph's; Backend::deserialize() loads it without the compiler.
  absl::StatusOr<std::string> serialize(absl::string_view module_text) const override;

  int64_t arena_bytes() const { return program_.layout.arena_bytes; }
  /// The ops the function calls out for, in callout order ("sum", ...).
  std::vector<std::string> callout_names() const;
  size_t num_callouts() const { return program_.callouts.size(); }
  /// Whether the last run split the step's large loop nests over the
  /// OpenMP threads: it ran on more than one thread, outside any parallel
  /// region (decided once per run).
  bool last_run_split_nests() const;
  /// The OpenMP thread count the callouts were last built for.
  int built_for_threads() const { return built_threads_; }
  /// The gemm calls whose oneDNN primitives create() made (the step's gemm
  /// table, kXlaGemmCallsSymbol).
  size_t prepared_gemms() const { return prepared_gemms_; }

private:
  explicit XlaExecutable(XlaProgram program) : program_(std::move(program)) {}
  static int32_t run_callout(void* context, int64_t k, const void* const* operands,
                             void* const* results);
  /// (Re)builds callouts_ and fallbacks_ and makes the gemm table's
  /// primitives for the current thread count.
  absl::Status build_for_thread_count();

  XlaProgram program_;
  std::unique_ptr<cpu::SharedLibrary> library_;
  XlaStepFunction step_ = nullptr;
  std::vector<std::unique_ptr<cpu::CpuKernel>> callouts_;
  std::vector<HostFallbackOp> fallbacks_;
  std::string disabled_families_;
  bool log_rebuilds_ = false;
  int built_threads_ = 0;  // omp_get_max_threads() when the callouts were built
  size_t prepared_gemms_ = 0;
  XlaRuntimeCalls calls_{};
  std::unique_ptr<std::byte, void (*)(std::byte*)> arena_{nullptr, nullptr};
  // Per run.
  std::vector<void*> input_ptrs_, output_ptrs_;
  std::vector<BufferPtr> output_buffers_;
  absl::Status callout_error_;
};

} // namespace mstep::xla
