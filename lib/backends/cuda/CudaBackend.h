// The cuda backend's runtime half (issue 21 §2): opaque device buffers
// from a caching allocator, copies through pinned staging, and the seam's
// asynchronous protocol (Backend.h) over one stream and its events. It is
// registered as "cuda" in libmstep_runtime (CudaBackendRegistration.cpp);
// creating it where no usable driver is fails with "cuda: unavailable:
// <reason>", and every other backend keeps working. There is no compile
// half yet, so it runs no graphs: supports() is false for every op, and
// compiling for it fails in CompilerRegistry::get. Library-internal.
//
// The protocol on one stream: every piece of work (a kernel, a cuBLASLt
// call, a staging copy) is queued on the context's stream in program
// order. Work queued through enqueue() gets a ticket and an event recorded
// after it, and the buffers it reads or writes remember the ticket.
//  - copy_out waits for the event of the last work that writes the buffer
//    (its error, naming that work, is returned), then copies through
//    staging on the stream.
//  - copy_in needs no host wait for the work that reads the buffer: its
//    device copy is queued on the same stream after that work, so it cannot
//    overtake it. It returns once the host memory has been read.
//  - synchronize() waits for the stream and returns the first error of
//    deferred work since the last call.
// CUDA Graphs (issue 22): record_graph() captures the work queued through
// enqueue() while its callback runs (stream capture in thread-local mode)
// into a CudaGraph (CudaGraph.h), instantiated once. During a capture
// enqueue() queues without events (the work does not run), and allocate,
// copy_in, copy_out and synchronize fail: an allocation or a host sync
// cannot be part of a graph. The error names the call; the capture is
// ended and dropped, and the backend stays usable.
//
// A device fault (an illegal address) is sticky in CUDA: the context is
// unusable until the process ends. The error names the work that faulted
// (a replayed CUDA graph: the captured step and its work), says so, and
// every later call returns it instead of touching the driver. Any other
// failure of deferred work says the context is still usable.
//
// Thread-safety: every member may be called from any thread (one mutex).
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <utility>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/backends/cuda/CudaAllocator.h"
#include "lib/backends/cuda/CudaEvent.h"
#include "lib/backends/cuda/CudaStaging.h"
#include "mstep/runtime/Backend.h"

