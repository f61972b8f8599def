// Tracer: the live-tensor list, graph cutting, cache lookup and execution.
//
// A cut works in one pass:
//   1. Depth-first post-order from every output, stopping at buffers
//      (`data` leaves), numbering nodes as they finish.
//   2. The key folds each node's precomputed hashes with the positions of
//      its operands, so sharing (x+x vs x+y) changes the key.
//   3. Hit: run the cached executable on the leaf buffers. Miss: flatten
//      the visited nodes into a TraceGraph, compile it, then run.
//   4. Bind each result buffer to its tensors; their nodes are released.
#include "mstep/runtime/Tracer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/CrossDeviceCache.h"
#include "lib/runtime/CustomOpNeeds.h"
#include "lib/runtime/DiskCache.h"
#include "lib/runtime/RuntimeInternal.h"
#include "lib/runtime/distributed/Communicator.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"
#include "mstep/core/Hash.h"
#include "mstep/runtime/Runtime.h"

namespace mstep {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

/// Flattens the visited nodes into an owned TraceGraph.
TraceGraph build_graph(absl::Span<const Node* const> order,
                       absl::Span<const ValueRef> outputs) {
  TraceGraph g;
  g.nodes.reserve(order.size());
  for (const Node* n : order) {
    GraphNode gn;
    gn.results = ResultTypes(n->results().begin(), n->results().end());
    if (n->op() == OpKind::data) {
      gn.op = OpKind::parameter;
      gn.attrs.push_back(
          {AttrName::index, static_cast<int64_t>(g.input_types.size())});
      g.input_types.push_back(n->result());
      g.input_roles.push_back(n->input_role());
    } else {
      gn.op = n->op();
      gn.attrs = n->attrs();
      for (const Value& v : n->operands())
        gn.operands.push_back({trace_node(*v.node).visit_index, v.index});
    }
    g.nodes.push_back(std::move(gn));
  }
  g.outputs.assign(outputs.begin(), outputs.end());
  g.donated_to.assign(g.input_types.size(), -1);
  return g;
}

/// Marks each input whose tensor was replaced by an output (an in-place
/// update such as `w.copy_(w - lr * g)`) as donated to that output.
void mark_donations(TraceGraph& g, absl::Span<TensorImpl* const> outputs,
                    absl::Span<const uint32_t> output_slot, absl::Span<const BufferPtr> inputs) {
  absl::flat_hash_map<const Buffer*, int32_t> input_of;
  for (size_t j = 0; j < inputs.size(); ++j) input_of.emplace(inputs[j].get(), j);
  for (size_t i = 0; i < outputs.size(); ++i) {
    BufferPtr old = outputs[i]->replaced_buffer();
    if (!old) continue;
    auto it = input_of.find(old.get());
    if (it != input_of.end()) g.donated_to[it->second] = static_cast<int32_t>(output_slot[i]);
  }
}

void dump_graph(const std::string& dir, const GraphKey& key,
                const TraceGraph& g) {
  std::string base = absl::StrFormat("%s/graph_%016x", dir, key.full());
  std::ofstream(base + ".txt") << g.to_text();
  std::ofstream(base + ".dot") << g.to_dot();
}
}  // namespace

Tracer& Tracer::get() {
  static Tracer* tracer = new Tracer();  // never destroyed: tensors may outlive main
  return *tracer;
}

Tracer::Tracer()
    : options_(RuntimeOptions::from_env()),
      default_device_{options_.default_device, 0},
      cache_(static_cast<size_t>(options_.max_graphs)),
      last_step_end_(std::chrono::steady_clock::now()) {
  live_head_.live_prev_ = live_head_.live_next_ = &live_head_;
  // RuntimeOptions is the one reader of the environment; the trace and the
  // fallback log, used from any thread, start from it.
  internal::init_trace_file(options_.trace_file);
  internal::init_log_fallback(options_.log_fallback);
}

DiskCache* Tracer::disk_cache() {
  if (disk_opened_) return disk_.get();
  disk_opened_ = true;
  if (options_.disk_cache.empty()) return nullptr;
  auto config = DiskCache::Config::parse(options_.disk_cache);
  if (!config.ok()) {
    internal::emit_warning(absl::StrCat("MSTEP_CACHE=", options_.disk_cache, " is not valid (",
                                        config.status().message(),
                                        "); the disk cache is off for this process"));
    return nullptr;
  }
  config->log = options_.log_cache;
  auto warn = [](absl::string_view w) { internal::emit_warning(w); };
  auto opened = DiskCache::open(*std::move(config), warn);
  if (!opened.ok()) {
    internal::emit_warning(absl::StrCat("cannot open the disk cache: ", opened.status().message(),
                                        "; it is off for this process"));
    return nullptr;
  }
  disk_ = *std::move(opened);
  return disk_.get();
}

