// Replay of an exported step with the runtime alone (see LoadedGraph.h).
// The loop is Graph::replay's without tensors: inputs come from slots,
// earlier segments' results or inputs, constants and the RNG state;
// results go to slots.
#include "mstep/runtime/LoadedGraph.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/runtime/CustomOpNeeds.h"
#include "lib/runtime/GraphArchive.h"
#include "lib/runtime/RuntimeInternal.h"
#include "lib/runtime/TrustedPath.h"
#include "lib/runtime/distributed/Communicator.h"
#include "mstep/core/Error.h"
#include "mstep/ir/OpKind.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Metrics.h"

namespace mstep {

struct LoadedGraph::Impl {
  using Source = GraphArchive::Binding::Source;
  struct Segment {
    std::unique_ptr<Executable> executable;
    std::vector<GraphArchive::Binding> inputs;
    std::vector<GraphArchive::Output> outputs;
    std::vector<TensorType> result_types;
    uint64_t rng_offset = 0;
    // The donation protocol (Executable::run): the graph owns every slot's
    // buffer alone, so it may hand one over where nothing it runs later
    // reads the old value (plan_donations).
    std::vector<uint8_t> donated;   // per input
    std::vector<BufferPtr> offered;  // per result: this replay's offers
    std::vector<int64_t> offer_slot;  // per result: the slot offered, or -1
    // Replay scratch.
    std::vector<BufferPtr> buffers;  // per input
    std::vector<BufferPtr> results;
  };

  std::string path;
  Backend* backend = nullptr;
  std::vector<CustomOpNeed> custom_ops;
  std::vector<BufferPtr> slots;
  std::vector<BufferPtr> constants;
  BufferPtr rng_state;  // written before each segment that draws
  std::vector<Segment> segments;
  uint64_t rng_seed = 0, rng_offset = 0, rng_consumed = 0;
  double execute_seconds = 0;  // of the last replay
  // use_device_graph(): the recorded step, its static results and each
  // segment's RNG state buffer.
  std::unique_ptr<DeviceGraph> device_graph;
  std::vector<std::vector<BufferPtr>> static_results;  // per segment, per result
  std::vector<BufferPtr> segment_rng;                  // per segment (null: draws none)

  /// Points seg.buffers at what each input binding names; `rng` is the
  /// buffer holding this segment's RNG state.
  void bind_inputs(Segment& seg, const BufferPtr& rng) {
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      const GraphArchive::Binding& b = seg.inputs[j];
      switch (b.source) {
        case Source::slot: seg.buffers[j] = slots[b.index]; break;
        case Source::constant: seg.buffers[j] = constants[b.index]; break;
        case Source::segment_result: seg.buffers[j] = segments[b.index].results[b.slot]; break;
        case Source::segment_input: seg.buffers[j] = segments[b.index].buffers[b.slot]; break;
        case Source::rng: seg.buffers[j] = rng; break;
      }
    }
  }

  /// Writes (seed, `rng_base` + the segment's offset) into `state`.
  absl::Status write_rng_state(const Segment& seg, Buffer& state, uint64_t rng_base) {
    const int64_t value[2] = {static_cast<int64_t>(rng_seed),
                              static_cast<int64_t>(rng_base + seg.rng_offset)};
    return backend->copy_in(state, value, sizeof value);
  }

