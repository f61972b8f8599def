// The cuda backend's executable: a CudaPlan run on a CudaBackend. The
// plan's arena (the intermediate values) and a buffer for each
// intermediate the plan leaves outside it are allocated once, from the
// backend's caching allocator, when the executable is created; each run
// allocates its outputs (unless buffers are offered for them) from the
// same allocator, then queues the steps (kernel launches, cuBLASLt
// matmuls through the runtime's CublasLtMatmul, cuDNN SDPA executions
// through CudaAttention.h's runners) in order through
// CudaBackend::enqueue (one stream, an event after each: the seam's
// asynchronous contract) and returns without waiting. Library-internal;
// runtime half (no MLIR).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaAttention.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaCollective.h"
#include "lib/backends/cuda/CudaModule.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "lib/backends/cuda/CudaPlanValidation.h"
#include "lib/backends/cuda/CudaStepProfile.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cuda {

class CudaExecutable final : public Executable {
 public:
  /// Loads every kernel of `plan` on `backend`'s device: the cubin built
  /// for its architecture, else the PTX (JIT). A plan that refers to a
  /// value or kernel it does not have is an error. A plan with cuBLASLt
  /// steps gets a CublasLtMatmul on the backend's context over `cublaslt`
  /// (null: load_cublaslt(); tests give a fake table); a missing library
  /// is the loader's "cublasLt: unavailable" error. A plan with attention
  /// steps gets a runner per step from `attention` (null:
  /// cudnn_attention_factory(backend): cuDNN's graphs built and finalized
  /// here, on the device) and one workspace, the largest any step needs,
  /// from the backend's allocator; a step that cannot be made is an error
  /// naming its op. A plan with collectives loads NCCL and gets the
  /// backend's communicator (CudaCollective.h).
  static absl::StatusOr<std::unique_ptr<CudaExecutable>> create(
      CudaBackend& backend, CudaPlan plan, std::shared_ptr<const CublasLtApi> cublaslt = nullptr,
      CudaAttentionFactory attention = nullptr);

  ~CudaExecutable() override;

  using Executable::run;
  /// No input is written in place: intermediates are at their offsets in
  /// the arena (launch arguments are its base + offset); an output goes to
  /// the buffer offered for it (Donation::outputs: a captured graph's
  /// static outputs) or else gets a buffer of its own (the caching
  /// allocator makes that cheap). An allocation that fails (inside a CUDA
  /// graph capture, always) names the value and the step that writes it.
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override;
  size_t num_kernels() const override { return plan_.launches.size(); }

  /// The plan as this device runs it: each cuBLASLt call whose epilogue
  /// the device's cuBLASLt has no algorithm for (asked at create, as every
  /// call's) without it, followed by its fallback kernels
  /// (apply_epilogue_fallbacks).
  const CudaPlan& plan() const { return plan_; }
  /// The matmuls (plan indices) that run as epilogue fallbacks.
  const std::vector<int>& epilogue_fallbacks() const { return epilogue_fallbacks_; }
  /// The serialized plan (CudaPlanFormat.h), as compiled (epilogues and
  /// their fallbacks): the disk cache's and an exported graph's form;
  /// `module_text` is not needed to load it.
  absl::StatusOr<std::string> serialize(absl::string_view module_text) const override;
  /// The device address of the arena (0: none).
  CUdeviceptr arena_pointer() const { return arena_.pointer; }
  /// The attention steps' shared workspace (0: none or empty).
  CUdeviceptr attention_workspace() const { return workspace_.pointer; }
  /// The device address of the error word (0: the plan has none).
  CUdeviceptr error_word_pointer() const;
  /// The step times of its runs (CudaBackendOptions::profile), or null.
  const CudaStepProfile* profile() const { return profile_.get(); }

