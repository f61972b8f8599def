// Capture and replay (see include/mstep/runtime/Graph.h).
#include "mstep/runtime/Graph.h"

#include <chrono>
#include <exception>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/CapturedSegment.h"
#include "lib/runtime/DeviceReplay.h"
#include "lib/runtime/Prefetch.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

ReplayError::ReplayError(Kind kind, const std::string& message)
    : Error(absl::FailedPreconditionError(message)), kind_(kind) {}

namespace {

using internal::InputBinding;
using internal::InputInfo;
using internal::Segment;

Graph::Impl* g_active = nullptr;  // the capture in progress, if any

using internal::prefetch_counts;

/// Asks for a tensor's reference counts and the fields replay reads. The
/// counts precede the object, and counts and fields span two cache lines at
/// most (prefetch_test checks it): the first and the last line cover them.
void prefetch_tensor(const std::shared_ptr<TensorImpl>& t) {
  if (!t) return;
  const void* counts = internal::shared_counts_address(t.get());
  __builtin_prefetch(counts ? counts : t->replay_fields_begin(), 1);
  __builtin_prefetch(t->replay_fields_end() - 1, 1);
}

/// Asks for what replay reads of a segment's tensors: the tensors, then
/// their buffers' counts. The step's kernels evicted them since they were
/// last used; asking for all at once overlaps the misses.
void prefetch_bindings(const Segment& seg) {
  for (const InputBinding& b : seg.inputs) prefetch_tensor(b.tensor);
  for (const Segment::OutputBinding& o : seg.outputs) prefetch_tensor(o.tensor);
  for (const InputBinding& b : seg.inputs)
    if (b.tensor) prefetch_counts(b.tensor->buffer());
  for (const Segment::OutputBinding& o : seg.outputs) prefetch_counts(o.tensor->buffer());
}

std::string describe_input(size_t segment, size_t index, const InputInfo& b) {
  return absl::StrCat("input ", index, " of captured graph ", segment, " (",
                      input_role_name(b.role), ", captured as ", b.type.to_string(), " on ",
                      b.device.to_string(), ")");
}

}  // namespace

struct Graph::Impl final : CaptureRecorder {
  std::vector<Segment> segments;
  // Set when the segments' backend records device graphs (DeviceReplay.h).
  std::unique_ptr<internal::DeviceReplay> device;
  bool capturing = false;
  bool captured = false;
  uint64_t rng_begin = 0;
  uint64_t rng_consumed = 0;
  // TensorImpl::device_moves() when the bound tensors' devices were last
  // found as captured.
  uint64_t devices_checked_at = 0;
  // During capture: the results and the inputs of earlier segments, by
  // buffer; the buffers are kept alive so no address is reused meanwhile.
  absl::flat_hash_map<const Buffer*, std::pair<uint32_t, uint32_t>> produced;
  absl::flat_hash_map<const Buffer*, std::pair<uint32_t, uint32_t>> consumed;
  std::vector<BufferPtr> capture_keepalive;

