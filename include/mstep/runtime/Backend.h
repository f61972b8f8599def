// Backend: the runtime half every execution target implements (IREE's HAL
// device, tinygrad's allocator + program): memory, copies, and loading
// serialized executables. Its compile half (BackendCompiler, in
// libmstep_compiler) turns an MLIR module into an Executable of this
// backend. lib/backends/ref is the model to copy. No MLIR here: this is
// libmstep_runtime's interface.
//
// Asynchronous execution (the protocol every backend follows):
// 1. Executable::run() may return before its work is done. The buffers it
//    returns exist at once; their contents are defined only once the work
//    that writes them completes.
// 2. A backend orders its own work: everything queued on one backend runs
//    in the order it was queued (one stream or queue per backend), so a
//    run() may take the not-yet-written outputs of an earlier run() as
//    inputs without waiting.
// 3. Host code reads a buffer only through Backend::copy_out, which first
//    waits for the work that writes that buffer; copy_in first waits for
//    the work that reads or writes it (a later write must not overtake an
//    earlier read). Nothing else waits: these are the sync points (item(),
//    to_vector(), a checkpoint, a transfer between backends all end in
//    copy_out).
// 4. An error of deferred work surfaces at the next sync point that
//    touches a buffer it was to write (and at synchronize()); run() itself
//    reports only what it can check before queuing (arity, types).
// ref and cpu run synchronously, which satisfies all of this trivially;
// the test backend async_host (lib/backends/async_host) defers every run
// and poisons its results until they are written.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "mstep/core/Device.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/Buffer.h"
#include "mstep/runtime/Options.h"

namespace mstep {

using BufferPtr = std::shared_ptr<Buffer>;

/// An op a backend runs with the ref backend's host kernel because it has
/// no kernel of its own; the runtime counts each such call as a fallback.
struct HostFallbackOp {
  OpKind op;
  DType dtype;
  /// Why the backend did not run it (empty where it does not say);
  /// MSTEP_LOG_FALLBACK=1 prints it.
  std::string reason = {};
};

/// What the caller of Executable::run() hands over besides read access to
/// its inputs: the donation protocol (IREE's buffer donation, JAX's
/// donate_argnums, XLA's input-output aliasing).
///
/// 1. The memory plan states what may alias: input i may hold output
///    TraceGraph::donated_to[i] (the tensor it feeds was replaced by that
///    output, `w.copy_(w - lr * g)`), and any output may be written into a
///    buffer the caller offers for it.
/// 2. The caller states what it owns, from its own bookkeeping (the tracer:
///    Buffer::holders() and its pending tensors; replay: its bindings),
///    never from a reference count: `inputs[i]` nonzero donates input i
///    (after run() starts, nothing reads that buffer but run() itself), and
///    `outputs[k]` non-null offers a buffer of output k's type that nothing
///    else reads or writes.
/// 3. The executable writes into a buffer only where both agree, and never
///    inspects reference counts: an extra holder of a buffer, such as
///    in-flight work on an asynchronous device, changes nothing.
/// A handed-over buffer that run() did not use stays the caller's. If
/// run() fails, handed-over buffers hold unspecified values.
struct Donation {
  /// Empty (nothing donated) or one flag per input.
  absl::Span<const uint8_t> inputs;
  /// Empty (nothing offered) or one entry per output: null, or a buffer.
  absl::Span<const BufferPtr> outputs;
};

/// A compiled graph. run() takes one buffer per graph input (in
/// TraceGraph::input_types order) and returns one buffer per output: a new
/// buffer, a donated input or an offered buffer (see Donation), or an
/// input passed through unchanged. Inputs not donated are only read. It
/// may return before the work is done (see the protocol at the top).
/// Thread-safety: run() may not be called concurrently on one executable.
class Executable {
 public:
  virtual ~Executable() = default;
  /// run() that donates nothing: every input is only read.
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs) {
    return run(inputs, Donation{});
  }
  virtual absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                                     const Donation& donation) = 0;
  /// Kernel launches per run (a fusion counts once), for replay figures.
  virtual size_t num_kernels() const { return 0; }
  /// The ops each run() executes as host fallbacks (empty for most).
  virtual absl::Span<const HostFallbackOp> host_fallbacks() const { return {}; }
  /// The disk-cache form of this executable, given the optimized module it
  /// was compiled from. The default is the module text itself, which the
  /// runtime compiles again on load; a backend with native code appends it
  /// so that Backend::deserialize() skips code generation.
  virtual absl::StatusOr<std::string> serialize(absl::string_view module_text) const {
    return std::string(module_text);
  }
};

