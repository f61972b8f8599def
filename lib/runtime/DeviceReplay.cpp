// DeviceReplay: see DeviceReplay.h.
#include "lib/runtime/DeviceReplay.h"

#include <algorithm>
#include <chrono>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/core/Error.h"
#include "mstep/ir/OpKind.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::internal {

absl::Status DeviceReplay::record_work() {
  // First the data inputs' copies into their static slots: the graph's
  // head, the only work reading the tensors' own buffers.
  for (StaticInput& slot : static_inputs_) {
    slot.source = slot.tensor->buffer();
    if (absl::Status copied = backend_.copy_device(slot.source, slot.slot); !copied.ok())
      return absl::Status(copied.code(),
                          absl::StrCat("copying a data input (", slot.source->type().to_string(),
                                       ") into its static buffer: ", copied.message()));
  }
  for (size_t s = 0; s < segments_.size(); ++s) {
    const Segment& seg = segments_[s];
    std::vector<BufferPtr>& in = inputs_[s];
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      const InputBinding& b = seg.inputs[j];
      switch (b.source) {
        case InputBinding::Source::tensor:
          in[j] = slot_of_[s][j] >= 0 ? static_inputs_[slot_of_[s][j]].slot : b.tensor->buffer();
          break;
        case InputBinding::Source::segment:
          in[j] = results_[b.segment][b.slot];
          break;
        case InputBinding::Source::segment_input:
          in[j] = inputs_[b.segment][b.slot];
          break;
        case InputBinding::Source::constant:
        case InputBinding::Source::rng:  // the state buffer, written before each launch
          in[j] = b.constant;
          break;
      }
    }
    absl::StatusOr<std::vector<BufferPtr>> results =
        seg.executable->run(in, {.inputs = {}, .outputs = offered_[s]});
    if (!results.ok())
      return absl::Status(results.status().code(),
                          absl::StrCat("captured graph ", s, ": ", results.status().message()));
    results_[s] = *std::move(results);
  }
  for (const WriteBack& w : write_backs_) {
    const BufferPtr& result = results_[w.segment][w.result];
    if (result != w.buffer) MSTEP_RETURN_IF_ERROR(backend_.copy_device(result, w.buffer));
  }
  return absl::OkStatus();
}