 private:
  /// One run's values: a buffer (inputs, outputs) or none (in the arena),
  /// and each one's device address.
  struct RunValues {
    std::vector<BufferPtr> buffers;
    std::vector<CUdeviceptr> pointers;
    /// Appends the buffers of `ids` that are not in the arena.
    void add_buffers(const std::vector<int>& ids, std::vector<const Buffer*>& out) const;
  };
  CudaExecutable(CudaBackend& backend, CudaPlan plan) : backend_(backend), plan_(std::move(plan)) {}
  /// "kernel <name> (<op>)" (or the cuBLASLt or cuDNN step) that writes
  /// value `value`, for errors.
  std::string writer_of(int value) const;
  /// Asks cuBLASLt's heuristic for every matmul of the plan; each epilogue
  /// without an algorithm (every one, with CudaBackendOptions::
  /// no_epilogues) becomes its fallback (counted in
  /// Metrics::epilogue_fallbacks, printed once with log_fallback). Errors:
  /// a call without an algorithm and no fallback, naming the op and shape.
  absl::Status choose_epilogue_fallbacks();
  /// Queues cuBLASLt step `launch` (one call per batch matrix).
  absl::Status run_matmul(const CudaLaunchStep& launch, const RunValues& values);
  /// Queues attention step `launch` (one cuDNN SDPA execution).
  absl::Status run_attention(const CudaLaunchStep& launch, const RunValues& values);
  /// Queues collective step `launch` (one NCCL call).
  absl::Status run_collective(const CudaLaunchStep& launch, const RunValues& values);
  /// Queues kernel step `launch`.
  absl::Status run_kernel(const CudaLaunchStep& launch, const RunValues& values);
  /// Queues step `launch`, whatever its kind.
  absl::Status run_step(const CudaLaunchStep& launch, const RunValues& values);

  CudaBackend& backend_;
  CudaPlan plan_;
  std::unique_ptr<CudaPlan> compiled_plan_;  // plan_ before its epilogue fallbacks (when any)
  std::vector<int> epilogue_fallbacks_;
  std::vector<std::unique_ptr<CudaKernelModule>> modules_;  // one per kernel launched
  std::vector<const CudaKernel*> kernels_;  // plan_.kernels' order; null: not launched
  std::unique_ptr<CublasLtMatmul> matmul_;                  // when the plan has matmuls
  std::vector<std::unique_ptr<CudaAttentionRunner>> attention_;  // plan_.attentions' order
  std::unique_ptr<CudaCollectives> collectives_;            // when the plan has collectives
  CudaAllocator::Block arena_;                              // plan_.arena_bytes
  std::vector<BufferPtr> scratch_;  // per value: an intermediate outside the arena's buffer
  CudaAllocator::Block workspace_;                          // the attention steps'
  std::shared_ptr<CudaAllocator> arena_allocator_;          // arena_'s and workspace_'s
  /// The error word's host side (CudaErrorWord.h), shared with the checks
  /// queued on the backend (they may outlive the executable).
  struct ErrorWordHost;
  std::shared_ptr<ErrorWordHost> error_host_;  // null: the plan has no error word
  std::unique_ptr<CudaStepProfile> profile_;   // null: not profiled
  /// Queues the error word's reset (before the run's launches), or its
  /// copy to the host and the check that reads it there (after them; the
  /// check is done as the run's `outputs` are waited for).
  absl::Status reset_error_word(const RunValues& values);
  absl::Status check_error_word(const RunValues& values, const std::vector<BufferPtr>& outputs);
};

/// Rebuilds an executable on `backend` from CudaExecutable::serialize()'s
/// bytes (the backend's deserialize()). Unimplemented when `blob` is not a
/// serialized cuda plan; DataLoss for a corrupt or truncated one; then
/// create()'s errors (a kernel that loads neither as cubin nor PTX).
/// `cublaslt` and `attention` as for create().
absl::StatusOr<std::unique_ptr<Executable>> load_cuda_executable(
    CudaBackend& backend, absl::string_view blob,
    std::shared_ptr<const CublasLtApi> cublaslt = nullptr, CudaAttentionFactory attention = nullptr);

}  // namespace mstep::cuda