void Tracer::reset_disk_cache() {
  disk_.reset();
  disk_opened_ = false;
}

void Tracer::set_record_steps(bool on) {
  record_steps_ = on;
  if (!on) last_step_ = StepRecord{};
}

void Tracer::link_live(TensorImpl* impl) {
  impl->live_ = true;
  ++num_pending_;
  impl->live_prev_ = live_head_.live_prev_;
  impl->live_next_ = &live_head_;
  live_head_.live_prev_->live_next_ = impl;
  live_head_.live_prev_ = impl;
}

void Tracer::unlink_live(TensorImpl* impl) {
  impl->live_ = false;
  --num_pending_;
  impl->live_prev_->live_next_ = impl->live_next_;
  impl->live_next_->live_prev_ = impl->live_prev_;
  impl->live_prev_ = impl->live_next_ = nullptr;
}

absl::Status Tracer::mark_step() {
  ++internal::mutable_metrics().mark_steps;
  if (internal::trace_enabled())
    internal::trace_event("trace", "lazy", last_step_end_, std::chrono::steady_clock::now());
  std::vector<TensorImpl*> live;
  for (TensorImpl* t = live_head_.live_next_; t != &live_head_; t = t->live_next_)
    live.push_back(t);
  // One graph per device (Module::to / Tensor::to can leave pending work
  // on two), in the order the devices first appear.
  while (!live.empty()) {
    const Device device = live.front()->device();
    std::vector<TensorImpl*> rest;
    size_t kept = 0;
    for (TensorImpl* t : live) {
      if (t->device() == device)
        live[kept++] = t;
      else
        rest.push_back(t);
    }
    live.resize(kept);
    MSTEP_RETURN_IF_ERROR(execute(live));
    live = std::move(rest);
  }
  advance_rng_after_step();
  last_step_end_ = std::chrono::steady_clock::now();
  return absl::OkStatus();
}

absl::Status Tracer::sync(TensorImpl& impl) {
  if (!impl.is_pending()) return absl::OkStatus();
  ++internal::mutable_metrics().sync_points;
  TensorImpl* one = &impl;
  return execute({&one, 1});
}

absl::Status Tracer::sync(absl::Span<TensorImpl* const> impls) {
  std::vector<TensorImpl*> pending;
  for (TensorImpl* impl : impls)
    if (impl->is_pending() && std::find(pending.begin(), pending.end(), impl) == pending.end())
      pending.push_back(impl);
  if (pending.empty()) return absl::OkStatus();
  ++internal::mutable_metrics().sync_points;
  return execute(pending);
}

absl::StatusOr<Tracer::Cut> Tracer::cut(absl::Span<TensorImpl* const> outputs, Device device) {
  // 1-2. Post-order traversal and key.
  const uint64_t epoch = ++epoch_;
  clear_scratch();
  Cut c;
  GraphKey& key = c.key;
  key.backend = hash_combine(static_cast<uint64_t>(device.type), device.index);
  key.compile_options = compile_options_key(options_, device.type);
  struct Frame {
    const Node* node;
    uint32_t next_operand;
  };
  std::vector<Frame> stack;
  auto visit = [&](const Node* root) {
    if (trace_node(*root).visit_epoch == epoch) return;
    trace_node(*root).visit_epoch = epoch;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& f = stack.back();
      auto operands = f.node->operands();
      if (f.next_operand < operands.size()) {
        const TraceNode& child = trace_node(*operands[f.next_operand++].node);
        if (child.visit_epoch != epoch) {
          child.visit_epoch = epoch;
          stack.push_back({&child, 0});
        }
        continue;
      }
      const Node* n = f.node;
      stack.pop_back();
      const uint32_t index = static_cast<uint32_t>(order_.size());
      trace_node(*n).visit_index = index;
      order_.push_back(n);
      if (n->op() == OpKind::data) {
        const DataLeaf& leaf = data_leaf(*n);
        inputs_.push_back(leaf.buffer());
        input_nodes_.push_back(&leaf);
      }
      key.structure = hash_combine(key.structure, n->structural_hash());
      for (const Value& v : operands)
        key.structure = hash_combine(
            key.structure, (uint64_t{trace_node(*v.node).visit_index} << 8) | v.index);
      key.types = hash_combine(key.types, n->type_hash());
      if (uint64_t c = n->constant_hash())
        key.constants = hash_combine(key.constants, c ^ index);
    }
  };

  c.output_slot.resize(outputs.size());
  absl::flat_hash_map<std::pair<const Node*, uint32_t>, uint32_t> slot_of;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Value& v = outputs[i]->pending();
    if (outputs[i]->device() != device)
      return absl::InvalidArgumentError(absl::StrCat(
          "mark_step: pending tensors live on different devices (",
          device.to_string(), " and ", outputs[i]->device().to_string(),
          "); move them to one device with .to(device) before the step"));
    visit(v.node.get());
    auto [it, inserted] = slot_of.try_emplace(
        std::make_pair(v.node.get(), v.index),
        static_cast<uint32_t>(c.graph_outputs.size()));
    if (inserted) {
      const uint32_t index = trace_node(*v.node).visit_index;
      c.graph_outputs.push_back({index, v.index});
      key.structure = hash_combine(key.structure, (uint64_t{index} << 8) | v.index);
    }
    c.output_slot[i] = it->second;
  }
  return c;
}