/// Device work recorded once and launched again as a whole, without the
/// host queuing each kernel (CUDA Graphs): Backend::record_graph's result,
/// Graph::replay's fast path. The work reads and writes the buffers it was
/// recorded with, at their addresses: they must stay alive, unchanged in
/// size, until the graph is destroyed or update()d to others.
/// Thread-safety: one thread at a time.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// Queues the recorded work once (asynchronous, as Executable::run: its
  /// buffers' readers wait for it through copy_out).
  virtual absl::Status launch() = 0;
  /// Records `record` again (the same work over other buffers, when an
  /// input moved to another address) and updates the launchable graph's
  /// parameters in place rather than building it anew. On error the
  /// graph is unchanged.
  virtual absl::Status update(const std::function<absl::Status()>& record) = 0;
  /// update() calls that succeeded.
  virtual int64_t updates() const = 0;
  /// Points the recorded work's uses of each moved buffer (first) at its
  /// new one (second, of the same type) in place, recording nothing: the
  /// number of recorded operations changed. -1 where it cannot (the
  /// backend cannot patch, or work it cannot patch may read a moved
  /// buffer): then update() is the way, and it replaces whatever this
  /// changed. The caller makes sure no buffer the work keeps using shares
  /// a first's or a second's memory (addresses identify the uses).
  virtual int64_t rebind(absl::Span<const std::pair<BufferPtr, BufferPtr>> moved) {
    (void)moved;
    return -1;
  }
};

/// Backend::allocate_graph_pool's result: one buffer per requested type,
/// in order, and the bytes of device memory they were given together.
struct GraphPool {
  std::vector<BufferPtr> buffers;
  int64_t bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// Whether record_graph records (false: the default, Unimplemented).
  virtual bool records_graphs() const { return false; }
  /// Records, without running it, the device work that `record` queues on
  /// this backend (Executable::run and copy_device calls) into a
  /// DeviceGraph. Work that cannot be recorded (an allocation, a host
  /// sync) fails `record` with an error naming it; the backend stays
  /// usable. Unimplemented (the default, without calling `record`): this
  /// backend has no such graphs, and Graph::replay runs executables one by
  /// one.
  virtual absl::StatusOr<std::unique_ptr<DeviceGraph>> record_graph(
      const std::function<absl::Status()>& record) {
    (void)record;
    return absl::UnimplementedError(absl::StrCat(name(), " records no device graphs"));
  }
  /// Copies `src` into `dst` (the same type) on the device, queued after
  /// the work that writes `src` (asynchronous). Unimplemented by default.
  virtual absl::Status copy_device(const BufferPtr& src, const BufferPtr& dst) {
    (void)src, (void)dst;
    return absl::UnimplementedError(absl::StrCat(name(), " has no device-to-device copy"));
  }

  virtual absl::string_view name() const = 0;
  virtual DeviceType device_type() const = 0;

