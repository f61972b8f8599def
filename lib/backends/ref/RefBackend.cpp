// The reference backend: host buffers and an interpreter that runs each
// node of a TraceGraph with the plain C++ kernel registered for its op.
// It is the numerical oracle for every other backend and their fallback.
// This is its runtime half; the compile half (RefCompiler.cpp) exports the
// compiled module back to a TraceGraph. A fusion region runs as a nested
// graph, op by op on whole tensors. The serialized form is that graph
// (RefExecutableFormat.h): it loads without MLIR.
#include <cstring>

#include "lib/backends/host/HostMemoryBackend.h"
#include "absl/strings/str_cat.h"
#include "lib/backends/ref/RefExecutableFormat.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Backend.h"

namespace mstep::ref {

namespace {

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable t{};
    register_creation_kernels(t);
    register_elementwise_kernels(t);
    register_reduction_kernels(t);
    register_reshape_kernels(t);
    register_shape_kernels(t);
    register_scatter_kernels(t);
    register_linalg_kernels(t);
    register_linalg_grad_kernels(t);
    register_nn_kernels(t);
    register_attention_kernels(t);
    register_attention_grad_kernels(t);
    register_loss_kernels(t);
    register_optimizer_kernels(t);
    register_custom_kernels(t);
    register_collective_kernels(t);
    return t;
  }();
  return table;
}

/// Runs a TraceGraph node by node. Each intermediate buffer is released
/// after its last use, so peak memory follows liveness.
class RefExecutable final : public Executable {
 public:
  explicit RefExecutable(TraceGraph graph) : graph_(std::move(graph)) {
    bodies_.resize(graph_.nodes.size());
    for (uint32_t i = 0; i < graph_.nodes.size(); ++i)
      if (graph_.nodes[i].body) bodies_[i] = std::make_unique<RefExecutable>(*graph_.nodes[i].body);
    last_use_.assign(graph_.nodes.size(), 0);
    for (uint32_t i = 0; i < graph_.nodes.size(); ++i)
      for (ValueRef v : graph_.nodes[i].operands) last_use_[v.node] = i;
    for (ValueRef v : graph_.outputs) last_use_[v.node] = UINT32_MAX;
    for (const GraphNode& n : graph_.nodes) num_kernels_ += n.op != OpKind::parameter;
    plan_placements();
  }

  size_t num_kernels() const override { return num_kernels_; }

  /// The native form (RefExecutableFormat.h): the graph, loaded without MLIR.
  absl::StatusOr<std::string> serialize(absl::string_view) const override {
    return write_ref_executable(graph_);
  }

