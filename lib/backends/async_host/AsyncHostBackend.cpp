// async_host's runtime half: private buffers, the stream (one worker
// thread running queued work in order) and the sync points copy_in,
// copy_out and synchronize.
#include "lib/backends/async_host/AsyncHostBackend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::async_host {

namespace {

constexpr Device kDevice{DeviceType::async_host, 0};

template <typename T>
void fill(host::HostBuffer& b, T value) {
  T* p = b.data<T>();
  for (int64_t i = 0; i < b.numel(); ++i) p[i] = value;
}

/// Host memory of `type` holding poison: NaN for floats, 0xA5 bytes for
/// integers and bool (-1515870811 as i32), which no test expects.
std::shared_ptr<host::HostBuffer> poisoned(const TensorType& type) {
  auto b = std::make_shared<host::HostBuffer>(type, kDevice);
  switch (type.dtype) {
    case DType::f32: fill(*b, std::numeric_limits<float>::quiet_NaN()); break;
    case DType::f64: fill(*b, std::numeric_limits<double>::quiet_NaN()); break;
    case DType::bf16: fill(*b, uint16_t{0x7fc0}); break;
    case DType::f16: fill(*b, uint16_t{0x7e00}); break;
    case DType::i32:
    case DType::i64:
    case DType::boolean: std::memset(b->bytes(), 0xA5, type.bytes()); break;
  }
  return b;
}

AsyncHostBuffer& as_async(const Buffer& b) {
  return const_cast<AsyncHostBuffer&>(static_cast<const AsyncHostBuffer&>(b));
}

absl::Status check_buffer(const Buffer& b, absl::string_view what, size_t bytes) {
  if (b.device().type != DeviceType::async_host)
    return absl::InvalidArgumentError(absl::StrCat("async_host ", what, " of a ",
                                                   b.device().to_string(), " buffer"));
  if (bytes != b.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat(what, " of ", bytes, " bytes with ",
                                                   b.type().to_string(), " (", b.type().bytes(),
                                                   " bytes)"));
  return absl::OkStatus();
}

}  // namespace

AsyncHostBuffer::AsyncHostBuffer(TensorType type)
    : Buffer(type, kDevice), storage_(poisoned(type)) {}

AsyncHostBackend::AsyncHostBackend() : worker_([this] { worker_loop(); }) {}

AsyncHostBackend::~AsyncHostBackend() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  worker_.join();
}

absl::Status AsyncHostBackend::refuse_while_recording(absl::string_view what) const {
  if (!recording_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("async_host: ", what, " while a device graph is being recorded"));
}

absl::StatusOr<BufferPtr> AsyncHostBackend::allocate(const TensorType& type) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    MSTEP_RETURN_IF_ERROR(
        refuse_while_recording(absl::StrCat("allocating a buffer of ", type.to_string())));
  }
  return std::make_shared<AsyncHostBuffer>(type);
}

absl::Status AsyncHostBackend::copy_in(Buffer& dst, const void* src, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(dst, "copy_in", bytes));
  AsyncHostBuffer& b = as_async(dst);
  std::unique_lock<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(refuse_while_recording("copy_in"));
  wait_for(b.last_use_, lock);  // a queued read must see the old contents
  if (bytes) std::memcpy(b.storage_->bytes(), src, bytes);
  b.error_ = absl::OkStatus();
  return absl::OkStatus();
}

absl::Status AsyncHostBackend::copy_out(const Buffer& src, void* dst, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(src, "copy_out", bytes));
  AsyncHostBuffer& b = as_async(src);
  std::unique_lock<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(refuse_while_recording("copy_out"));
  wait_for(b.last_write_, lock);
  MSTEP_RETURN_IF_ERROR(b.error_);
  if (bytes) std::memcpy(dst, b.storage_->bytes(), bytes);
  return absl::OkStatus();
}

