// merge_segments (MergedStep.h).
#include "tools/mstep-aot/MergedStep.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "mstep/ir/InlineGraph.h"

namespace mstep::tools {

namespace {

class Merger {
public:
  explicit Merger(const GraphArchive& archive) : archive_(archive) {}

  absl::Status add_segment(size_t s, const TraceGraph& g) {
    const GraphArchive::Segment& seg = archive_.segments[s];
    if (g.input_types.size() != seg.inputs.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "segment ", s, "'s graph has ", g.input_types.size(), " inputs, its bindings ",
          seg.inputs.size()));
    std::vector<ValueRef> inputs;
    for (size_t j = 0; j < seg.inputs.size(); ++j) inputs.push_back(input(s, j));
    seg_inputs_.push_back(inputs);
    std::vector<ValueRef> results = append_inlined(g, inputs, seg.rng_offset, ops_);
    for (const GraphArchive::Output& o : seg.outputs) {
      current_[o.slot] = results[o.result];
      if (written_.emplace(o.slot, written_order_.size()).second) written_order_.push_back(o.slot);
    }
    seg_results_.push_back(std::move(results));
    return absl::OkStatus();
  }

  /// The arguments' parameter nodes first, then the ops (their operands
  /// moved past the arguments), then one output per slot written.
  MergedStep finish() {
    MergedStep m = std::move(step_);
    const auto num_args = static_cast<uint32_t>(m.graph.input_types.size());
    auto moved = [&](ValueRef v) {
      return v.node & kArgument ? ValueRef{v.node & ~kArgument, v.index}
                                : ValueRef{v.node + num_args, v.index};
    };
    for (GraphNode& n : ops_) {
      for (ValueRef& v : n.operands) v = moved(v);
      m.graph.nodes.push_back(std::move(n));
    }
    for (size_t k = 0; k < written_order_.size(); ++k) {
      const uint32_t slot = written_order_[k];
      m.graph.outputs.push_back(moved(current_.at(slot)));
      m.output_names.push_back(archive_.slots[slot].name);
      if (auto in = argument_of_slot_.find(slot); in != argument_of_slot_.end())
        m.graph.donated_to[in->second] = static_cast<int32_t>(k);
    }
    return m;
  }

private:
  /// Arguments are numbered apart from ops until finish() puts them first.
  static constexpr uint32_t kArgument = 1u << 31;

  ValueRef add_argument(const TensorType& type, InputRole role, std::string name,
                        std::string role_text, std::string bytes) {
    const auto index = static_cast<uint32_t>(step_.graph.input_types.size());
    step_.graph.input_types.push_back(type);
    step_.graph.input_roles.push_back(role);
    step_.graph.donated_to.push_back(-1);
    GraphNode n;
    n.op = OpKind::parameter;
    n.attrs.push_back({AttrName::index, static_cast<int64_t>(index)});
    n.results.push_back(type);
    step_.graph.nodes.push_back(std::move(n));
    step_.input_names.push_back(std::move(name));
    step_.input_roles.push_back(std::move(role_text));
    step_.input_values.push_back(std::move(bytes));
    return {index | kArgument, 0};
  }

  ValueRef input(size_t s, size_t j) {
    const GraphArchive::Segment& seg = archive_.segments[s];
    const GraphArchive::Binding& b = seg.inputs[j];
    const TensorType& type = seg.input_types[j];
    switch (b.source) {
    case GraphArchive::Binding::Source::slot: {
      if (auto it = current_.find(b.index); it != current_.end()) return it->second;
      const GraphArchive::Slot& slot = archive_.slots[b.index];
      argument_of_slot_[b.index] = step_.graph.input_types.size();
      return current_[b.index] = add_argument(type, slot.role, slot.name,
                                              std::string(input_role_name(slot.role)), slot.value);
    }
    case GraphArchive::Binding::Source::segment_result: return seg_results_[b.index][b.slot];
    case GraphArchive::Binding::Source::segment_input: return seg_inputs_[b.index][b.slot];
    case GraphArchive::Binding::Source::constant:
      return add_argument(type, InputRole::input, absl::StrCat("constant_", b.index), "constant",
                          archive_.constants[b.index].value);
    case GraphArchive::Binding::Source::rng:
      if (step_.rng_input < 0) {
        step_.rng_seed = archive_.rng_seed;
        step_.rng_first_offset = archive_.rng_offset;
        step_.rng_per_step = archive_.rng_consumed;
        const int64_t state[2] = {static_cast<int64_t>(step_.rng_seed),
                                  static_cast<int64_t>(step_.rng_first_offset)};
        step_.rng_input = static_cast<int64_t>(step_.graph.input_types.size());
        rng_ = add_argument(type, InputRole::rng_state, "rng_state", "RNG state",
                            std::string(reinterpret_cast<const char*>(state), sizeof state));
      }
      return rng_;
    }
    return {};
  }

  const GraphArchive& archive_;
  MergedStep step_;
  std::vector<GraphNode> ops_;
  std::map<uint32_t, size_t> argument_of_slot_; // slot -> argument
  std::map<uint32_t, ValueRef> current_;        // slot -> its value so far
  std::map<uint32_t, size_t> written_;          // slot -> output
  std::vector<uint32_t> written_order_;
  std::vector<std::vector<ValueRef>> seg_inputs_, seg_results_;
  ValueRef rng_;
};

} // namespace

absl::StatusOr<MergedStep> merge_segments(const GraphArchive& archive,
                                          const std::vector<TraceGraph>& segment_graphs) {
  Merger merger(archive);
  for (size_t s = 0; s < segment_graphs.size(); ++s) {
    absl::Status status = merger.add_segment(s, segment_graphs[s]);
    if (!status.ok()) return status;
  }
  return merger.finish();
}

} // namespace mstep::tools