TraceGraph Tracer::build_cut_graph(const Cut& c, absl::Span<TensorImpl* const> outputs) {
  TraceGraph graph = build_graph(order_, c.graph_outputs);
  mark_donations(graph, outputs, c.output_slot, inputs_);
  return graph;
}

absl::StatusOr<TraceGraph> Tracer::pending_graph() {
  std::vector<TensorImpl*> live;
  for (TensorImpl* t = live_head_.live_next_; t != &live_head_; t = t->live_next_)
    live.push_back(t);
  if (live.empty()) return TraceGraph{};
  MSTEP_ASSIGN_OR_RETURN(Cut c, cut(live, live.front()->device()));
  TraceGraph graph = build_cut_graph(c, live);
  clear_scratch();
  return graph;
}

absl::StatusOr<ModuleCache::Entry*> Tracer::load_or_compile(
    const Cut& c, absl::Span<TensorImpl* const> outputs, Backend& backend) {
  Metrics& m = internal::mutable_metrics();
  const GraphKey& key = c.key;
  const auto num_nodes = static_cast<uint32_t>(order_.size());
  const auto num_inputs = static_cast<uint32_t>(inputs_.size());
  TraceGraph graph = build_cut_graph(c, outputs);
  ModuleCache::Entry entry{nullptr, num_nodes, num_inputs, nullptr, graph.donated_to,
                           custom_op_needs(graph), {}, {}, false};
  entry.collectives = dist::collective_signature(graph);
  if (!entry.collectives.empty()) {
    std::vector<std::string> types;
    for (const TensorType& t : graph.input_types) types.push_back(t.to_string());
    entry.input_types = absl::StrJoin(types, ", ");
  }

  // Memory -> disk -> compile.
  DiskCache* disk = disk_cache();
  const std::string disk_name =
      absl::StrFormat("%s-%016x", backend.name(), key.full());
  if (disk) {
    internal::TraceScope scope("disk load", "cache");
    DiskCache::LoadResult found = disk->load(disk_name, key.to_text());
    if (found.lookup == DiskCache::Lookup::hit) {
      // The entry's custom ops are checked before its payload reaches the
      // backend: an entry that needs one this process lacks is recompiled,
      // never run (it stays valid for the processes that have them).
      absl::StatusOr<absl::string_view> payload = check_custom_op_needs(found.payload);
      if (absl::IsFailedPrecondition(payload.status())) {
        ++m.disk_misses;
        internal::emit_warning(absl::StrCat("disk cache entry ", disk_name, " is not used: ",
                                            payload.status().message(), "; recompiling it"));
      } else {
        absl::StatusOr<std::unique_ptr<Executable>> loaded =
            payload.ok() ? load_compiled_module(*payload, backend, options_)
                         : absl::StatusOr<std::unique_ptr<Executable>>(payload.status());
        if (loaded.ok()) {
          ++m.disk_hits;
          entry.executable = std::move(*loaded);
          // Remember the signature, so a later miss is explained against it.
          (void)cache_.note_compile(key, graph, options_.constant_recompile_warn_threshold);
        } else {
          ++m.disk_corrupt;
          internal::emit_warning(absl::StrCat("disk cache entry ", disk_name,
                                              " could not be loaded (", loaded.status().message(),
                                              "); recompiling it"));
        }
      }
    } else {
      if (found.lookup == DiskCache::Lookup::corrupt) ++m.disk_corrupt;
      ++m.disk_misses;
    }
  }

  if (!entry.executable) {
    internal::TraceScope scope("compile", "compile");
    auto t0 = std::chrono::steady_clock::now();
    if (!options_.dump_dir.empty()) dump_graph(options_.dump_dir, key, graph);
    ModuleCache::MissReason reason = cache_.explain_miss(key, graph);
    internal::record_recompile_reason(reason.category);
    if (options_.log_recompiles)
      std::fprintf(stderr, "mstep: compiling graph %016lx (%u nodes, %u inputs): %s: %s\n",
                   static_cast<unsigned long>(key.full()), num_nodes, num_inputs,
                   reason.category.c_str(), reason.detail.c_str());
    MSTEP_ASSIGN_OR_RETURN(
        CompiledGraph compiled,
        compile_graph(graph, backend,
                      {.fuse = options_.fuse, .dump_dir = options_.dump_dir, .key = key.full(),
                       .keep_module_text = disk != nullptr},
                      options_));
    ModuleCache::CompileNote note =
        cache_.note_compile(key, graph, options_.constant_recompile_warn_threshold);
    if (note.constants_only) ++m.constant_recompiles;
    if (!note.warning.empty()) internal::emit_warning(note.warning);
    ++m.compiles;
    m.arena_bytes = std::max(m.arena_bytes, compiled.arena_bytes);
    entry.executable = std::move(compiled.executable);
    if (disk) {
      // Serialized here, on the compiling thread: the executable may be
      // evicted before the background writer runs.
      auto payload = entry.executable->serialize(compiled.module_text);
      if (payload.ok())
        disk->store(disk_name, key.to_text(),
                    [text = with_custom_op_needs(entry.custom_ops, *payload)]() mutable {
                      return std::move(text);
                    });
      else
        internal::emit_warning(absl::StrCat("graph ", disk_name, " is not written to the disk cache: ",
                                            payload.status().message()));
    }
    const double seconds = seconds_since(t0);
    internal::record_compile_time(seconds);
  }
  if (disk && !disk->config().also_for.empty() && disk->config().also_for != backend.name()) {
    internal::TraceScope scope("compile for another device", "compile");
    const std::string& other = disk->config().also_for;
    absl::StatusOr<DeviceType> other_type = cross_device_type(other);
    absl::Status stored = other_type.ok() ? store_for_device(*disk, other, *other_type, key, graph,
                                                             entry.custom_ops, options_)
                                          : other_type.status();
    if (!stored.ok())
      internal::emit_warning(absl::StrCat("graph ", disk_name, " (", num_nodes,
                                          " nodes) is not stored for ", other,
                                          " in the disk cache: ", stored.message()));
  }
  if (record_steps_ || recorder_)
    entry.graph = std::make_shared<const TraceGraph>(std::move(graph));
  int evicted = 0;
  ModuleCache::Entry& inserted = cache_.insert(key, std::move(entry), &evicted);
  m.memory_evictions += evicted;
  return &inserted;
}