namespace mstep::cuda {

/// A buffer of the cuda backend: a block of device memory (no host
/// pointer), returned to the allocator's cache when the buffer goes.
class CudaBuffer final : public Buffer {
public:
  CudaBuffer(TensorType type, CudaAllocator::Block block, std::shared_ptr<CudaAllocator> allocator);
  /// A buffer inside a pool (CudaBackend::allocate_graph_pool): `block` is
  /// its part of the pool's block, which goes back when `pool` (shared by
  /// the pool's buffers) goes.
  CudaBuffer(TensorType type, CudaAllocator::Block block, std::shared_ptr<CudaAllocator> allocator,
             std::shared_ptr<const void> pool);
  ~CudaBuffer() override;
  /// The device address (0 for a buffer of 0 bytes); for kernels and
  /// library calls queued through CudaBackend::enqueue.
  CUdeviceptr pointer() const { return block_.pointer; }

private:
  friend class CudaBackend;
  CudaAllocator::Block block_;
  std::shared_ptr<CudaAllocator> allocator_;
  std::shared_ptr<const void> pool_; // set: block_ is part of a pool's block
  uint64_t last_write_ = 0; // ticket of the last enqueued work writing it (0: none)
};

class CudaBackend;
struct CublasLtApi;
class CudaAttentionRunner;
struct CudaAttentionInfo;

struct CudaBackendOptions {
  int device = 0;
  /// Rebuilds an executable from its stored form (deserialize()). The
  /// loader lives with CudaExecutable in libmstep_runtime, which sets it
  /// (load_cuda_executable); the GPU check's binary links this backend
  /// without it. Unset: deserialize() is Unimplemented (the stored form is
  /// then taken for module text and compiled again).
  std::function<absl::StatusOr<std::unique_ptr<Executable>>(CudaBackend&, absl::string_view blob)>
      load_executable;
  /// Pinned staging: two chunks of this size (copy_in/copy_out).
  size_t staging_chunk_bytes = CudaStaging::kDefaultChunkBytes;
  /// What the collectives dlopen (CudaCollective.h); empty:
  /// $MSTEP_NCCL_LIBRARY, else "libnccl.so.2" (the loader's path). Tests
  /// name a fake.
  std::string nccl_library;
  /// How long the NCCL communicator's init, and a wait for queued work once
  /// the backend has one, may take before the communicator is aborted
  /// (CudaCollective.h); 0:
  /// mstep::distributed's timeout (MSTEP_DIST_TIMEOUT).
  double collective_timeout_s = 0;
  /// Every cuBLASLt epilogue runs as its plan's fallback kernels, as if
  /// cuBLASLt had no algorithm for it (RuntimeOptions::cuda_no_epilogues).
  bool no_epilogues = false;
  /// Each epilogue fallback is printed once (RuntimeOptions::log_fallback).
  bool log_fallback = false;
  /// Executables time each plan step (CudaStepProfile.h) and print the
  /// report when destroyed (RuntimeOptions::cuda_profile).
  bool profile = false;
  /// The cuBLASLt table this backend's executables use; null: each loads
  /// cuBLASLt (load_cublaslt) when it has a matmul. Tests give a fake.
  std::shared_ptr<const CublasLtApi> cublaslt;
  /// What makes this backend's attention steps' runners
  /// (CudaAttentionFactory, CudaAttention.h); null: cuDNN's, made when an
  /// executable first has an attention step. Tests give a fake.
  std::function<absl::StatusOr<std::unique_ptr<CudaAttentionRunner>>(const CudaAttentionInfo&)>
      attention;
};

class CudaBackend final : public Backend {
public:
  /// The backend over `driver` (load_cuda_driver, or a fake in tests).
  static absl::StatusOr<std::unique_ptr<CudaBackend>>
  create(std::shared_ptr<const CudaDriver> driver, const CudaBackendOptions& options = {});
  /// load_cuda_driver() and create(): the registry's factory. Without a
  /// usable driver: UnavailableError "cuda: unavailable: <reason>".
  static absl::StatusOr<std::unique_ptr<Backend>> create_default(
      const CudaBackendOptions& options = {});
  /// From now on create_default() builds the backend over `driver`,
  /// `cublaslt` and `attention` (CudaBackendOptions) instead of loading
  /// libcuda, cuBLASLt and cuDNN: a test process whose registry's "cuda"
  /// is a fake (test/cuda/FakeRegistryCuda.h). Call it before the registry
  /// first creates the cuda backend.
  static void use_for_testing(std::shared_ptr<const CudaDriver> driver,
                              std::shared_ptr<const CublasLtApi> cublaslt,
                              decltype(CudaBackendOptions::attention) attention = nullptr);

  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
  DeviceType device_type() const override { return DeviceType::cuda; }
  /// A cuda executable from its serialized plan, through
  /// CudaBackendOptions::load_executable.
  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override;
  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override;
  /// One block of the caching allocator for all of `types` (each buffer
  /// 256-byte aligned in it), private to the buffers: a captured graph's
  /// static memory, sized at capture; the block goes back when the last
  /// buffer goes. Refused inside a capture, as allocate() is.
  absl::StatusOr<GraphPool> allocate_graph_pool(absl::Span<const TensorType> types) override;
  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override;
  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override;
  absl::Status synchronize() override;
  /// No op yet: the compile half (issue 21 §1) does not exist.
  bool supports(OpKind op, DType dtype) const override { return false; }

  bool records_graphs() const override { return true; }
  /// Captures the work `record` queues into a CudaGraph (see the top).
  absl::StatusOr<std::unique_ptr<DeviceGraph>> record_graph(
      const std::function<absl::Status()>& record) override;
  /// cuMemcpyDtoDAsync on the stream, through enqueue (so also in a capture).
  absl::Status copy_device(const BufferPtr& src, const BufferPtr& dst) override;

  /// Stream capture of the work `record` queues through enqueue() (thread-
  /// local mode): the captured graph, to instantiate and destroy, and the
  /// buffers the work writes in `writes`. `record`'s error comes first (the
  /// capture is then dropped); a call CUDA refused inside it invalidates
  /// it, which cuStreamEndCapture reports. CudaGraph's building block.
  /// `work` (when given) gets each piece of captured work, in order
  /// (enqueue's `what`, and the device ranges of its reads and writes).
  /// `checks` (when given) gets the checks of the captured work
  /// (enqueue's `check`), for each launch of the graph to run.
  struct CapturedWork {
    std::string what;
    std::vector<std::pair<CUdeviceptr, size_t>> ranges;  // (address, bytes)
  };
  absl::StatusOr<CUgraph> capture(const std::function<absl::Status()>& record,
                                  std::vector<const Buffer*>& writes,
                                  std::vector<CapturedWork>* work = nullptr,
                                  std::vector<std::function<absl::Status()>>* checks = nullptr);
  /// Whether a capture is in progress.
  bool capturing() const;