  using Executable::run;
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation& donation) override {
    if (inputs.size() != graph_.input_types.size())
      return absl::InvalidArgumentError(
          absl::StrCat("ref executable expects ", graph_.input_types.size(),
                       " inputs, got ", inputs.size()));
    std::vector<absl::InlinedVector<BufferPtr, 1>> values(graph_.nodes.size());
    std::vector<const HostBuffer*> in_ptrs;
    std::vector<HostBuffer*> out_ptrs;
    for (uint32_t i = 0; i < graph_.nodes.size(); ++i) {
      const GraphNode& node = graph_.nodes[i];
      if (node.op == OpKind::parameter) {
        const int64_t index = attr_int(node.attrs, AttrName::index);
        const BufferPtr& buf = inputs[index];
        if (!buf || buf->type() != graph_.input_types[index])
          return absl::InvalidArgumentError(absl::StrCat(
              "ref executable input ", index, " should be ",
              graph_.input_types[index].to_string(), ", got ",
              buf ? buf->type().to_string() : "null"));
        values[i].push_back(buf);
        continue;
      }
      if (bodies_[i]) {  // a fusion: run its DAG on the operands
        std::vector<BufferPtr> body_inputs;
        for (ValueRef v : node.operands) body_inputs.push_back(values[v.node][v.index]);
        MSTEP_ASSIGN_OR_RETURN(std::vector<BufferPtr> body_outputs, bodies_[i]->run(body_inputs));
        values[i].assign(body_outputs.begin(), body_outputs.end());
        release_operands(i, values);
        continue;
      }
      in_ptrs.clear();
      out_ptrs.clear();
      for (ValueRef v : node.operands)
        in_ptrs.push_back(static_cast<const HostBuffer*>(values[v.node][v.index].get()));
      auto& results = values[i];
      results.resize(node.results.size());
      // A result goes into an input the plan aliases to it and the caller
      // donates, or into a buffer the caller offers (see Donation).
      if (!donation.inputs.empty())
        for (const Placement& u : in_place_[i])
          if (donation.inputs[u.source]) results[u.result] = inputs[u.source];
      if (!donation.outputs.empty())
        for (const Placement& u : outputs_of_[i]) {
          const BufferPtr& b = donation.outputs[u.source];
          if (!results[u.result] && b && b->type() == node.results[u.result])
            results[u.result] = b;
        }
      for (size_t r = 0; r < results.size(); ++r) {
        if (!results[r]) results[r] = std::make_shared<HostBuffer>(node.results[r]);
        out_ptrs.push_back(static_cast<HostBuffer*>(results[r].get()));
      }
      RefKernel kernel = kernels()[static_cast<int>(node.op)];
      MSTEP_RETURN_IF_ERROR(kernel(KernelArgs{node, in_ptrs, out_ptrs}));
      release_operands(i, values);
    }
    std::vector<BufferPtr> outputs;
    outputs.reserve(graph_.outputs.size());
    for (ValueRef v : graph_.outputs) outputs.push_back(values[v.node][v.index]);
    return outputs;
  }

 private:
  /// Drops the buffers whose last use is node `i`.
  void release_operands(uint32_t i, std::vector<absl::InlinedVector<BufferPtr, 1>>& values) const {
    for (ValueRef v : graph_.nodes[i].operands)
      if (last_use_[v.node] == i) values[v.node].clear();
  }

  /// Fills outputs_of_ (where run()'s `reuse` buffers may go) and
  /// in_place_: the donated inputs (TraceGraph::donated_to) whose new
  /// value a kernel that reads every element before writing it computes
  /// (multi_tensor_update: the optimizer step), when no later node reads
  /// the old value. Updating them in place spares the step a new buffer
  /// per parameter and per optimizer state.
  void plan_placements() {
    in_place_.resize(graph_.nodes.size());
    outputs_of_.resize(graph_.nodes.size());
    for (uint32_t k = 0; k < graph_.outputs.size(); ++k)
      outputs_of_[graph_.outputs[k].node].push_back({graph_.outputs[k].index, k});
    std::vector<int64_t> input_node(graph_.input_types.size(), -1);
    for (uint32_t i = 0; i < graph_.nodes.size(); ++i)
      if (graph_.nodes[i].op == OpKind::parameter)
        input_node[attr_int(graph_.nodes[i].attrs, AttrName::index)] = i;
    for (uint32_t in = 0; in < graph_.donated_to.size(); ++in) {
      if (graph_.donated_to[in] < 0 || input_node[in] < 0) continue;
      const ValueRef out = graph_.outputs[graph_.donated_to[in]];
      const GraphNode& writer = graph_.nodes[out.node];
      if (writer.op != OpKind::multi_tensor_update || last_use_[input_node[in]] != out.node ||
          writer.results[out.index] != graph_.input_types[in])
        continue;
      in_place_[out.node].push_back({out.index, in});
    }
  }

  /// A result of a node that may live in a given buffer.
  struct Placement {
    uint32_t result;  // of the node
    uint32_t source;  // the graph input (in_place_) or output (outputs_of_)
  };

  TraceGraph graph_;
  std::vector<std::vector<Placement>> in_place_;    // per node
  std::vector<std::vector<Placement>> outputs_of_;  // per node: its graph outputs
  std::vector<std::unique_ptr<RefExecutable>> bodies_;  // per node: its fusion body
  std::vector<uint32_t> last_use_;
  size_t num_kernels_ = 0;
};

/// Every node of `graph` (and of its fusion bodies) has a kernel.
absl::Status check_kernels(const TraceGraph& graph) {
  for (const GraphNode& n : graph.nodes) {
    if (n.body) {
      MSTEP_RETURN_IF_ERROR(check_kernels(*n.body));
    } else if (n.op == OpKind::custom) {
      MSTEP_RETURN_IF_ERROR(check_custom_kernel(n));
    } else if (n.op != OpKind::parameter && !kernels()[static_cast<int>(n.op)]) {
      return absl::UnimplementedError(
          absl::StrCat("ref backend has no kernel for op '", op_name(n.op), "'"));
    }
  }
  return absl::OkStatus();
}

class RefBackend final : public host::HostMemoryBackend {
 public:
  absl::string_view name() const override { return "ref"; }
  DeviceType device_type() const override { return DeviceType::ref; }

  absl::StatusOr<std::unique_ptr<Executable>> deserialize(absl::string_view blob,
                                                          const RuntimeOptions&) override {
    MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, read_ref_executable(blob));
    MSTEP_RETURN_IF_ERROR(check_kernels(graph));
    return std::make_unique<RefExecutable>(std::move(graph));
  }

  bool supports(OpKind op, DType) const override {
    return op == OpKind::parameter || kernels()[static_cast<int>(op)] != nullptr;
  }
};

}  // namespace

RefKernel ref_kernel(OpKind op) { return kernels()[static_cast<int>(op)]; }

absl::StatusOr<std::unique_ptr<Executable>> make_ref_executable(TraceGraph graph) {
  MSTEP_RETURN_IF_ERROR(check_kernels(graph));
  return std::make_unique<RefExecutable>(std::move(graph));
}

namespace {

const bool registered = [] {
  BackendRegistry::register_backend(
      "ref", DeviceType::ref, [] { return std::unique_ptr<Backend>(new RefBackend()); });
  return true;
}();

}  // namespace
}  // namespace mstep::ref