absl::Status Tracer::execute(absl::Span<TensorImpl* const> outputs) {
  Metrics& m = internal::mutable_metrics();
  const Device device = outputs.front()->device();
  MSTEP_ASSIGN_OR_RETURN(Backend * backend, BackendRegistry::get(device.type));
  MSTEP_ASSIGN_OR_RETURN(Cut c, cut(outputs, device));
  const GraphKey& key = c.key;
  const std::vector<uint32_t>& output_slot = c.output_slot;

  // 3. Look up, or load / compile.
  const auto num_nodes = static_cast<uint32_t>(order_.size());
  const auto num_inputs = static_cast<uint32_t>(inputs_.size());
  ModuleCache::Entry* entry = cache_.find(key, num_nodes, num_inputs);
  if (entry) {
    ++m.cache_hits;
    if ((record_steps_ || recorder_) && !entry->graph)
      entry->graph = std::make_shared<const TraceGraph>(build_cut_graph(c, outputs));
  } else {
    ++m.cache_misses;
    auto loaded = load_or_compile(c, outputs, *backend);
    if (!loaded.ok()) {
      clear_scratch();
      return loaded.status();
    }
    entry = *loaded;
  }
  // A graph with collectives deadlocks or sums wrongly unless every rank
  // runs the same one: the ranks compare it at its first run.
  if (!entry->collectives.empty() && !entry->ranks_compared) {
    absl::Status same = dist::check_same_graph(
        {key.structure, key.types, entry->collectives, entry->input_types});
    if (!same.ok()) {
      clear_scratch();
      return same;
    }
    entry->ranks_compared = true;
  }
  absl::StatusOr<std::vector<BufferPtr>> results;
  {
    internal::TraceScope scope("execute", "execute");
    auto t0 = std::chrono::steady_clock::now();
    results =
        entry->executable->run(inputs_, {.inputs = donations(outputs.size()), .outputs = {}});
    const double seconds = seconds_since(t0);
    internal::record_execute_time(seconds);
  }
  ++m.graphs_executed;
  internal::record_host_fallbacks(*entry->executable);
  if (!results.ok()) {
    clear_scratch();
    return results.status();
  }
  if (record_steps_)
    last_step_ = {key, entry->graph, inputs_, *results, rng_seed_, rng_offset_};
  if (recorder_)
    recorder_->record({entry->executable, input_nodes_, inputs_, entry->donated_to, outputs,
                       output_slot, *results, rng_offset_, entry->custom_ops, entry->graph});

  // 4. Bind.
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i]->set_buffer((*results)[output_slot[i]]);
  clear_scratch();
  return absl::OkStatus();
}

