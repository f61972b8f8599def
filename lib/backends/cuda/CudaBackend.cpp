// CudaBackend: buffers from the caching allocator, copies through staging,
// and tickets and events for the asynchronous protocol (CudaBackend.h).
#include "lib/backends/cuda/CudaBackend.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaGraph.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mstep/core/Error.h"

namespace mstep::cuda {

namespace {

/// A buffer of another device is an error naming `what`.
absl::Status check_device(const Buffer& b, absl::string_view what) {
  if (b.device().type != DeviceType::cuda)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda ", what, " of a ", b.device().to_string(), " buffer"));
  return absl::OkStatus();
}

absl::Status check_buffer(const Buffer& b, absl::string_view what, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_device(b, what));
  if (bytes != b.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat("cuda ", what, " of ", bytes, " bytes with ",
                                                   b.type().to_string(), " (", b.type().bytes(),
                                                   " bytes)"));
  return absl::OkStatus();
}

CudaBuffer& as_cuda(const Buffer& b) {
  return const_cast<CudaBuffer&>(static_cast<const CudaBuffer&>(b));
}

} // namespace

bool is_sticky_cuda_error(CUresult result) {
  switch (result) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_LAUNCH_FAILED:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ECC_UNCORRECTABLE:
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return true;
  default:
    return false;
  }
}

CudaBuffer::CudaBuffer(TensorType type, CudaAllocator::Block block,
                       std::shared_ptr<CudaAllocator> allocator)
    : Buffer(std::move(type), Device{DeviceType::cuda, allocator->context().device().ordinal}),
      block_(block), allocator_(std::move(allocator)) {}

CudaBuffer::CudaBuffer(TensorType type, CudaAllocator::Block block,
                       std::shared_ptr<CudaAllocator> allocator, std::shared_ptr<const void> pool)
    : CudaBuffer(std::move(type), block, std::move(allocator)) {
  pool_ = std::move(pool);
}

// Stream-ordered: work still queued that uses the block runs before any
// work queued after it is handed out again (CudaAllocator.h). A pool's
// part goes back with the pool.
CudaBuffer::~CudaBuffer() {
  if (pool_ == nullptr) allocator_->release(block_);
}

absl::StatusOr<std::unique_ptr<CudaBackend>>
CudaBackend::create(std::shared_ptr<const CudaDriver> driver, const CudaBackendOptions& options) {
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudaContext> context,
                         CudaContext::create(std::move(driver), options.device));
  backend->context_ = std::move(context);
  backend->allocator_ = std::make_shared<CudaAllocator>(backend->context_);
  backend->options_ = options;
  MSTEP_ASSIGN_OR_RETURN(backend->staging_,
                         CudaStaging::create(*backend->context_, options.staging_chunk_bytes));
  return backend;
}

namespace {
/// use_for_testing's tables (set once, before the registry's first use).
struct TestingTables {
  std::shared_ptr<const CudaDriver> driver;
  std::shared_ptr<const CublasLtApi> cublaslt;
  decltype(CudaBackendOptions::attention) attention;
};
TestingTables& testing_tables() {
  static TestingTables tables;
  return tables;
}
} // namespace

void CudaBackend::use_for_testing(std::shared_ptr<const CudaDriver> driver,
                                  std::shared_ptr<const CublasLtApi> cublaslt,
                                  decltype(CudaBackendOptions::attention) attention) {
  testing_tables() = {std::move(driver), std::move(cublaslt), std::move(attention)};
}

absl::StatusOr<std::unique_ptr<Backend>> CudaBackend::create_default(
    const CudaBackendOptions& options) {
  std::shared_ptr<const CudaDriver> driver = testing_tables().driver;
  CudaBackendOptions chosen = options;
  if (driver != nullptr) {
    chosen.cublaslt = testing_tables().cublaslt;
    chosen.attention = testing_tables().attention;
  } else {
    MSTEP_ASSIGN_OR_RETURN(driver, load_cuda_driver());
  }
  absl::StatusOr<std::unique_ptr<CudaBackend>> backend = create(std::move(driver), chosen);
  if (!backend.ok())
    return absl::UnavailableError(
        absl::StrCat("cuda: unavailable: ", backend.status().message()));
  return std::unique_ptr<Backend>(std::move(*backend));
}

absl::StatusOr<std::unique_ptr<Executable>> CudaBackend::deserialize(absl::string_view blob,
                                                                     const RuntimeOptions&) {
  if (!options_.load_executable)
    return absl::UnimplementedError("cuda: this build's cuda backend loads no executables");
  return options_.load_executable(*this, blob);
}

