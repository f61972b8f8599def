// async_host: the conformance test backend for asynchronous execution
// (Backend.h, "Asynchronous execution"). Its executables are the ref
// backend's, run on one worker thread (the backend's stream) a delay after
// they are queued; run() returns at once with result buffers that hold
// poison (NaN, or 0xA5 bytes for integers and bool) until the work that
// writes them completes. Its buffers keep their memory private: no host
// pointer is handed out and wrap_host is Unimplemented. So a runtime that
// reads a result before its sync point, or reads a buffer's memory other
// than through copy_out, gets poison or fails here.
//
// Device graphs, when a test turns them on (set_records_graphs): a model of
// CUDA Graphs' stream capture for Graph's device replay. record_graph keeps
// the work queued while its callback runs instead of running it (no
// allocation, copy_in, copy_out or synchronize may happen meanwhile; an
// executable given no buffer for an output fails, as an allocation inside
// a CUDA graph does), and each launch queues that work again over the same
// buffers. Off by default: Graph then replays executables one by one.
//
// Only test binaries link
// it (test/CMakeLists.txt); it is in no production device list.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "lib/backends/host/HostBuffer.h"
#include "mstep/runtime/Backend.h"

namespace mstep::async_host {

class AsyncHostBackend;

/// A buffer of async_host: host memory only this backend touches, and the
/// queued work that reads or writes it. Every member is guarded by the
/// backend's mutex.
class AsyncHostBuffer final : public Buffer {
 public:
  /// A buffer holding poison until it is written.
  explicit AsyncHostBuffer(TensorType type);

 private:
  friend class AsyncHostBackend;
  std::shared_ptr<host::HostBuffer> storage_;
  uint64_t last_write_ = 0;  // ticket of the last queued work writing it (0: none)
  uint64_t last_use_ = 0;    // ticket of the last queued work reading or writing it
  absl::Status error_;       // of the work that wrote it, if that failed
};

/// Work for the stream: reads the inputs' memory, returns the outputs'
/// (one HostBuffer per output) or the error.
using HostWork = std::function<absl::StatusOr<std::vector<BufferPtr>>(
    const std::vector<BufferPtr>& host_inputs)>;

class AsyncHostBackend final : public Backend {
 public:
  AsyncHostBackend();
  ~AsyncHostBackend() override;  // drains the stream, then stops the worker

  absl::string_view name() const override { return "async_host"; }
  DeviceType device_type() const override { return DeviceType::async_host; }

  absl::StatusOr<BufferPtr> allocate(const TensorType& type) override;
  absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) override;
  absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) override;
  absl::Status synchronize() override;
  bool supports(OpKind op, DType dtype) const override;
  /// An executable from its stored form (ref's, load_async_host_executable):
  /// exported graphs load here (LoadedGraph, with device graphs on).
  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions& options) override;

  /// Whether record_graph records (else Unimplemented, the default).
  void set_records_graphs(bool on);
  bool records_graphs() const override;
  /// Whether a recording is in progress (an allocation must fail).
  bool recording() const;
  absl::StatusOr<std::unique_ptr<DeviceGraph>> record_graph(
      const std::function<absl::Status()>& record) override;
  /// Queued like a run; `dst` keeps its contents if `src` holds an error.
  absl::Status copy_device(const BufferPtr& src, const BufferPtr& dst) override;

  /// Queues `work` to run `delay_us` after the worker reaches it, on the
  /// memory of `inputs` (async_host buffers) once every earlier work is
  /// done; its results are then moved into `outputs` (async_host buffers:
  /// new ones hold poison until then; an output may be one of `inputs`,
  /// donated). A failure, or a failed input, writes nothing: it poisons the
  /// outputs that are not inputs with the error, for copy_out and
  /// synchronize() to report, and a donated input keeps its contents.
  void enqueue(std::vector<BufferPtr> inputs, std::vector<BufferPtr> outputs, HostWork work,
               int64_t delay_us);

 private:
  friend class AsyncHostGraph;
  struct Task {
    uint64_t ticket;
    std::vector<BufferPtr> inputs, outputs;
    HostWork work;
    int64_t delay_us;
  };
  /// Blocks until every work up to `ticket` is done; call with `lock` held.
  void wait_for(uint64_t ticket, std::unique_lock<std::mutex>& lock);
  void worker_loop();
  void finish(Task& task, absl::StatusOr<std::vector<BufferPtr>> results);
  /// The work `record` queues, kept instead of run (record_graph).
  absl::StatusOr<std::vector<Task>> capture(const std::function<absl::Status()>& record);
  /// Fails while recording: `what` cannot be part of a graph.
  absl::Status refuse_while_recording(absl::string_view what) const;

  mutable std::mutex mutex_;
  std::condition_variable queued_, done_;
  std::deque<Task> queue_;
  uint64_t next_ticket_ = 1;
  uint64_t completed_ = 0;    // every ticket <= this one is done
  absl::Status first_error_;  // since the last synchronize()
  bool stopping_ = false;
  bool records_graphs_ = false;
  bool recording_ = false;
  std::vector<Task> recorded_;  // while recording
  std::thread worker_;        // started last, joined first
};

/// The executable of ref's stored form `blob` on `backend`
/// (AsyncHostCompiler.cpp); ref's errors for a blob that is not one.
absl::StatusOr<std::unique_ptr<Executable>> load_async_host_executable(
    AsyncHostBackend& backend, absl::string_view blob, const RuntimeOptions& options);

}  // namespace mstep::async_host