absl::Span<const uint8_t> Tracer::donations(size_t num_outputs) {
  // The donation protocol (Executable::run), from the tracer's bookkeeping:
  // an input is donated when no tensor holds its buffer (its tensor was
  // replaced, e.g. by `w.copy_(w - lr * g)`, and nothing shares it) and no
  // pending work outside this cut can read it later through its data leaf
  // (the cut materializes every pending tensor). Such a buffer is one
  // input of the cut: its leaves come from the one tensor that held it
  // (TensorImpl::set_buffer keeps the leaf of an unchanged buffer). A
  // recorded step keeps its inputs as they were (the NaN guard writes them
  // to a reproducer).
  donated_.assign(inputs_.size(), 0);
  if (record_steps_ || num_outputs != num_pending_) return donated_;
  for (size_t j = 0; j < inputs_.size(); ++j)
    donated_[j] = inputs_[j]->holders() == Buffer::Holders::none;
  return donated_;
}

void Tracer::clear_scratch() {
  order_.clear();
  inputs_.clear();
  input_nodes_.clear();
}

absl::StatusOr<Tracer::RandomDraw> Tracer::draw_random(int64_t count, Device device) {
  if (!rng_state_ || rng_state_->device() != device) {
    // Built aside and kept only once filled: a failure leaves the RNG as it was.
    TensorImplPtr state = TensorImpl::make(TensorType{Shape{2}, DType::i64}, device);
    state->set_input_role(InputRole::rng_state);
    MSTEP_ASSIGN_OR_RETURN(Backend * backend, BackendRegistry::get(device.type));
    MSTEP_ASSIGN_OR_RETURN(BufferPtr buf, backend->allocate(state->type()));
    const int64_t values[2] = {static_cast<int64_t>(rng_seed_), static_cast<int64_t>(rng_offset_)};
    if (absl::Status copied = backend->copy_in(*buf, values, sizeof values); !copied.ok())
      return absl::Status(copied.code(), absl::StrCat("random op on ", device.to_string(),
                                                      ": cannot write the RNG state: ",
                                                      copied.message()));
    state->set_buffer(std::move(buf));
    rng_state_ = std::move(state);
  }
  RandomDraw draw{rng_state_, rng_reserved_};
  // Round up so every op starts on a fresh Philox block.
  rng_reserved_ += (count + 3) / 4 * 4;
  return draw;
}

void Tracer::advance_rng_after_step() {
  if (rng_reserved_ == 0) return;
  rng_offset_ += rng_reserved_;
  rng_reserved_ = 0;
  rng_state_.reset();  // rebuilt with the new offset on the next draw
}

void Tracer::set_rng_offset(uint64_t offset) {
  rng_offset_ = offset;
  rng_state_.reset();
}

void Tracer::manual_seed(uint64_t seed) {
  rng_seed_ = seed;
  rng_offset_ = 0;
  rng_reserved_ = 0;
  rng_state_.reset();
}

// Public entry points.
void mark_step() { throw_if_error(Tracer::get().mark_step()); }
void manual_seed(uint64_t seed) { Tracer::get().manual_seed(seed); }
TraceGraph pending_graph() { return value_or_throw(Tracer::get().pending_graph()); }
void set_default_device(Device device) { Tracer::get().set_default_device(device); }
Device default_device() { return Tracer::get().default_device(); }

}  // namespace mstep