  /// Rebuilds an executable from Executable::serialize(). Unimplemented
  /// (the default) means the blob is module text for the compile half.
  virtual absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                                  const RuntimeOptions& options) {
    (void)options;
    return absl::UnimplementedError(absl::StrCat(name(), " has no native executable format"));
  }

  virtual absl::StatusOr<BufferPtr> allocate(const TensorType& type) = 0;
  /// Buffers of `types` for a device graph's static results, allocated
  /// before it is recorded and held for its life: memory private to the
  /// graph. A backend with device graphs may give them one allocation
  /// sized here (cuda: one block, freed with the last of the buffers).
  /// The default allocates each, so `bytes` is the sum of their sizes.
  virtual absl::StatusOr<GraphPool> allocate_graph_pool(absl::Span<const TensorType> types) {
    GraphPool pool;
    for (const TensorType& type : types) {
      absl::StatusOr<BufferPtr> buffer = allocate(type);
      if (!buffer.ok()) return buffer.status();
      pool.buffers.push_back(*std::move(buffer));
      pool.bytes += static_cast<int64_t>(type.bytes());
    }
    return pool;
  }
  /// A buffer over host memory the caller owns (zero-copy), or
  /// Unimplemented when this backend cannot use it in place (the caller
  /// then copies). `release` runs once the buffer is no longer used.
  virtual absl::StatusOr<BufferPtr> wrap_host(const TensorType& type, void* data,
                                              std::function<void()> release) {
    return absl::UnimplementedError(absl::StrCat(name(), " cannot use host memory in place"));
  }
  /// Copies `bytes` from host memory into `dst` (exactly dst.type().bytes()),
  /// after the queued work that reads or writes `dst` is done. `src` may be
  /// reused when this returns.
  virtual absl::Status copy_in(Buffer& dst, const void* src, size_t bytes) = 0;
  /// Copies the whole of `src` to host memory, after the queued work that
  /// writes `src` is done; that work's error, if it failed, is returned.
  virtual absl::Status copy_out(const Buffer& src, void* dst, size_t bytes) = 0;
  /// Waits for all work queued on this backend; returns the first error of
  /// deferred work since the last synchronize(), if any.
  virtual absl::Status synchronize() = 0;
  /// Whether this backend's executables run `op` for `dtype` natively.
  virtual bool supports(OpKind op, DType dtype) const = 0;
};

/// Registry of backends by name ("ref", "cpu", "cuda"). Each backend registers
/// itself from a static initializer in its own library, with its name and
/// the DeviceType that Device uses for it; a name and a type each belong to
/// one backend. A backend is created on first use, once.
/// Thread-safety: every member may be called from any thread; concurrent
/// first uses of one backend get the same instance. Backends live as long
/// as their registry (the global one: the process).
class BackendRegistry {
 public:
  using Factory = std::unique_ptr<Backend> (*)();
  /// A factory that can fail (a device whose driver is missing): its error
  /// is what backend() returns, every time, and the other backends work.
  using FallibleFactory = absl::StatusOr<std::unique_ptr<Backend>> (*)();

  BackendRegistry();
  ~BackendRegistry();
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  /// The process's registry, the one the static functions below use.
  static BackendRegistry& global();

  /// Adds a backend; AlreadyExists when `name` or `type` is taken.
  absl::Status add(absl::string_view name, DeviceType type, Factory factory);
  absl::Status add(absl::string_view name, DeviceType type, FallibleFactory factory);
  /// The backend registered as `name` (or for `type`), created on first
  /// use; NotFound names the registered backends.
  absl::StatusOr<Backend*> backend(absl::string_view name);
  absl::StatusOr<Backend*> backend(DeviceType type);
  /// The DeviceType of the backend registered as `name`; NotFound names the
  /// registered backends.
  absl::StatusOr<DeviceType> lookup(absl::string_view name) const;
  /// Registered names, in DeviceType order.
  std::vector<std::string> names() const;
  /// Registered types, in DeviceType order.
  std::vector<DeviceType> types() const;

  // ---- the global registry ----
  /// add() on global(); a taken name or type aborts (two backends built
  /// into one library under one name is a build error).
  static void register_backend(absl::string_view name, DeviceType type, Factory factory);
  static void register_backend(absl::string_view name, DeviceType type, FallibleFactory factory);
  static absl::StatusOr<Backend*> get(DeviceType type) { return global().backend(type); }
  static absl::StatusOr<Backend*> get(absl::string_view name) { return global().backend(name); }
  /// Parses a device name (MSTEP_DEVICE, the C API): any registered name.
  static absl::StatusOr<DeviceType> device_type(absl::string_view name) {
    return global().lookup(name);
  }
  static std::vector<std::string> registered_backends() { return global().names(); }
  static std::vector<DeviceType> available() { return global().types(); }

 private:
  struct Entry;
  struct State;
  static absl::Status add_entry(State& state, absl::string_view name, DeviceType type,
                                Factory factory, FallibleFactory fallible);
  std::unique_ptr<State> state_;
};

}  // namespace mstep