  absl::Status run_segment(Segment& seg, size_t s, uint64_t rng_base) {
    for (const GraphArchive::Binding& b : seg.inputs)
      if (b.source == Source::rng) {
        MSTEP_RETURN_IF_ERROR(write_rng_state(seg, *rng_state, rng_base));
        break;
      }
    bind_inputs(seg, rng_state);
    for (size_t k = 0; k < seg.offer_slot.size(); ++k)
      if (seg.offer_slot[k] >= 0) seg.offered[k] = slots[seg.offer_slot[k]];
    const auto start = std::chrono::steady_clock::now();
    auto results = seg.executable->run(seg.buffers, Donation{seg.donated, seg.offered});
    execute_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!results.ok())
      return absl::Status(results.status().code(),
                          absl::StrCat(path, ": segment ", s, " failed: ", results.status().message()));
    seg.results = *std::move(results);
    for (const GraphArchive::Output& o : seg.outputs) slots[o.slot] = seg.results[o.result];
    for (BufferPtr& b : seg.offered) b.reset();
    return absl::OkStatus();
  }

  /// The work use_device_graph() records: every segment over the slots'
  /// buffers, results into static buffers, then each slot's new value
  /// copied back into the slot's own buffer (the last writer wins).
  absl::Status record_work() {
    for (size_t s = 0; s < segments.size(); ++s) {
      Segment& seg = segments[s];
      bind_inputs(seg, segment_rng[s]);
      auto results = seg.executable->run(seg.buffers, Donation{{}, static_results[s]});
      if (!results.ok())
        return absl::Status(results.status().code(),
                            absl::StrCat("segment ", s, ": ", results.status().message()));
      seg.results = *std::move(results);
    }
    std::vector<BufferPtr> last(slots.size());  // per slot: its new value
    for (const Segment& seg : segments)
      for (const GraphArchive::Output& o : seg.outputs) last[o.slot] = seg.results[o.result];
    for (size_t slot = 0; slot < slots.size(); ++slot)
      if (last[slot] && last[slot] != slots[slot])
        MSTEP_RETURN_IF_ERROR(backend->copy_device(last[slot], slots[slot]));
    return absl::OkStatus();
  }

  /// Which slot buffers each segment may hand over. A slot input is
  /// donated when this segment writes that slot, reads it nowhere else, and
  /// no segment re-reads an input that held the slot (segment_input). A
  /// slot no segment reads (an output such as the loss) is offered for the
  /// result bound to it.
  void plan_donations() {
    std::vector<bool> reread(slots.size(), false), read(slots.size(), false);
    for (const Segment& seg : segments)
      for (const GraphArchive::Binding& b : seg.inputs) {
        if (b.source == Source::slot) read[b.index] = true;
        if (b.source == Source::segment_input) {
          const GraphArchive::Binding& origin = segments[b.index].inputs[b.slot];
          if (origin.source == Source::slot) reread[origin.index] = true;
        }
      }
    for (Segment& seg : segments) {
      seg.donated.assign(seg.inputs.size(), 0);
      seg.offer_slot.assign(seg.offered.size(), -1);
      for (const GraphArchive::Output& o : seg.outputs) {
        if (!read[o.slot]) {
          seg.offer_slot[o.result] = o.slot;
          continue;
        }
        int readers = 0;
        for (const GraphArchive::Binding& b : seg.inputs)
          readers += b.source == Source::slot && b.index == o.slot;
        if (readers != 1 || reread[o.slot]) continue;
        for (size_t j = 0; j < seg.inputs.size(); ++j)
          if (seg.inputs[j].source == Source::slot && seg.inputs[j].index == o.slot)
            seg.donated[j] = 1;
      }
    }
  }
};

LoadedGraph::LoadedGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadedGraph::~LoadedGraph() = default;