  /// Queues work on the stream: `queue` makes the driver or library calls
  /// (kernel launches, cuBLASLt) on context().stream(); `what` names it in
  /// errors ("kernel saxpy"). `writes` and `reads` are this backend's
  /// buffers. An error of `queue` itself is returned and nothing is
  /// tracked; a fault while the work runs surfaces at the next sync point.
  /// `check` (optional) runs on the host once the work is known complete
  /// (at the sync point that waits for it, or when done work is dropped):
  /// its error (the device-side error word's, CudaErrorWord.h) is returned
  /// to that wait, or kept for synchronize() when nobody waits; the
  /// context stays usable.
  absl::Status enqueue(absl::string_view what, const std::function<absl::Status()>& queue,
                       absl::Span<const Buffer* const> reads,
                       absl::Span<const Buffer* const> writes,
                       std::function<absl::Status()> check = nullptr);

  const CudaContext& context() const { return *context_; }
  CudaAllocator& allocator() { return *allocator_; }
  /// The allocator, shared: memory held past the backend (an executable's
  /// arena) goes back to it.
  std::shared_ptr<CudaAllocator> shared_allocator() const { return allocator_; }
  /// The device address of one of this backend's buffers.
  static CUdeviceptr device_pointer(const Buffer& buffer);
  /// OK, or why the context is unusable (a sticky device fault).
  absl::Status health() const;
  const CudaBackendOptions& options() const { return options_; }
  /// The collectives' state (the NCCL communicator, CudaCollective.h):
  /// made at the first collective, destroyed with the backend, before its
  /// context. Opaque here (nccl.h is optional).
  std::shared_ptr<void>& collective_state() { return collective_state_; }
  /// Set: waits for queued work poll its event, calling `watch` with what
  /// is waited for and the seconds waited so far (about every 100 us);
  /// its error ends the wait as a device failure of that work would (the
  /// NCCL collectives' timeout, CudaCollective.h). Unset: a wait blocks
  /// in cuEventSynchronize.
  using WaitWatch = std::function<absl::Status(absl::string_view what, double waited_s)>;
  void set_wait_watch(WaitWatch watch);

private:
  struct Work {
    uint64_t ticket;
    std::string what;
    CudaEvent done;
    std::function<absl::Status()> check;  // run once done (enqueue's)
  };
  CudaBackend() = default;
  /// Waits for the work of every ticket up to `ticket`; returns the error
  /// of the first that failed. Call with mutex_ held.
  absl::Status wait_for(uint64_t ticket);
  /// The error for a failed wait or call, naming `culprit` (the first
  /// work not known complete; null: none), with the driver's `result`
  /// (CUDA_SUCCESS: not at hand, the stream is queried). Records a sticky
  /// fault in lost_, and the error for synchronize(). Call with mutex_ held.
  absl::Status fail(absl::Status error, const Work* culprit, CUresult result = CUDA_SUCCESS);

  std::shared_ptr<const CudaContext> context_;
  std::shared_ptr<CudaAllocator> allocator_;
  CudaBackendOptions options_;
  std::unique_ptr<CudaStaging> staging_;
  mutable std::mutex mutex_;
  std::deque<Work> pending_;       // enqueued, not known complete, by ticket
  std::vector<CudaEvent> spare_events_;
  uint64_t next_ticket_ = 1;
  /// Fails when a capture is in progress: `what` cannot be captured.
  absl::Status refuse_in_capture(absl::string_view what) const;

  bool capturing_ = false;         // inside capture(): enqueue records, nothing runs
  std::thread::id capture_thread_;
  std::vector<const Buffer*> captured_writes_;
  std::vector<CapturedWork> captured_work_;  // enqueue's work in a capture
  std::vector<std::function<absl::Status()>> captured_checks_;  // enqueue's checks in a capture
  absl::Status first_error_;       // since the last synchronize()
  absl::Status lost_;              // set once: the context is unusable
  WaitWatch wait_watch_;           // set_wait_watch's
  std::shared_ptr<void> collective_state_;  // last: destroyed first
};

/// Whether `result` leaves the CUDA context unusable (a sticky error: an
/// illegal address or instruction, a misaligned address, a failed launch,
/// a device-side assert, ...).
bool is_sticky_cuda_error(CUresult result);

} // namespace mstep::cuda