  void record(const ExecutedGraph& run) override {
    Segment seg;
    seg.executable = run.executable;
    seg.custom_ops.assign(run.custom_ops.begin(), run.custom_ops.end());
    seg.graph = run.graph;
    seg.device = run.outputs.front()->device();
    seg.inputs.resize(run.inputs.size());
    seg.input_info.resize(run.inputs.size());
    for (size_t j = 0; j < run.inputs.size(); ++j) {
      const DataLeaf& leaf = *run.input_nodes[j];
      const BufferPtr& buf = run.inputs[j];
      InputBinding& b = seg.inputs[j];
      InputInfo& info = seg.input_info[j];
      info.type = buf->type();
      info.device = buf->device();
      info.role = leaf.input_role();
      if (info.role == InputRole::rng_state) {
        b.source = InputBinding::Source::rng;
        b.backend = value_or_throw(BackendRegistry::get(info.device.type));
        b.constant = value_or_throw(b.backend->allocate(info.type));
        seg.rng_offset = run.rng_offset - rng_begin;
        continue;
      }
      std::shared_ptr<TensorImpl> owner = leaf.owner().lock();
      if (auto it = produced.find(buf.get()); it != produced.end()) {
        b.source = InputBinding::Source::segment;
        b.segment = it->second.first;
        b.slot = it->second.second;
        segments[b.segment].results_read_later = true;
      } else if (owner && (owner->is_pending() ? owner->replaced_buffer() : owner->buffer()) == buf) {
        // Re-read from the tensor that holds this value: a parameter,
        // optimizer state or static input, also when an earlier segment read
        // it too (the optimizer reads the parameters the forward pass read).
        // The segment then holds the only reference besides the tensor's
        // and the backend may update the buffer in place.
        b.source = InputBinding::Source::tensor;
        b.tensor = std::move(owner);
      } else if (auto it = consumed.find(buf.get()); it != consumed.end()) {
        // A value an earlier segment read whose tensor has moved on (a sync
        // point updated it): re-read what that segment read.
        b.source = InputBinding::Source::segment_input;
        b.segment = it->second.first;
        b.slot = it->second.second;
        segments[b.segment].inputs_read_later = true;
      } else if (owner && owner->is_pending()) {
        b.source = InputBinding::Source::tensor;
        b.tensor = std::move(owner);
      } else {
        // Nobody can change it (a tensor that moved to another buffer
        // outside the graph keeps the captured value: it is no longer what
        // this input read).
        b.source = InputBinding::Source::constant;
        b.constant = buf;
      }
    }
    seg.donated_to.assign(run.donated_to.begin(), run.donated_to.end());
    seg.offered.resize(run.results.size());
    for (const BufferPtr& r : run.results) seg.result_types.push_back(r->type());
    for (size_t i = 0; i < run.outputs.size(); ++i)
      seg.outputs.push_back({run.output_slot[i], false, run.outputs[i]->shared_from_this()});
    const auto index = static_cast<uint32_t>(segments.size());
    for (uint32_t j = 0; j < run.inputs.size(); ++j) {
      consumed.try_emplace(run.inputs[j].get(), index, j);
      capture_keepalive.push_back(run.inputs[j]);
    }
    for (uint32_t k = 0; k < run.results.size(); ++k) {
      produced.emplace(run.results[k].get(), std::make_pair(index, k));
      capture_keepalive.push_back(run.results[k]);
    }
    segments.push_back(std::move(seg));
  }

  /// Throws device_mismatch, before anything runs, when Module::to moved
  /// a tensor the graph reads or writes: its executables run on the device
  /// they were captured on.
  void check_devices() const {
    auto fail = [](const std::string& what, Device now, Device captured) {
      throw ReplayError(
          ReplayError::Kind::device_mismatch,
          absl::StrCat("Graph::replay: ", what, " now lives on ", now.to_string(),
                       " (moved by Module::to) but the graph was captured on ",
                       captured.to_string(), "; it runs only there. Capture a new graph after "
                       "the move, or move the tensor back to ", captured.to_string()));
    };
    for (size_t s = 0; s < segments.size(); ++s) {
      const Segment& seg = segments[s];
      for (size_t j = 0; j < seg.inputs.size(); ++j) {
        const InputBinding& b = seg.inputs[j];
        if (b.source == InputBinding::Source::tensor && b.tensor->device() != seg.input_info[j].device)
          fail(describe_input(s, j, seg.input_info[j]), b.tensor->device(), seg.input_info[j].device);
      }
      for (const Segment::OutputBinding& o : seg.outputs)
        if (o.tensor->device() != seg.device)
          fail(absl::StrCat("the tensor bound to result ", o.result, " of captured graph ", s, " (",
                            o.tensor->type().to_string(), ")"),
               o.tensor->device(), seg.device);
    }
  }

  /// Fills each segment's `transient` list (see Segment::buffers).
  void plan_scratch() {
    absl::flat_hash_set<const TensorImpl*> read_later;
    for (size_t s = segments.size(); s-- > 0;) {
      Segment& seg = segments[s];
      seg.buffers.assign(seg.inputs.size(), nullptr);
      seg.transient.clear();
      for (uint32_t j = 0; j < seg.inputs.size(); ++j) {
        const InputBinding& b = seg.inputs[j];
        const bool kept = b.source == InputBinding::Source::constant ||
                          b.source == InputBinding::Source::rng ||
                          (b.source == InputBinding::Source::tensor &&
                           !read_later.contains(b.tensor.get()));
        if (!kept) seg.transient.push_back(j);
      }
      for (const InputBinding& b : seg.inputs)
        if (b.source == InputBinding::Source::tensor) read_later.insert(b.tensor.get());
    }
  }