absl::Status AsyncHostBackend::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  MSTEP_RETURN_IF_ERROR(refuse_while_recording("synchronize"));
  wait_for(next_ticket_ - 1, lock);
  absl::Status error = std::move(first_error_);
  first_error_ = absl::OkStatus();
  return error;
}

bool AsyncHostBackend::supports(OpKind op, DType dtype) const {
  absl::StatusOr<Backend*> ref = BackendRegistry::get(DeviceType::ref);
  return ref.ok() && (*ref)->supports(op, dtype);
}

void AsyncHostBackend::enqueue(std::vector<BufferPtr> inputs, std::vector<BufferPtr> outputs,
                               HostWork work, int64_t delay_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recording_) {
    recorded_.push_back(Task{0, std::move(inputs), std::move(outputs), std::move(work), delay_us});
    return;
  }
  const uint64_t ticket = next_ticket_++;
  for (const BufferPtr& in : inputs) as_async(*in).last_use_ = ticket;
  for (const BufferPtr& out : outputs) {
    AsyncHostBuffer& b = as_async(*out);
    b.last_use_ = b.last_write_ = ticket;
  }
  queue_.push_back(Task{ticket, std::move(inputs), std::move(outputs), std::move(work), delay_us});
  queued_.notify_one();
}

void AsyncHostBackend::wait_for(uint64_t ticket, std::unique_lock<std::mutex>& lock) {
  done_.wait(lock, [&] { return completed_ >= ticket; });
}

void AsyncHostBackend::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and drained
    Task task = std::move(queue_.front());
    queue_.pop_front();
    // Every earlier task is done, so the inputs' memory and errors are
    // final; copy_in cannot overwrite them while this task is queued.
    absl::Status input_error;
    std::vector<BufferPtr> host_inputs;
    for (const BufferPtr& in : task.inputs) {
      const AsyncHostBuffer& b = as_async(*in);
      if (!b.error_.ok() && input_error.ok()) input_error = b.error_;
      host_inputs.push_back(b.storage_);
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(task.delay_us));
    absl::StatusOr<std::vector<BufferPtr>> results =
        input_error.ok() ? task.work(host_inputs) : absl::StatusOr<std::vector<BufferPtr>>(input_error);
    host_inputs.clear();
    lock.lock();
    finish(task, std::move(results));
    completed_ = task.ticket;
    done_.notify_all();
    lock.unlock();
    task = Task{};  // release the buffers outside the lock
    lock.lock();
  }
}

void AsyncHostBackend::finish(Task& task, absl::StatusOr<std::vector<BufferPtr>> results) {
  if (results.ok() && results->size() != task.outputs.size())
    results = absl::InternalError(absl::StrCat("async_host work returned ", results->size(),
                                               " results for ", task.outputs.size(), " outputs"));
  if (!results.ok()) {
    if (first_error_.ok()) first_error_ = results.status();
    // Failed work writes nothing: a donated input keeps its contents (a
    // failed step keeps parameters and optimizer state, as on the host
    // backends); every other output holds the error.
    for (const BufferPtr& out : task.outputs)
      if (std::find(task.inputs.begin(), task.inputs.end(), out) == task.inputs.end())
        as_async(*out).error_ = results.status();
    return;
  }
  for (size_t k = 0; k < task.outputs.size(); ++k) {
    AsyncHostBuffer& out = as_async(*task.outputs[k]);
    auto result = std::static_pointer_cast<host::HostBuffer>((*results)[k]);
    // A result that is an input's (or an earlier output's) memory is
    // copied: two buffers never share memory, so copy_in into one cannot
    // change the other.
    bool shared = false;
    for (const BufferPtr& in : task.inputs) shared |= as_async(*in).storage_ == result;
    for (size_t j = 0; j < k; ++j) shared |= as_async(*task.outputs[j]).storage_ == result;
    if (shared) {
      if (out.storage_ != result)  // else a donated input passed through
        std::memcpy(out.storage_->bytes(), result->bytes(), out.type().bytes());
    } else {
      out.storage_ = std::move(result);
    }
    out.error_ = absl::OkStatus();
  }
}

