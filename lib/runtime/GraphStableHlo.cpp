// Graph::export_stablehlo: a captured step, all its segments, as one
// StableHLO function. The segments' trace graphs are merged into one graph
// as replay runs them: a segment's input bound to a tensor reads the value
// that tensor holds at that point (an earlier segment's result, or the
// step's argument for it), an input bound to an earlier segment's result or
// input reads that value, a frozen constant and the RNG state become
// arguments. Each random op's offset is moved by its segment's offset in
// the step, so one (seed, offset) argument serves all segments. The merged
// graph goes through the compiler's StableHLO export
// (trace_graph_to_stablehlo).
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "lib/compiler/Compiler.h"
#include "lib/runtime/CapturedSegment.h"
#include "mstep/ir/InlineGraph.h"
#include "mstep/api/Tensor.h"
#include "mstep/runtime/SafetensorsFile.h"
#include "mstep/runtime/Tracer.h"

namespace mstep::internal {

namespace {

constexpr const char* kWho = "Graph::export_stablehlo";

/// Builds the merged graph, the arguments' names and values.
class Merger {
 public:
  explicit Merger(const std::map<std::string, Tensor>& names)
      : name_of_(tensor_names(names, kWho)) {}

  void add_segment(size_t index, const Segment& seg) {
    if (!seg.graph || seg.graph->input_types.size() != seg.inputs.size())
      throw Error(absl::InternalError(absl::StrCat(
          kWho, ": segment ", index, " has no trace graph that matches its inputs")));
    const TraceGraph& g = *seg.graph;
    std::vector<ValueRef> inputs;
    for (size_t j = 0; j < seg.inputs.size(); ++j) inputs.push_back(input(seg, j));
    seg_inputs_.push_back(inputs);
    std::vector<ValueRef> results = append_inlined(g, inputs, seg.rng_offset, graph_.nodes);
    for (const Segment::OutputBinding& o : seg.outputs) {
      const TensorImpl* t = o.tensor.get();
      current_[t] = results[o.result];
      if (written_.try_emplace(t, written_order_.size()).second) written_order_.push_back(o.tensor);
    }
    seg_results_.push_back(std::move(results));
  }

  /// Closes the graph: one output per tensor written (its last value), and
  /// every argument of such a tensor donated to it.
  void finish() {
    for (size_t k = 0; k < written_order_.size(); ++k) {
      const TensorImpl* t = written_order_[k].get();
      graph_.outputs.push_back(current_.at(t));
      auto in = input_of_.find(t);
      output_names_.push_back(in != input_of_.end() ? input_names_[in->second]
                                                    : name(t, absl::StrCat("output_", k)));
      if (in != input_of_.end()) graph_.donated_to[in->second] = static_cast<int32_t>(k);
    }
  }

  const TraceGraph& graph() const { return graph_; }
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  std::map<std::string, HostTensor>& values() { return values_; }

 private:
  std::string name(const TensorImpl* t, std::string fallback) const {
    auto it = name_of_.find(t);
    return it != name_of_.end() ? it->second : fallback;
  }

  ValueRef add_argument(const TensorType& type, InputRole role, std::string name,
                        std::string bytes) {
    const auto index = static_cast<int64_t>(graph_.input_types.size());
    graph_.input_types.push_back(type);
    graph_.input_roles.push_back(role);
    graph_.donated_to.push_back(-1);
    GraphNode n;
    n.op = OpKind::parameter;
    n.attrs.push_back({AttrName::index, index});
    n.results.push_back(type);
    graph_.nodes.push_back(std::move(n));
    values_[name] = {type.dtype, type.shape, std::move(bytes)};
    input_names_.push_back(std::move(name));
    return {static_cast<uint32_t>(graph_.nodes.size() - 1), 0};
  }

  ValueRef input(const Segment& seg, size_t j) {
    const InputBinding& b = seg.inputs[j];
    const InputInfo& info = seg.input_info[j];
    switch (b.source) {
      case InputBinding::Source::tensor: {
        const TensorImpl* t = b.tensor.get();
        if (auto it = current_.find(t); it != current_.end()) return it->second;
        if (b.tensor->is_pending()) throw_if_error(Tracer::get().sync(*b.tensor));
        std::string bytes = b.tensor->buffer() ? download(b.tensor->buffer())
                                               : std::string(info.type.bytes(), '\0');
        const std::string arg_name =
            name(t, absl::StrCat(input_role_name(info.role), "_", input_names_.size()));
        input_of_[t] = input_names_.size();
        return current_[t] = add_argument(info.type, info.role, arg_name, std::move(bytes));
      }
      case InputBinding::Source::segment: return seg_results_[b.segment][b.slot];
      case InputBinding::Source::segment_input: return seg_inputs_[b.segment][b.slot];
      case InputBinding::Source::constant:
        return add_argument(info.type, InputRole::input,
                            absl::StrCat("constant_", input_names_.size()), download(b.constant));
      case InputBinding::Source::rng: {
        if (!rng_) {
          const int64_t state[2] = {static_cast<int64_t>(Tracer::get().rng_seed()),
                                    static_cast<int64_t>(Tracer::get().rng_offset())};
          rng_ = add_argument(info.type, InputRole::rng_state, "rng_state",
                              std::string(reinterpret_cast<const char*>(state), sizeof state));
        }
        return *rng_;
      }
    }
    return {};
  }

  const absl::flat_hash_map<const TensorImpl*, std::string> name_of_;
  TraceGraph graph_;
  std::vector<std::string> input_names_, output_names_;
  std::map<std::string, HostTensor> values_;
  absl::flat_hash_map<const TensorImpl*, size_t> input_of_;     // argument index
  absl::flat_hash_map<const TensorImpl*, ValueRef> current_;    // the tensor's value so far
  absl::flat_hash_map<const TensorImpl*, size_t> written_;      // output index
  std::vector<std::shared_ptr<TensorImpl>> written_order_;
  std::vector<std::vector<ValueRef>> seg_inputs_, seg_results_;
  std::optional<ValueRef> rng_;
};

}  // namespace

void export_captured_stablehlo(const std::string& path, const std::map<std::string, Tensor>& names,
                               const std::string& values_path,
                               const std::vector<Segment>& segments, uint64_t rng_consumed) {
  Merger merger(names);
  for (size_t s = 0; s < segments.size(); ++s) merger.add_segment(s, segments[s]);
  merger.finish();
  absl::StatusOr<std::string> text =
      trace_graph_to_stablehlo(merger.graph(), merger.input_names(), merger.output_names());
  if (!text.ok())
    throw Error(absl::Status(text.status().code(), absl::StrCat(kWho, ": ", text.status().message())));
  write_file(path, *text, kWho);
  if (values_path.empty()) return;
  const Tracer& tracer = Tracer::get();
  const std::map<std::string, std::string> metadata{
      {"rng_seed", std::to_string(tracer.rng_seed())},
      {"rng_offset", std::to_string(tracer.rng_offset())},
      {"rng_advance", std::to_string(rng_consumed)}};
  if (absl::Status s = write_safetensors(values_path, merger.values(), metadata); !s.ok())
    throw Error(absl::Status(s.code(), absl::StrCat(kWho, ": ", s.message())));
}

}  // namespace mstep::internal