CudaBackend::~CudaBackend() {
  // Drain the stream before the staging buffers and events go (the
  // allocator and context live on while buffers hold them).
  if (lost_.ok()) (void)context_->synchronize();
  pending_.clear();
  spare_events_.clear();
  staging_.reset();
  wait_watch_ = nullptr;      // it may refer to the communicator
  collective_state_.reset();  // the NCCL communicator, while the context lives
}

CUdeviceptr CudaBackend::device_pointer(const Buffer& buffer) { return as_cuda(buffer).pointer(); }

absl::Status CudaBackend::health() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lost_;
}

absl::Status CudaBackend::refuse_in_capture(absl::string_view what) const {
  if (!capturing_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cuda: ", what, " while a CUDA graph is being captured: it cannot be part of a graph "
      "(allocate buffers and copy host data before capturing)"));
}

bool CudaBackend::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capturing_;
}

absl::StatusOr<GraphPool> CudaBackend::allocate_graph_pool(absl::Span<const TensorType> types) {
  // Each buffer at an offset aligned as cuMemAlloc's blocks (and the arena's).
  constexpr size_t kAlign = kCudaArenaAlignment;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const TensorType& type : types) {
    offsets.push_back(total);
    total += (type.bytes() + kAlign - 1) / kAlign * kAlign;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MSTEP_RETURN_IF_ERROR(lost_);
    if (capturing_)
      return refuse_in_capture(
          absl::StrCat("allocating a ", total, "-byte pool for a graph's static buffers"));
  }
  absl::StatusOr<CudaAllocator::Block> block = allocator_->allocate(total);
  if (!block.ok())
    return absl::Status(block.status().code(),
                        absl::StrCat(block.status().message(), " (a captured graph's pool of ",
                                     types.size(), " static buffers)"));
  // The pool: its block goes back to the allocator with the last buffer.
  struct Pool {
    CudaAllocator::Block block;
    std::shared_ptr<CudaAllocator> allocator;
    ~Pool() { allocator->release(block); }
  };
  // Built in place (new): a temporary Pool would release the block.
  std::shared_ptr<const Pool> pool(new Pool{*block, allocator_});
  GraphPool result;
  result.bytes = static_cast<int64_t>(total);
  for (size_t i = 0; i < types.size(); ++i) {
    const CudaAllocator::Block part{types[i].bytes() == 0 ? 0 : block->pointer + offsets[i],
                                    types[i].bytes()};
    result.buffers.push_back(std::make_shared<CudaBuffer>(types[i], part, allocator_, pool));
  }
  return result;
}

absl::StatusOr<BufferPtr> CudaBackend::allocate(const TensorType& type) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MSTEP_RETURN_IF_ERROR(lost_);
    // The message is built only when refusing (allocate is on the lazy hot path).
    if (capturing_)
      return refuse_in_capture(absl::StrCat("allocating a buffer of ", type.to_string()));
  }
  absl::StatusOr<CudaAllocator::Block> block = allocator_->allocate(type.bytes());
  if (!block.ok())
    return absl::Status(block.status().code(),
                        absl::StrCat(block.status().message(), " (a buffer of ", type.to_string(),
                                     ")"));
  return std::make_shared<CudaBuffer>(type, *block, allocator_);
}

absl::Status CudaBackend::copy_in(Buffer& dst, const void* src, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(dst, "copy_in", bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(lost_);
  MSTEP_RETURN_IF_ERROR(refuse_in_capture("copy_in (a copy from host memory)"));
  if (bytes == 0) return absl::OkStatus();
  // No wait for the work that reads dst: the copy is queued on the same
  // stream after it (CudaBackend.h).
  absl::Status copied = staging_->copy_in(
      as_cuda(dst).pointer(), std::span(static_cast<const std::byte*>(src), bytes));
  if (!copied.ok()) return fail(std::move(copied), pending_.empty() ? nullptr : &pending_.front());
  return absl::OkStatus();
}

absl::Status CudaBackend::copy_out(const Buffer& src, void* dst, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(src, "copy_out", bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(lost_);
  MSTEP_RETURN_IF_ERROR(refuse_in_capture("copy_out (a host sync)"));
  MSTEP_RETURN_IF_ERROR(wait_for(as_cuda(src).last_write_));
  if (bytes == 0) return absl::OkStatus();
  absl::Status copied =
      staging_->copy_out(std::span(static_cast<std::byte*>(dst), bytes), as_cuda(src).pointer());
  if (!copied.ok()) return fail(std::move(copied), pending_.empty() ? nullptr : &pending_.front());
  return absl::OkStatus();
}

void CudaBackend::set_wait_watch(WaitWatch watch) {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_watch_ = std::move(watch);
}

absl::Status CudaBackend::synchronize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!lost_.ok()) return lost_;
  MSTEP_RETURN_IF_ERROR(refuse_in_capture("synchronize (a host sync)"));
  absl::Status waited = wait_for(next_ticket_ - 1);
  if (waited.ok()) {
    absl::Status synced = context_->synchronize();
    if (!synced.ok()) waited = fail(std::move(synced), nullptr);
  }
  absl::Status error = first_error_.ok() ? waited : first_error_;
  first_error_ = absl::OkStatus();
  return error;
}