// ---- Device graphs (see the header) ----

/// The recorded work, queued again at each launch.
class AsyncHostGraph final : public DeviceGraph {
 public:
  AsyncHostGraph(AsyncHostBackend& backend, std::vector<AsyncHostBackend::Task> tasks)
      : backend_(backend), tasks_(std::move(tasks)) {}
  absl::Status launch() override {
    for (const AsyncHostBackend::Task& t : tasks_)
      backend_.enqueue(t.inputs, t.outputs, t.work, t.delay_us);
    return absl::OkStatus();
  }
  absl::Status update(const std::function<absl::Status()>& record) override {
    MSTEP_ASSIGN_OR_RETURN(tasks_, backend_.capture(record));
    ++updates_;
    return absl::OkStatus();
  }
  int64_t updates() const override { return updates_; }
  /// As CUDA's node patching: each recorded task whose inputs or outputs
  /// name a moved buffer names its new one (its work reads and writes
  /// them through those lists).
  int64_t rebind(absl::Span<const std::pair<BufferPtr, BufferPtr>> moved) override {
    int64_t patched = 0;
    for (AsyncHostBackend::Task& t : tasks_) {
      bool changed = false;
      for (auto* list : {&t.inputs, &t.outputs})
        for (BufferPtr& b : *list)
          for (const auto& [from, to] : moved)
            if (b == from) b = to, changed = true;
      patched += changed;
    }
    return patched;
  }

 private:
  AsyncHostBackend& backend_;
  std::vector<AsyncHostBackend::Task> tasks_;
  int64_t updates_ = 0;
};

absl::StatusOr<std::unique_ptr<Executable>> AsyncHostBackend::deserialize(
    absl::string_view blob, const RuntimeOptions& options) {
  return load_async_host_executable(*this, blob, options);
}

void AsyncHostBackend::set_records_graphs(bool on) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_graphs_ = on;
}

bool AsyncHostBackend::records_graphs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_graphs_;
}

bool AsyncHostBackend::recording() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recording_;
}

absl::StatusOr<std::vector<AsyncHostBackend::Task>> AsyncHostBackend::capture(
    const std::function<absl::Status()>& record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (recording_) return absl::FailedPreconditionError("async_host: already recording");
    recording_ = true;
    recorded_.clear();
  }
  absl::Status recorded = record();
  std::lock_guard<std::mutex> lock(mutex_);
  recording_ = false;
  std::vector<Task> tasks = std::exchange(recorded_, {});
  if (!recorded.ok()) return recorded;
  return tasks;
}

absl::StatusOr<std::unique_ptr<DeviceGraph>> AsyncHostBackend::record_graph(
    const std::function<absl::Status()>& record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!records_graphs_) return Backend::record_graph(record);
  }
  MSTEP_ASSIGN_OR_RETURN(std::vector<Task> tasks, capture(record));
  return std::unique_ptr<DeviceGraph>(new AsyncHostGraph(*this, std::move(tasks)));
}

absl::Status AsyncHostBackend::copy_device(const BufferPtr& src, const BufferPtr& dst) {
  MSTEP_RETURN_IF_ERROR(check_buffer(*src, "copy_device", src->type().bytes()));
  MSTEP_RETURN_IF_ERROR(check_buffer(*dst, "copy_device", src->type().bytes()));
  // dst is an input too, so a failed src leaves it as it was (finish()).
  enqueue({src, dst}, {dst},
          [](const std::vector<BufferPtr>& host) -> absl::StatusOr<std::vector<BufferPtr>> {
            return std::vector<BufferPtr>{host[0]};  // shared with an input: copied
          },
          0);
  return absl::OkStatus();
}

namespace {

const bool registered = [] {
  BackendRegistry::register_backend("async_host", DeviceType::async_host, [] {
    return std::unique_ptr<Backend>(new AsyncHostBackend());
  });
  return true;
}();

}  // namespace
}  // namespace mstep::async_host