  /// The static half of the donation protocol (Executable::run), from the
  /// graph's bindings: what a replay may hand over when the tensor holds
  /// its buffer alone at that time (TensorImpl::owns_buffer_exclusively).
  /// 1. An input read from a tensor may be donated when the memory plan
  ///    lets it hold a result (donated_to) and no later segment reads that
  ///    tensor's buffer directly (an earlier segment's input or result, not
  ///    through the tensor, which sees the new value).
  /// 2. A tensor's buffer may be offered for its result when the tensor is
  ///    bound to no other result and no segment reads it: the graph keeps
  ///    no other reference to its buffer then.
  void plan_donations() {
    absl::flat_hash_set<const TensorImpl*> read_directly, read, bound_twice, bound;
    for (const Segment& seg : segments) {
      for (const InputBinding& b : seg.inputs) {
        if (b.source == InputBinding::Source::tensor) read.insert(b.tensor.get());
        if (b.source == InputBinding::Source::segment_input) {
          const InputBinding& earlier = segments[b.segment].inputs[b.slot];
          if (earlier.tensor) read_directly.insert(earlier.tensor.get());
        }
        if (b.source == InputBinding::Source::segment)
          for (const Segment::OutputBinding& o : segments[b.segment].outputs)
            if (o.result == b.slot) read_directly.insert(o.tensor.get());
      }
      for (const Segment::OutputBinding& o : seg.outputs)
        if (!bound.insert(o.tensor.get()).second) bound_twice.insert(o.tensor.get());
    }
    for (Segment& seg : segments) {
      seg.donatable.clear();
      seg.donated.assign(seg.inputs.size(), 0);
      for (uint32_t j = 0; j < seg.inputs.size(); ++j) {
        const InputBinding& b = seg.inputs[j];
        const bool plan_aliases = j < seg.donated_to.size() && seg.donated_to[j] >= 0;
        if (b.source == InputBinding::Source::tensor && plan_aliases &&
            !read_directly.contains(b.tensor.get()))
          seg.donatable.push_back(j);
      }
      for (Segment::OutputBinding& o : seg.outputs)
        o.offerable = !read.contains(o.tensor.get()) && !bound_twice.contains(o.tensor.get());
    }
  }

  // ---- Replay steps (see replay()) ----

  /// Points the segment's scratch at this replay's input buffers and
  /// writes its RNG state.
  void gather(Segment& seg, uint64_t rng_base) {
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      InputBinding& b = seg.inputs[j];
      switch (b.source) {
        case InputBinding::Source::tensor:
          if (seg.buffers[j] != b.tensor->buffer()) seg.buffers[j] = b.tensor->buffer();
          break;
        case InputBinding::Source::segment:
          seg.buffers[j] = segments[b.segment].results[b.slot];
          break;
        case InputBinding::Source::segment_input:
          seg.buffers[j] = segments[b.segment].buffers[b.slot];
          break;
        case InputBinding::Source::constant:
          if (!seg.buffers[j]) seg.buffers[j] = b.constant;
          break;
        case InputBinding::Source::rng: {
          const int64_t state[2] = {static_cast<int64_t>(Tracer::get().rng_seed()),
                                    static_cast<int64_t>(rng_base + seg.rng_offset)};
          throw_if_error(b.backend->copy_in(*b.constant, state, sizeof state));
          if (!seg.buffers[j]) seg.buffers[j] = b.constant;
          break;
        }
      }
    }
  }

  /// Fills this replay's donation (Executable::run): the inputs and the
  /// outputs' buffers that plan_donations() allows and that their tensors
  /// hold alone now (a detach()ed alias or a copy_() snapshot shares a
  /// buffer, and keeps its values). An offered buffer gets the result
  /// again, like a CUDA Graph's static output: no allocation now and no
  /// free at the rebinding. Returns whether anything was offered.
  bool donate(Segment& seg) {
    for (uint32_t j : seg.donatable)
      seg.donated[j] = seg.inputs[j].tensor->owns_buffer_exclusively();
    bool offering = false;
    for (const Segment::OutputBinding& o : seg.outputs) {
      if (o.offerable && o.tensor->owns_buffer_exclusively()) {
        seg.offered[o.result] = o.tensor->buffer();
        offering = true;
      }
    }
    return offering;
  }

  /// Binds the segment's results to their tensors.
  void rebind(Segment& seg) {
    // The kernels evicted the bindings again: fetch the tensors, then the
    // buffers they drop, in parallel rather than one miss after another.
    for (const Segment::OutputBinding& o : seg.outputs) prefetch_tensor(o.tensor);
    for (const Segment::OutputBinding& o : seg.outputs) prefetch_counts(o.tensor->buffer());
    for (uint32_t j : seg.transient) prefetch_counts(seg.buffers[j]);
    for (const Segment::OutputBinding& o : seg.outputs) {
      const BufferPtr& result = seg.results[o.result];
      // No user handle is left (the graph's binding is not one): nobody
      // can read the tensor, so its memory is freed.
      if (!o.tensor->has_handles())
        o.tensor->set_buffer(nullptr);
      else if (o.tensor->buffer() != result)  // else updated in place: nothing held it
        o.tensor->set_buffer(result);
    }
  }

  /// Drops the references a replay took (after the last segment, or when
  /// one fails), so that it keeps no buffer alive between replays.
  void drop_scratch() {
    for (Segment& seg : segments) {
      seg.results.clear();
      for (uint32_t j : seg.transient) seg.buffers[j].reset();
    }
  }

  void close_capture() {
    Tracer::get().set_capture_recorder(nullptr);
    capturing = false;
    g_active = nullptr;
    produced.clear();
    consumed.clear();
    capture_keepalive.clear();
  }
};