absl::Status CudaBackend::enqueue(absl::string_view what, const std::function<absl::Status()>& queue,
                                  absl::Span<const Buffer* const> reads,
                                  absl::Span<const Buffer* const> writes,
                                  std::function<absl::Status()> check) {
  // Only the device: a graph launch passes every buffer of its step here.
  for (const Buffer* b : reads) MSTEP_RETURN_IF_ERROR(check_device(*b, what));
  for (const Buffer* b : writes) MSTEP_RETURN_IF_ERROR(check_device(*b, what));
  std::lock_guard<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(lost_);
  MSTEP_RETURN_IF_ERROR(context_->make_current());
  if (capturing_) {
    // Recorded, not run: no ticket or event (neither may be waited for
    // inside a capture), and no stream query on error.
    if (std::this_thread::get_id() != capture_thread_)
      return absl::FailedPreconditionError(
          absl::StrCat("cuda: ", what, " queued from another thread while a CUDA graph is being "
                       "captured on this backend"));
    if (absl::Status queued = queue(); !queued.ok())
      return absl::Status(queued.code(), absl::StrCat(what, ": ", queued.message()));
    captured_writes_.insert(captured_writes_.end(), writes.begin(), writes.end());
    CapturedWork& captured = captured_work_.emplace_back(CapturedWork{std::string(what), {}});
    for (auto list : {reads, writes})
      for (const Buffer* b : list) captured.ranges.emplace_back(device_pointer(*b), b->type().bytes());
    if (check) captured_checks_.push_back(std::move(check));
    return absl::OkStatus();
  }
  if (absl::Status queued = queue(); !queued.ok()) {
    absl::Status error(queued.code(), absl::StrCat(what, ": ", queued.message()));
    // Refused before it ran (a bad launch): nothing to track. Refused
    // because earlier work faulted: the context is lost.
    CUresult state = context_->api().cuStreamQuery(context_->stream());
    if (!is_sticky_cuda_error(state)) return error;
    return fail(std::move(error), pending_.empty() ? nullptr : &pending_.front(), state);
  }
  Work work{next_ticket_++, std::string(what), {}, std::move(check)};
  if (!spare_events_.empty()) {
    work.done = std::move(spare_events_.back());
    spare_events_.pop_back();
  } else {
    absl::StatusOr<CudaEvent> event = CudaEvent::create(*context_);
    if (!event.ok()) return fail(event.status(), pending_.empty() ? nullptr : &pending_.front());
    work.done = std::move(*event);
  }
  for (const Buffer* b : writes) as_cuda(*b).last_write_ = work.ticket;
  pending_.push_back(std::move(work));
  if (absl::Status recorded = pending_.back().done.record(); !recorded.ok())
    return fail(std::move(recorded), &pending_.front());
  // Keep the list short: drop the work already done, without waiting.
  while (pending_.size() > 64 &&
         context_->api().cuEventQuery(pending_.front().done.handle()) == CUDA_SUCCESS) {
    // Nobody waits for it: its check's error is for the next synchronize().
    if (pending_.front().check)
      if (absl::Status checked = pending_.front().check(); !checked.ok() && first_error_.ok())
        first_error_ = std::move(checked);
    spare_events_.push_back(std::move(pending_.front().done));
    pending_.pop_front();
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::wait_for(uint64_t ticket) {
  const CudaDriverApi& api = context_->api();
  while (!pending_.empty() && pending_.front().ticket <= ticket) {
    Work& work = pending_.front();
    CUresult result = CUDA_SUCCESS;
    if (!wait_watch_) {
      result = api.cuEventSynchronize(work.done.handle());
    } else {
      const auto start = std::chrono::steady_clock::now();
      while ((result = api.cuEventQuery(work.done.handle())) == CUDA_ERROR_NOT_READY) {
        const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
        if (absl::Status watched = wait_watch_(work.what, waited.count()); !watched.ok())
          return fail(std::move(watched), &work);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    if (result != CUDA_SUCCESS)
      return fail(cuda_error(api, result, "cuEventSynchronize",
                             absl::StrCat("waiting for ", work.what)),
                  &work, result);
    std::function<absl::Status()> check = std::move(work.check);
    spare_events_.push_back(std::move(work.done));
    pending_.pop_front();
    // The work ran: what it found (the error word) is this wait's error.
    if (check)
      if (absl::Status checked = check(); !checked.ok()) return checked;
  }
  return absl::OkStatus();
}

absl::Status CudaBackend::fail(absl::Status error, const Work* culprit, CUresult result) {
  // A sticky fault makes every later driver call fail with the same
  // result; where the failed call's result is not at hand, the stream's
  // state says whether the context is gone.
  if (result == CUDA_SUCCESS) result = context_->api().cuStreamQuery(context_->stream());
  const bool sticky = is_sticky_cuda_error(result);
  // Events complete in order, so the first work not known complete is the
  // one that faulted (each enqueue() records its own event).
  std::string where =
      culprit != nullptr
          ? absl::StrCat("cuda: ", culprit->what, " failed on the device (the first of ",
                         pending_.size(), " queued operation(s) not known to be complete)")
          : std::string("cuda: a device operation failed");
  absl::Status out(error.code(), absl::StrCat(where, ": ", error.message()));
  if (!sticky)
    out = absl::Status(out.code(),
                       absl::StrCat(out.message(), " (the CUDA context is still usable)"));
  if (sticky) {
    out = absl::Status(
        absl::StatusCode::kInternal,
        absl::StrCat(out.message(),
                     "; the CUDA context is unusable after this error (CUDA cannot recover "
                     "it): every later cuda call fails; restart the process"));
    lost_ = out;
  }
  if (first_error_.ok()) first_error_ = out;
  return out;
}

absl::StatusOr<CUgraph> CudaBackend::capture(const std::function<absl::Status()>& record,
                                              std::vector<const Buffer*>& writes,
                                              std::vector<CapturedWork>* work,
                                              std::vector<std::function<absl::Status()>>* checks) {
  const CudaDriverApi& api = context_->api();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MSTEP_RETURN_IF_ERROR(lost_);
    if (capturing_)
      return absl::FailedPreconditionError(
          "cuda: a CUDA graph capture is already in progress on this backend");
    MSTEP_RETURN_IF_ERROR(context_->make_current());
    // Thread-local: calls CUDA cannot capture fail on this thread only.
    MSTEP_RETURN_IF_ERROR(
        MSTEP_CUDA_CALL(api, cuStreamBeginCapture, context_->stream(),
                        CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    capturing_ = true;
    capture_thread_ = std::this_thread::get_id();
    captured_writes_.clear();
    captured_work_.clear();
    captured_checks_.clear();
  }
  absl::Status recorded = record();
  std::lock_guard<std::mutex> lock(mutex_);
  capturing_ = false;
  writes = std::exchange(captured_writes_, {});
  if (work != nullptr) *work = std::exchange(captured_work_, {});
  std::vector<std::function<absl::Status()>> captured_checks = std::exchange(captured_checks_, {});
  if (checks != nullptr) *checks = std::move(captured_checks);
  CUgraph graph = nullptr;
  CUresult ended = api.cuStreamEndCapture(context_->stream(), &graph);
  if (!recorded.ok() || ended != CUDA_SUCCESS) {
    if (graph != nullptr) api.cuGraphDestroy(graph);
    if (!recorded.ok()) return recorded;
    return cuda_error(api, ended, "cuStreamEndCapture",
                      "ending a CUDA graph capture: a call inside it cannot be captured");
  }
  return graph;
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> CudaBackend::record_graph(
    const std::function<absl::Status()>& record) {
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudaGraph> graph, CudaGraph::record(*this, record));
  return std::unique_ptr<DeviceGraph>(std::move(graph));
}

absl::Status CudaBackend::copy_device(const BufferPtr& src, const BufferPtr& dst) {
  if (src->type() != dst->type())
    return absl::InvalidArgumentError(absl::StrCat("cuda copy_device of ", src->type().to_string(),
                                                   " into ", dst->type().to_string()));
  const size_t bytes = src->type().bytes();
  if (bytes == 0) return absl::OkStatus();
  const Buffer* reads[] = {src.get()};
  const Buffer* writes[] = {dst.get()};
  return enqueue(
      absl::StrCat("device copy of ", src->type().to_string()),
      [&] {
        return MSTEP_CUDA_CALL(context_->api(), cuMemcpyDtoDAsync, as_cuda(*dst).pointer(),
                               as_cuda(*src).pointer(), bytes, context_->stream());
      },
      reads, writes);
}

} // namespace mstep::cuda