namespace {

/// A buffer of `backend` holding `value`.
absl::StatusOr<BufferPtr> upload(Backend& backend, const TensorType& type, const std::string& value) {
  MSTEP_ASSIGN_OR_RETURN(BufferPtr buffer, backend.allocate(type));
  MSTEP_RETURN_IF_ERROR(backend.copy_in(*buffer, value.data(), value.size()));
  return buffer;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedGraph>> LoadedGraph::load(const std::string& path,
                                                               const RuntimeOptions& options) {
  // Its executables hold native code this process will run: the file must
  // be this user's, as a disk-cache entry (TrustedPath.h).
  MSTEP_ASSIGN_OR_RETURN(std::string bytes, internal::read_trusted_file(path));
  MSTEP_ASSIGN_OR_RETURN(GraphArchive archive, decode_graph_archive(bytes, path));
  auto backend = BackendRegistry::get(archive.backend);
  if (!backend.ok())
    return absl::FailedPreconditionError(
        absl::StrCat(path, " was exported for backend '", archive.backend,
                     "', which cannot run here: ", backend.status().message(), " (registered: ",
                     absl::StrJoin(BackendRegistry::registered_backends(), ", "), ")"));
  // Before any executable reaches the backend: a kernel this process does
  // not have is never looked up, let alone run.
  if (absl::Status registered = check_custom_ops_registered(archive.custom_ops); !registered.ok())
    return absl::FailedPreconditionError(absl::StrCat(
        path, " ", registered.message(),
        "; load the plugin that registers it before the graph (mstep-run --plugin libmyops.so; "
        "in a program, mstep::load_plugin or its own registration)"));
  // Collectives recorded for another world would deadlock or sum wrongly:
  // refused here, before anything runs.
  MSTEP_RETURN_IF_ERROR(dist::check_recorded_world(archive.world_size, path));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->custom_ops = std::move(archive.custom_ops);
  impl->backend = *backend;
  impl->rng_seed = archive.rng_seed;
  impl->rng_offset = archive.rng_offset;
  impl->rng_consumed = archive.rng_consumed;
  std::vector<SlotInfo> infos;
  for (const GraphArchive::Slot& s : archive.slots) {
    MSTEP_ASSIGN_OR_RETURN(BufferPtr buffer, upload(**backend, s.type, s.value));
    impl->slots.push_back(std::move(buffer));
    infos.push_back({s.name, s.role, /*read=*/false, s.written, s.type});
  }
  for (const GraphArchive::Constant& c : archive.constants) {
    MSTEP_ASSIGN_OR_RETURN(BufferPtr buffer, upload(**backend, c.type, c.value));
    impl->constants.push_back(std::move(buffer));
  }
  for (size_t s = 0; s < archive.segments.size(); ++s) {
    GraphArchive::Segment& from = archive.segments[s];
    Impl::Segment seg;
    auto exe = (*backend)->deserialize(from.executable, options);
    if (!exe.ok())
      return absl::Status(exe.status().code(), absl::StrCat(path, ": executable of segment ", s,
                                                            " does not load: ",
                                                            exe.status().message()));
    seg.executable = *std::move(exe);
    for (size_t j = 0; j < from.inputs.size(); ++j)
      if (from.inputs[j].source == Impl::Source::rng && !impl->rng_state) {
        MSTEP_ASSIGN_OR_RETURN(impl->rng_state, (*backend)->allocate(from.input_types[j]));
      }
    for (const GraphArchive::Binding& b : from.inputs)
      if (b.source == Impl::Source::slot) infos[b.index].read = true;
    seg.inputs = std::move(from.inputs);
    seg.outputs = std::move(from.outputs);
    seg.rng_offset = from.rng_offset;
    seg.result_types = from.result_types;
    seg.buffers.resize(seg.inputs.size());
    seg.offered.resize(from.result_types.size());
    impl->segments.push_back(std::move(seg));
  }
  impl->plan_donations();
  std::unique_ptr<LoadedGraph> graph(new LoadedGraph(std::move(impl)));
  graph->slots_ = std::move(infos);
  return graph;
}

absl::StatusOr<size_t> LoadedGraph::find(absl::string_view name) const {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].name == name) return i;
  std::vector<std::string> names;
  for (const SlotInfo& s : slots_) names.push_back(s.name);
  return absl::NotFoundError(absl::StrCat(impl_->path, " has no tensor named '", name,
                                          "'; its tensors: ", absl::StrJoin(names, ", ")));
}

absl::string_view LoadedGraph::backend() const { return impl_->backend->name(); }
const std::vector<CustomOpNeed>& LoadedGraph::custom_ops() const { return impl_->custom_ops; }
size_t LoadedGraph::num_segments() const { return impl_->segments.size(); }
uint64_t LoadedGraph::rng_offset() const { return impl_->rng_offset; }
double LoadedGraph::last_execute_seconds() const { return impl_->execute_seconds; }

absl::Status LoadedGraph::write(absl::string_view name, const void* data, size_t bytes) {
  MSTEP_ASSIGN_OR_RETURN(size_t i, find(name));
  const TensorType& type = slots_[i].type;
  if (bytes != type.bytes())
    return absl::InvalidArgumentError(absl::StrCat("writing '", name, "' of ", impl_->path, ": got ",
                                                   bytes, " bytes, its type ", type.to_string(),
                                                   " holds ", type.bytes()));
  return impl_->backend->copy_in(*impl_->slots[i], data, bytes);
}

absl::Status LoadedGraph::read(absl::string_view name, void* data, size_t bytes) const {
  MSTEP_ASSIGN_OR_RETURN(size_t i, find(name));
  const TensorType& type = slots_[i].type;
  if (bytes != type.bytes())
    return absl::InvalidArgumentError(absl::StrCat("reading '", name, "' of ", impl_->path,
                                                   ": asked for ", bytes, " bytes, its type ",
                                                   type.to_string(), " holds ", type.bytes()));
  return impl_->backend->copy_out(*impl_->slots[i], data, bytes);
}