Graph::Graph() : impl_(std::make_unique<Impl>()) {}
Graph::~Graph() {
  if (impl_ && impl_->capturing) impl_->close_capture();
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

bool Graph::captured() const { return impl_->captured; }
size_t Graph::num_segments() const { return impl_->segments.size(); }
size_t Graph::num_kernels() const {
  size_t n = 0;
  for (const Segment& s : impl_->segments) n += s.executable->num_kernels();
  return n;
}

void Graph::capture_begin() {
  if (g_active)
    throw ReplayError(ReplayError::Kind::capture_active,
                      "Graph::capture_begin: another capture is active; end it with "
                      "capture_end() before starting a new one");
  Tracer& tracer = Tracer::get();
  if (!tracer.options().nan_guard_dir.empty())
    internal::emit_warning(
        "Graph::capture_begin: the NaN guard is on, but it checks gradients in "
        "optimizer.step(), host code that replay() does not run: replayed steps are not "
        "checked. Check a replayed step's loss yourself, or train lazily to use the guard");
  mark_step();  // work traced before the capture is not part of it
  impl_->device.reset();
  impl_->segments.clear();
  impl_->captured = false;
  impl_->capturing = true;
  impl_->rng_begin = tracer.rng_offset();
  g_active = impl_.get();
  tracer.set_capture_recorder(impl_.get());
}

void Graph::capture_end() {
  if (!impl_->capturing)
    throw ReplayError(ReplayError::Kind::not_captured,
                      "Graph::capture_end: no capture is active on this graph; call "
                      "capture_begin() first");
  Tracer& tracer = Tracer::get();
  try {
    mark_step();
  } catch (...) {
    impl_->close_capture();
    impl_->segments.clear();
    throw;
  }
  impl_->rng_consumed = tracer.rng_offset() - impl_->rng_begin;
  impl_->close_capture();
  if (impl_->segments.empty())
    throw ReplayError(ReplayError::Kind::not_captured,
                      "Graph::capture_end: the capture ran no graph (no tensor op was traced "
                      "between capture_begin() and capture_end())");
  impl_->plan_scratch();
  impl_->plan_donations();
  impl_->device.reset();
  // One device graph for the whole step where its backend records them.
  const Device device = impl_->segments.front().device;
  bool one_device = true;
  for (const Segment& seg : impl_->segments) one_device &= seg.device == device;
  if (one_device) {
    try {
      impl_->device = internal::DeviceReplay::record(
          impl_->segments, *value_or_throw(BackendRegistry::get(device.type)));
    } catch (...) {
      impl_->segments.clear();  // uncaptured
      throw;
    }
  }
  impl_->devices_checked_at = TensorImpl::device_moves();
  impl_->captured = true;
}

bool Graph::on_device_graph() const { return impl_->device != nullptr; }

void Graph::capture_abort() {
  if (impl_->capturing) impl_->close_capture();
  impl_->device.reset();
  impl_->segments.clear();
  impl_->captured = false;
}

void Graph::replay() {
  Impl& g = *impl_;
  if (g_active)
    throw ReplayError(ReplayError::Kind::capture_active,
                      "Graph::replay: called inside a capture; replays are not captured. End the "
                      "capture first");
  if (!g.captured)
    throw ReplayError(ReplayError::Kind::not_captured,
                      g.capturing ? "Graph::replay: the capture is still open; call capture_end()"
                                  : "Graph::replay: nothing captured; call capture_begin(), run "
                                    "the step, then capture_end()");
  const auto t0 = std::chrono::steady_clock::now();
  Tracer& tracer = Tracer::get();
  for (const Segment& seg : g.segments)  // the checks below read them all
    for (const InputBinding& b : seg.inputs) prefetch_tensor(b.tensor);

  // Check every input before running anything, so a failed replay changes
  // nothing. A TensorImpl's type never changes (a handle assigned another
  // shape holds another impl, and the captured one then has no owner left
  // but the graph); its device changes only by Module::to, counted by
  // TensorImpl::device_moves(), so devices are checked only after a move.
  if (const uint64_t moves = TensorImpl::device_moves(); moves != g.devices_checked_at) {
    g.check_devices();
    g.devices_checked_at = moves;
  }
  bool any_pending = false;
  for (size_t s = 0; s < g.segments.size(); ++s) {
    for (size_t j = 0; j < g.segments[s].inputs.size(); ++j) {
      const InputBinding& b = g.segments[s].inputs[j];
      if (b.source != InputBinding::Source::tensor) continue;
      if (!b.tensor->has_handles())  // the user dropped it; the graph's binding is no handle
        throw ReplayError(ReplayError::Kind::input_freed,
                          absl::StrCat("Graph::replay: ", describe_input(s, j, g.segments[s].input_info[j]),
                                       " was freed, or its handle was assigned another tensor. "
                                       "Keep the static input, parameter and optimizer-state "
                                       "tensors alive while the graph is used, and fill static "
                                       "inputs with copy_(), not by assignment"));
      any_pending |= b.tensor->is_pending();
    }
  }
  // A static input filled from a pending tensor (copy_ of a lazy result)
  // runs that small graph first.
  if (any_pending)
    for (Segment& seg : g.segments)
      for (InputBinding& b : seg.inputs)
        if (b.source == InputBinding::Source::tensor && b.tensor->is_pending())
          throw_if_error(tracer.sync(*b.tensor));

  const uint64_t rng_base = tracer.rng_offset();
  if (g.device) {
    const auto run_start = std::chrono::steady_clock::now();
    g.device->replay(tracer.rng_seed(), rng_base);
    internal::mutable_metrics().replay_execute_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  }
  for (size_t s = 0; !g.device && s < g.segments.size(); ++s) {
    Segment& seg = g.segments[s];
    prefetch_bindings(seg);  // the last segment's kernels evicted them
    g.gather(seg, rng_base);
    const bool offering = g.donate(seg);
    const auto run_start = std::chrono::steady_clock::now();
    auto results = seg.executable->run(
        seg.buffers, {.inputs = seg.donated,
                      .outputs = offering ? absl::MakeConstSpan(seg.offered)
                                          : absl::Span<const BufferPtr>()});
    internal::mutable_metrics().replay_execute_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    internal::record_host_fallbacks(*seg.executable);
    if (offering)
      for (BufferPtr& b : seg.offered) b.reset();
    if (!results.ok()) {
      g.drop_scratch();
      throw Error(absl::Status(results.status().code(),
                               absl::StrCat("Graph::replay: captured graph ", s,
                                            " failed: ", results.status().message())));
    }
    seg.results = *std::move(results);
    g.rebind(seg);
    // Drop what no later segment reads now: its memory may be freed.
    if (!seg.inputs_read_later)
      for (uint32_t j : seg.transient) seg.buffers[j].reset();
    if (!seg.results_read_later) seg.results.clear();
  }
  g.drop_scratch();
  if (g.rng_consumed) tracer.set_rng_offset(rng_base + g.rng_consumed);

  const auto t1 = std::chrono::steady_clock::now();
  ++internal::mutable_metrics().replays;
  internal::record_replay_time(std::chrono::duration<double>(t1 - t0).count());
  if (internal::trace_enabled()) internal::trace_event("replay", "replay", t0, t1);
}

void Graph::save(const std::string& path, const std::map<std::string, Tensor>& names) const {
  if (!impl_->captured)
    throw ReplayError(ReplayError::Kind::not_captured,
                      impl_->capturing ? "Graph::save: the capture is still open; call capture_end()"
                                       : "Graph::save: nothing captured; capture the step first");
  internal::save_captured_graph(path, names, impl_->segments, impl_->rng_consumed);
}

void Graph::export_stablehlo(const std::string& path, const std::map<std::string, Tensor>& names,
                             const std::string& values_path) const {
  if (!impl_->captured)
    throw ReplayError(ReplayError::Kind::not_captured,
                      impl_->capturing
                          ? "Graph::export_stablehlo: the capture is still open; call capture_end()"
                          : "Graph::export_stablehlo: nothing captured; capture the step first");
  internal::export_captured_stablehlo(path, names, values_path, impl_->segments,
                                      impl_->rng_consumed);
}

CaptureGuard::CaptureGuard(Graph& graph)
    : graph_(graph), exceptions_(std::uncaught_exceptions()) {
  graph_.capture_begin();
}

CaptureGuard::~CaptureGuard() noexcept(false) {
  if (std::uncaught_exceptions() > exceptions_)
    graph_.capture_abort();
  else
    graph_.capture_end();
}

bool is_capturing() { return g_active != nullptr; }

}  // namespace mstep