std::unique_ptr<DeviceReplay> DeviceReplay::record(std::vector<Segment>& segments,
                                                   Backend& backend) {
  if (!backend.records_graphs()) return nullptr;
  std::unique_ptr<DeviceReplay> d(new DeviceReplay(segments, backend));
  // Which tensors the step reads, and each bound tensor's last result.
  absl::flat_hash_set<const TensorImpl*> read;
  for (const Segment& seg : segments)
    for (const InputBinding& b : seg.inputs)
      if (b.source == InputBinding::Source::tensor) read.insert(b.tensor.get());
  absl::flat_hash_map<const TensorImpl*, std::pair<uint32_t, uint32_t>> last;
  for (uint32_t s = 0; s < segments.size(); ++s)
    for (const Segment::OutputBinding& o : segments[s].outputs)
      last[o.tensor.get()] = {s, o.result};
  auto work = [&]() -> absl::Status {
    // An op run on the host cannot be part of a device graph.
    for (size_t s = 0; s < segments.size(); ++s)
      for (const HostFallbackOp& f : segments[s].executable->host_fallbacks())
        return absl::FailedPreconditionError(
            absl::StrCat("captured graph ", s, ": op ", op_name(f.op), " (", dtype_name(f.dtype),
                         ") runs on the host (a host fallback), which a device graph cannot "
                         "include"));
    return d->record_work();
  };
  d->inputs_.resize(segments.size());
  d->offered_.resize(segments.size());
  d->results_.resize(segments.size());
  d->slot_of_.resize(segments.size());
  for (const Segment& seg : segments)
    for (const Segment::OutputBinding& o : seg.outputs)
      if (read.contains(o.tensor.get())) d->written_.insert(o.tensor.get());
  // Data inputs (a batch, a mask: not parameters, optimizer state or
  // scalars, which keep their buffers) get a static buffer each that the
  // step reads, filled by a copy at the head of the graph: when the input
  // moves, only that copy is patched, whatever reads it (library calls
  // whose parameters cannot be patched included). As PyTorch's CUDA graph
  // trees copy non-static inputs into their static placeholders.
  absl::flat_hash_map<const TensorImpl*, int32_t> slot_of_tensor;
  for (uint32_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    d->slot_of_[s].assign(seg.inputs.size(), -1);
    for (size_t j = 0; j < seg.inputs.size(); ++j) {
      const InputBinding& b = seg.inputs[j];
      if (b.source != InputBinding::Source::tensor || d->written_.contains(b.tensor.get()) ||
          j >= seg.input_info.size() || seg.input_info[j].role != InputRole::input)
        continue;
      auto [it, inserted] = slot_of_tensor.try_emplace(
          b.tensor.get(), static_cast<int32_t>(d->static_inputs_.size()));
      if (inserted) d->static_inputs_.push_back({b.tensor, nullptr, nullptr});
      d->slot_of_[s][j] = it->second;
    }
  }
  // Static results and the data inputs' static buffers: from one pool
  // private to the graph, sized and allocated now, outside the recording.
  std::vector<TensorType> result_types;
  for (const Segment& seg : segments)
    result_types.insert(result_types.end(), seg.result_types.begin(), seg.result_types.end());
  const size_t results = result_types.size();
  for (const StaticInput& slot : d->static_inputs_) result_types.push_back(slot.tensor->type());
  GraphPool pool = value_or_throw(backend.allocate_graph_pool(result_types));
  if (pool.buffers.size() != result_types.size())
    throw Error(absl::InternalError(absl::StrCat(
        "Graph::capture_end: ", backend.name(), "'s allocate_graph_pool returned ",
        pool.buffers.size(), " buffers for ", result_types.size(), " static buffers")));
  for (size_t k = 0; k < d->static_inputs_.size(); ++k)
    d->static_inputs_[k].slot = std::move(pool.buffers[results + k]);
  size_t next = 0;
  for (uint32_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    d->inputs_[s].resize(seg.inputs.size());
    for (size_t r = 0; r < seg.result_types.size(); ++r)
      d->offered_[s].push_back(std::move(pool.buffers[next++]));
    for (const Segment::OutputBinding& o : seg.outputs) {
      if (last[o.tensor.get()] != std::make_pair(s, o.result)) continue;  // a later one wins
      if (read.contains(o.tensor.get()))
        d->write_backs_.push_back({s, o.result, o.tensor, o.tensor->buffer()});
      else
        d->outputs_.push_back({s, o.result, o.tensor});
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<DeviceGraph>> graph = backend.record_graph(work);
  if (!graph.ok()) {
    throw Error(absl::Status(
        graph.status().code(),
        absl::StrCat("Graph::capture_end: the step cannot be recorded as a device graph on ",
                     backend.name(), ": ", graph.status().message(),
                     ". The graph stays uncaptured; run the step lazily, or move that op out "
                     "of the captured step")));
  }
  d->graph_ = *std::move(graph);
  {
    Metrics& m = mutable_metrics();
    m.device_graph_pool_bytes = std::max(m.device_graph_pool_bytes, pool.bytes);
  }
  if (trace_enabled())
    trace_event(absl::StrCat("record device graph (pool of ", results, " static results",
                             d->static_inputs_.empty()
                                 ? std::string()
                                 : absl::StrCat(" and ", d->static_inputs_.size(),
                                                " static input",
                                                d->static_inputs_.size() == 1 ? "" : "s"),
                             ", ", pool.bytes, " bytes)"),
                "capture", t0, std::chrono::steady_clock::now());
  return d;
}

bool DeviceReplay::buffers_moved() {
  bool moved = false;
  moves_.clear();
  // A parameter's buffer is updated in place: a copy_() snapshot sharing
  // it keeps the old value, so the tensor takes a copy of its own first.
  for (WriteBack& w : write_backs_) {
    if (w.tensor->buffer() == w.buffer && !w.tensor->owns_buffer_exclusively()) {
      BufferPtr own = value_or_throw(backend_.allocate(w.buffer->type()));
      throw_if_error(backend_.copy_device(w.buffer, own));
      w.tensor->set_buffer(own);
    }
    if (w.tensor->buffer() != w.buffer) {
      moves_.emplace_back(w.buffer, w.tensor->buffer());
      w.buffer = w.tensor->buffer();
      moved = true;
    }
  }
  // A data input whose tensor now holds another buffer (copy_() shares
  // its source's): the head copy into its static buffer reads the new one.
  for (const StaticInput& slot : static_inputs_)
    if (slot.tensor->buffer() != slot.source) {
      moves_.emplace_back(slot.source, slot.tensor->buffer());
      moved = true;
    }
  // Another read-only input (a frozen parameter, a scalar) that now holds
  // another buffer: its new value is copied into the graph's buffer when
  // nothing else can read that one (no tensor holds it, no lazy work is
  // pending), else the graph moves to the new buffer.
  copies_.clear();
  const bool lazy_work = Tracer::get().has_pending();
  for (size_t s = 0; s < segments_.size(); ++s)
    for (size_t j = 0; j < segments_[s].inputs.size(); ++j) {
      const InputBinding& b = segments_[s].inputs[j];
      if (b.source != InputBinding::Source::tensor || written_.contains(b.tensor.get()) ||
          slot_of_[s][j] >= 0)
        continue;
      const BufferPtr& now = b.tensor->buffer();
      const BufferPtr& recorded = inputs_[s][j];
      if (now == recorded) continue;
      if (!lazy_work && recorded->holders() == Buffer::Holders::none) {
        copies_.emplace_back(now, recorded);
      } else {
        moves_.emplace_back(recorded, now);
        moved = true;
      }
    }
  // A static result held by anyone but its tensor would change under them.
  for (const Output& o : outputs_) {
    const BufferPtr& result = results_[o.segment][o.result];
    if (result != offered_[o.segment][o.result]) continue;  // an input passed through
    const bool shared = o.tensor->buffer() == result ? !o.tensor->owns_buffer_exclusively()
                                                     : result->holders() != Buffer::Holders::none;
    if (shared) {
      offered_[o.segment][o.result] = value_or_throw(backend_.allocate(result->type()));
      moves_.emplace_back(result, offered_[o.segment][o.result]);
      moved = true;
    }
  }
  return moved;
}

bool DeviceReplay::rebind() {
  // Every buffer the recorded work uses (before this replay's moves) but
  // the data inputs' own: moving one onto another's only makes two head
  // copies read the same buffer, which a later move tells apart (below).
  absl::flat_hash_set<const Buffer*> used;
  for (const auto* lists : {&inputs_, &results_})
    for (const std::vector<BufferPtr>& list : *lists)
      for (const BufferPtr& b : list) used.insert(b.get());
  absl::flat_hash_map<const Buffer*, BufferPtr> to;
  std::vector<std::pair<BufferPtr, BufferPtr>> moved;
  for (const auto& [from, into] : moves_) {
    auto [it, inserted] = to.try_emplace(from.get(), into);
    if (!inserted && it->second != into) return false;  // one buffer, two new ones
    if (used.contains(into.get())) return false;        // would merge two buffers' uses
    if (inserted) moved.emplace_back(from, into);
  }
  // A static input still reading a moved buffer would move with it.
  for (size_t s = 0; s < segments_.size(); ++s)
    for (size_t j = 0; j < segments_[s].inputs.size(); ++j) {
      const InputBinding& b = segments_[s].inputs[j];
      if (b.source != InputBinding::Source::tensor || slot_of_[s][j] >= 0) continue;
      auto it = to.find(inputs_[s][j].get());
      if (it != to.end() && b.tensor->buffer() != it->second) return false;
    }
  for (const StaticInput& slot : static_inputs_)
    if (auto it = to.find(slot.source.get());
        it != to.end() && slot.tensor->buffer() != it->second)
      return false;
  const int64_t patched = graph_->rebind(moved);
  if (patched < 0) return false;
  for (auto* lists : {&inputs_, &results_})
    for (std::vector<BufferPtr>& list : *lists)
      for (BufferPtr& b : list)
        if (auto it = to.find(b.get()); it != to.end()) b = it->second;
  for (StaticInput& slot : static_inputs_)
    if (auto it = to.find(slot.source.get()); it != to.end()) slot.source = it->second;
  mutable_metrics().device_graph_node_patches += patched;
  return true;
}

void DeviceReplay::replay(uint64_t rng_seed, uint64_t rng_base) {
  if (buffers_moved() && !rebind()) {
    absl::Status updated = graph_->update([this] { return record_work(); });
    if (!updated.ok())
      throw Error(absl::Status(updated.code(),
                               absl::StrCat("Graph::replay: updating the device graph to the "
                                            "inputs' new buffers: ", updated.message())));
    ++mutable_metrics().device_graph_updates;
    ++mutable_metrics().device_graph_rerecords;
  } else {
    if (!moves_.empty()) ++mutable_metrics().device_graph_updates;  // patched in place
    for (const auto& [from, to] : copies_) {
      // A copy the same input needs twice (two segments read it) is harmless.
      throw_if_error(backend_.copy_device(from, to));
    }
  }
  copies_.clear();
  for (Segment& seg : segments_)
    for (InputBinding& b : seg.inputs)
      if (b.source == InputBinding::Source::rng) {
        const int64_t state[2] = {static_cast<int64_t>(rng_seed),
                                  static_cast<int64_t>(rng_base + seg.rng_offset)};
        throw_if_error(b.backend->copy_in(*b.constant, state, sizeof state));
      }
  if (absl::Status launched = graph_->launch(); !launched.ok())
    throw Error(absl::Status(launched.code(), absl::StrCat("Graph::replay: launching the device "
                                                           "graph: ", launched.message())));
  ++mutable_metrics().device_graph_launches;
  for (const Output& o : outputs_) {
    const BufferPtr& result = results_[o.segment][o.result];
    if (!o.tensor->has_handles())
      o.tensor->set_buffer(nullptr);
    else if (o.tensor->buffer() != result)
      o.tensor->set_buffer(result);
  }
}

}  // namespace mstep::internal