absl::Status LoadedGraph::use_device_graph() {
  Impl& g = *impl_;
  if (g.device_graph) return absl::OkStatus();
  if (!g.backend->records_graphs())
    return absl::UnimplementedError(
        absl::StrCat(g.path, ": ", g.backend->name(), " records no device graphs"));
  g.static_results.assign(g.segments.size(), {});
  g.segment_rng.assign(g.segments.size(), nullptr);
  std::vector<TensorType> result_types;  // every segment's, in order
  for (size_t s = 0; s < g.segments.size(); ++s) {
    const Impl::Segment& seg = g.segments[s];
    for (const HostFallbackOp& f : seg.executable->host_fallbacks())
      return absl::FailedPreconditionError(absl::StrCat(
          g.path, ": segment ", s, ": op ", op_name(f.op), " (", dtype_name(f.dtype),
          ") runs on the host (a host fallback), which a device graph cannot include"));
    result_types.insert(result_types.end(), seg.result_types.begin(), seg.result_types.end());
  }
  // The static results: one pool private to the graph, sized and
  // allocated now (nothing may allocate while the graph is recorded), as
  // Graph::capture_end does.
  absl::StatusOr<GraphPool> pool = g.backend->allocate_graph_pool(result_types);
  if (!pool.ok())
    return absl::Status(pool.status().code(),
                        absl::StrCat(g.path, ": allocating the device graph's ",
                                     result_types.size(), " static results: ",
                                     pool.status().message()));
  if (pool->buffers.size() != result_types.size())
    return absl::InternalError(absl::StrCat(
        g.path, ": ", g.backend->name(), "'s allocate_graph_pool returned ", pool->buffers.size(),
        " buffers for ", result_types.size(), " static results"));
  size_t next = 0;
  for (size_t s = 0; s < g.segments.size(); ++s) {
    const Impl::Segment& seg = g.segments[s];
    for (size_t r = 0; r < seg.result_types.size(); ++r)
      g.static_results[s].push_back(std::move(pool->buffers[next++]));
    if (g.rng_state)
      for (const GraphArchive::Binding& b : seg.inputs)
        if (b.source == Impl::Source::rng) {
          MSTEP_ASSIGN_OR_RETURN(g.segment_rng[s], g.backend->allocate(g.rng_state->type()));
          break;
        }
  }
  auto graph = g.backend->record_graph([&g] { return g.record_work(); });
  for (Impl::Segment& seg : g.segments) {
    seg.results.clear();
    for (BufferPtr& b : seg.buffers) b.reset();
  }
  if (!graph.ok()) {
    g.static_results.clear();
    g.segment_rng.clear();
    return absl::Status(graph.status().code(),
                        absl::StrCat(g.path, ": the step cannot be recorded as a device graph on ",
                                     g.backend->name(), ": ", graph.status().message()));
  }
  g.device_graph = *std::move(graph);
  Metrics& m = internal::mutable_metrics();
  m.device_graph_pool_bytes = std::max(m.device_graph_pool_bytes, pool->bytes);
  return absl::OkStatus();
}

bool LoadedGraph::on_device_graph() const { return impl_->device_graph != nullptr; }

absl::Status LoadedGraph::replay() {
  Impl& g = *impl_;
  g.execute_seconds = 0;
  if (g.device_graph) {
    for (size_t s = 0; s < g.segments.size(); ++s)
      if (g.segment_rng[s])
        MSTEP_RETURN_IF_ERROR(g.write_rng_state(g.segments[s], *g.segment_rng[s], g.rng_offset));
    const auto start = std::chrono::steady_clock::now();
    absl::Status launched = g.device_graph->launch();
    g.execute_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!launched.ok())
      return absl::Status(launched.code(), absl::StrCat(g.path, ": launching the device graph: ",
                                                        launched.message()));
    g.rng_offset += g.rng_consumed;
    return absl::OkStatus();
  }
  for (size_t s = 0; s < g.segments.size(); ++s)
    MSTEP_RETURN_IF_ERROR(g.run_segment(g.segments[s], s, g.rng_offset));
  for (Impl::Segment& seg : g.segments) {
    seg.results.clear();
    for (BufferPtr& b : seg.buffers) b.reset();
  }
  g.rng_offset += g.rng_consumed;
  return absl::OkStatus();
}

}  // namespace mstep
