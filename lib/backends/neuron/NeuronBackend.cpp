// NeuronBackend: opaque simulated HBM, the executable (tile programs on
// the simulator, the rest on the host), its native form, and the backend's
// registration.
#include "lib/backends/neuron/NeuronBackend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionLowering.h"
#include "lib/backends/neuron/CopyLowering.h"
#include "lib/backends/neuron/CustomKernelLowering.h"
#include "lib/backends/neuron/Lowering.h"
#include "lib/backends/neuron/SimulatedTimeline.h"
#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"
#include "mstep/ir/GraphSerialize.h"

namespace mstep::neuron {

namespace {

constexpr Device kDevice{DeviceType::neuron, 0};

/// The native executable form: the graph, lowered again on load (the
/// lowering is deterministic), so mstep-run and the disk cache need no MLIR.
constexpr absl::string_view kFormatMagic = "MSTEPNRN";
constexpr uint32_t kFormatVersion = 1;

std::shared_ptr<host::HostBuffer> nan_filled(const TensorType& type) {
  auto b = std::make_shared<host::HostBuffer>(type, kDevice);
  std::memset(b->bytes(), 0xFF, type.bytes());
  return b;
}

absl::Status check_buffer(const Buffer& b, absl::string_view what, size_t bytes) {
  if (b.device().type != DeviceType::neuron)
    return absl::InvalidArgumentError(
        absl::StrCat("neuron ", what, " of a ", b.device().to_string(), " buffer"));
  if (bytes != b.type().bytes())
    return absl::InvalidArgumentError(absl::StrCat("neuron ", what, " of ", bytes, " bytes with ",
                                                   b.type().to_string(), " (", b.type().bytes(),
                                                   " bytes)"));
  return absl::OkStatus();
}

/// Runs the graph node by node on host bytes: a node lower_node could tile
/// runs its tile program on the simulator; every other node runs its ref
/// kernel (a fusion its ref body) and is reported as a host fallback.
class NeuronExecutable final : public Executable {
public:
  explicit NeuronExecutable(TraceGraph graph) : graph_(std::move(graph)) {
    const size_t n = graph_.nodes.size();
    lowered_.resize(n);
    bodies_.resize(n);
    last_use_.assign(n, 0);
    alias_.assign(n, false);
    std::vector<bool> is_output(n, false);
    for (ValueRef v : graph_.outputs) is_output[v.node] = true;
    uses_.assign(n, {});
    for (uint32_t i = 0; i < n; ++i)
      for (size_t o = 0; o < graph_.nodes[i].operands.size(); ++o)
        uses_[graph_.nodes[i].operands[o].node].push_back({i, o});
    // Matmuls reading a transpose's operand as A^T (B^T), attention reading
    // and writing at the heads' strides: lowered with their permutes.
    std::vector<std::unique_ptr<LoweredOp>> with_permutes = fuse_transposes_into_matmuls(is_output);
    store_transposed_matmul_results(is_output, with_permutes);
    std::vector<std::unique_ptr<LoweredOp>> of_heads = fold_head_permutes_into_attention(is_output);
    for (uint32_t i = 0; i < n; ++i)
      if (of_heads[i]) with_permutes[i] = std::move(of_heads[i]);
    for (uint32_t i = 0; i < n; ++i) {
      const GraphNode& node = graph_.nodes[i];
      for (ValueRef v : node.operands) last_use_[v.node] = i;
      if (node.op == OpKind::parameter || node.op == OpKind::constant || node.results.empty() ||
          read_by_matmuls_[i] || read_by_attention_[i] || written_by_attention_[i] ||
          written_by_matmul_[i])
        continue;
      std::vector<TensorType> types;
      for (ValueRef v : node.operands) types.push_back(graph_.type_of(v));
      if (with_permutes[i]) {
        estimated_ns_ += with_permutes[i]->cost.total_ns;
        lowered_[i] = std::move(with_permutes[i]);
        timeline_.add(absl::StrCat(op_name(node.op), " #", i), lowered_[i]->program,
                      lowered_[i]->cost);
        continue;
      }
      // Bytes that stay where they are: no program (an output still gets
      // its own HBM, so it is copied by its DMA program).
      if (!is_output[i] && layout_alias(node, types)) {
        alias_[i] = true;
        continue;
      }
      // A custom op runs the NeuronCore kernel it registered
      // (CustomKernelLowering.h); one that fails or breaks a hardware rule
      // is the compile's error, not a fallback.
      const bool custom = node.op == OpKind::custom;
      absl::StatusOr<LoweredOp> low =
          custom ? lower_custom_op(node, types) : lower_node(node, types);
      if (custom && !low.ok() && !absl::IsUnimplemented(low.status())) {
        if (error_.ok()) error_ = low.status();
        continue;
      }
      // The lowering validated and costed the program; its report (busy
      // engines, instruction timing) is the timeline's.
      if (low.ok()) {
        estimated_ns_ += low->cost.total_ns;
        lowered_[i] = std::make_unique<LoweredOp>(*std::move(low));
        timeline_.add(
            absl::StrCat(custom ? custom_op_label(node) : std::string(op_name(node.op)), " #", i),
            lowered_[i]->program, lowered_[i]->cost);
        continue;
      }
      fallbacks_.push_back({node.op, node.results[0].dtype, std::string(low.status().message())});
    }
    for (ValueRef v : graph_.outputs) last_use_[v.node] = UINT32_MAX;
  }

  /// The matrix transposes whose every use is a 2-d matmul's operand (not
  /// a graph output): marked in read_by_matmuls_ (no program; the matmuls read
  /// the transpose's operand as their A^T or B^T). Returns those matmuls'
  /// programs, by node. A transpose any of whose matmuls does not lower
  /// that way stays a program of its own (and those matmuls are lowered
  /// again without it).
  std::vector<std::unique_ptr<LoweredOp>>
  fuse_transposes_into_matmuls(const std::vector<bool>& is_output) {
    const size_t n = graph_.nodes.size();
    read_by_matmuls_.assign(n, false);
    for (uint32_t i = 0; i < n; ++i) {
      const GraphNode& node = graph_.nodes[i];
      if (is_output[i] || uses_[i].empty() || node.operands.size() != 1 ||
          !is_matrix_transpose(node, {graph_.type_of(node.operands[0])}))
        continue;
      bool all = true;
      for (const auto& [u, o] : uses_[i]) {
        const GraphNode& mm = graph_.nodes[u];
        all = all && mm.op == OpKind::matmul && mm.operands.size() == 2 &&
              mm.operands[0].node != mm.operands[1].node;
      }
      read_by_matmuls_[i] = all;
    }
    std::vector<std::unique_ptr<LoweredOp>> programs(n);
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t u = 0; u < n && !changed; ++u) {
        const GraphNode& mm = graph_.nodes[u];
        if (mm.op != OpKind::matmul || mm.operands.size() != 2) continue;
        const bool a_t = fused_transpose(mm, 0), b_t = fused_transpose(mm, 1);
        programs[u].reset();
        if (!a_t && !b_t) continue;
        std::vector<TensorType> types;
        for (size_t o = 0; o < 2; ++o) {
          const ValueRef v = mm.operands[o];
          types.push_back(fused_transpose(mm, o) ? graph_.type_of(graph_.nodes[v.node].operands[0])
                                       : graph_.type_of(v));
        }
        absl::StatusOr<LoweredOp> low = lower_matmul_of_transposes(mm, types, a_t, b_t);
        if (low.ok()) {
          programs[u] = std::make_unique<LoweredOp>(*std::move(low));
          continue;
        }
        // Not this way: its transposes keep their programs; start again.
        for (size_t o = 0; o < 2; ++o)
          if (fused_transpose(mm, o)) read_by_matmuls_[mm.operands[o].node] = false;
        changed = true;
      }
    }
    return programs;
  }

  /// Whether matmul `mm` reads its operand `o` as it is: a transpose
  /// marked read_by_matmuls_ (its operand is the matmul's A^T or B^T).
  bool fused_transpose(const GraphNode& mm, size_t o) const {
    return graph_.nodes[mm.operands[o].node].op == OpKind::permute &&
           read_by_matmuls_[mm.operands[o].node];
  }

  /// A matrix transpose that is the only use of a 2-d matmul's result
  /// (the weight gradient X^T dY of a layer whose forward reads W^T) is
  /// marked written_by_matmul_ (no program): the matmul computes
  /// C^T = B^T A^T instead (its operands swapped, each read as the
  /// transpose of what it was: a fused transpose's operand as it is, any
  /// other operand as A^T or B^T) and the transpose's value views those
  /// bytes. Same products, same K order: the bits of C^T. Not where the
  /// transpose is itself read by matmuls as A^T or B^T (they would read
  /// its operand) or the matmul does not lower so.
  void store_transposed_matmul_results(const std::vector<bool>& is_output,
                                       std::vector<std::unique_ptr<LoweredOp>>& programs) {
    const size_t n = graph_.nodes.size();
    written_by_matmul_.assign(n, false);
    for (uint32_t p = 0; p < n; ++p) {
      const GraphNode& t = graph_.nodes[p];
      if (read_by_matmuls_[p] || t.operands.size() != 1 ||
          !is_matrix_transpose(t, {graph_.type_of(t.operands[0])}))
        continue;
      const uint32_t u = t.operands[0].node;
      const GraphNode& mm = graph_.nodes[u];
      if (mm.op != OpKind::matmul || mm.operands.size() != 2 || is_output[u] ||
          uses_[u].size() != 1 || mm.operands[0].node == mm.operands[1].node)
        continue;
      // C^T = B^T A^T: the new A is B^T, the new B is A^T.
      std::vector<TensorType> types;
      bool transposed[2];
      for (size_t o = 0; o < 2; ++o) {
        const ValueRef v = mm.operands[1 - o];
        const bool f = fused_transpose(mm, 1 - o);
        types.push_back(f ? graph_.type_of(graph_.nodes[v.node].operands[0]) : graph_.type_of(v));
        transposed[o] = !f;
      }
      absl::StatusOr<LoweredOp> low =
          lower_matmul_of_transposes(mm, types, transposed[0], transposed[1]);
      if (!low.ok()) continue;
      low->hbm_binding = {1, 0, -1}; // the program's A from operand 1, its B from operand 0
      programs[u] = std::make_unique<LoweredOp>(*std::move(low));
      written_by_matmul_[p] = true;
    }
  }

  /// Attention at the heads' strides (AttentionShape::HeadStrides; the
  /// CUDA backend's cuDNN does the same): a head permute (is_head_permute)
  /// all of whose uses are attention's q, k, v or grad_out (not a graph
  /// output) is marked read_by_attention_ (no program: its value is its
  /// operand's buffer, which those attention programs read strided), and
  /// one that is the only use of an attention result is marked
  /// written_by_attention_ (no program: the attention program stores the
  /// result permuted, and the permute's value views those bytes). Returns
  /// the attention programs lowered so, by node. Where an attention node
  /// does not lower so, its permutes keep their programs (and the other
  /// attention nodes are lowered again: the forward and the backward may
  /// share q, k and v). The permutes are exact data movement, so the
  /// results are the bits of the unfolded graph.
  /// MSTEP_NEURON_HEAD_STRIDES=0 turns the fold off (tests compare the two).
  std::vector<std::unique_ptr<LoweredOp>>
  fold_head_permutes_into_attention(const std::vector<bool>& is_output) {
    const size_t n = graph_.nodes.size();
    read_by_attention_.assign(n, false);
    written_by_attention_.assign(n, false);
    std::vector<std::unique_ptr<LoweredOp>> programs(n);
    const char* env = std::getenv("MSTEP_NEURON_HEAD_STRIDES");
    if (env && std::string(env) == "0") return programs;
    auto is_attention = [&](uint32_t i) {
      return graph_.nodes[i].op == OpKind::sdpa || graph_.nodes[i].op == OpKind::sdpa_grad;
    };
    // q, k, v; the backward's grad_out, q, k, v.
    auto strided_operand = [&](uint32_t a, size_t o) {
      return o < (graph_.nodes[a].op == OpKind::sdpa_grad ? 4u : 3u);
    };
    auto head_permute = [&](uint32_t i) {
      const GraphNode& p = graph_.nodes[i];
      return p.operands.size() == 1 && is_head_permute(p, {graph_.type_of(p.operands[0])});
    };
    for (uint32_t i = 0; i < n; ++i) {
      if (is_output[i] || uses_[i].empty() || !head_permute(i)) continue;
      bool all = true;
      for (const auto& [u, o] : uses_[i]) all = all && is_attention(u) && strided_operand(u, o);
      read_by_attention_[i] = all;
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (!head_permute(i) || read_by_attention_[i]) continue;
      const ValueRef src = graph_.nodes[i].operands[0];
      if (!is_attention(src.node) ||
          std::find(graph_.outputs.begin(), graph_.outputs.end(), src) != graph_.outputs.end())
        continue;
      size_t reads = 0; // of this result
      for (const auto& [u, o] : uses_[src.node]) reads += graph_.nodes[u].operands[o] == src;
      written_by_attention_[i] = reads == 1;
    }
    auto folded = [&](uint32_t a, size_t o) {
      const uint32_t p = graph_.nodes[a].operands[o].node;
      return strided_operand(a, o) && graph_.nodes[p].op == OpKind::permute &&
             read_by_attention_[p];
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t a = 0; a < n && !changed; ++a) {
        if (!is_attention(a)) continue;
        const GraphNode& node = graph_.nodes[a];
        programs[a].reset();
        AttentionHeadStrides strided;
        strided.operands.assign(node.operands.size(), false);
        strided.results.assign(node.results.size(), false);
        bool any = false;
        for (size_t o = 0; o < node.operands.size(); ++o) {
          strided.operands[o] = folded(a, o);
          any = any || strided.operands[o];
        }
        for (const auto& [u, o] : uses_[a]) {
          if (!written_by_attention_[u]) continue;
          strided.results[graph_.nodes[u].operands[o].index] = true;
          any = true;
        }
        if (!any) continue;
        std::vector<TensorType> types;
        for (ValueRef v : node.operands) types.push_back(graph_.type_of(v));
        absl::StatusOr<LoweredOp> low = lower_attention_at_head_strides(node, types, strided);
        if (low.ok()) {
          programs[a] = std::make_unique<LoweredOp>(*std::move(low));
          continue;
        }
        // Not this way: its permutes keep their programs; start again.
        for (size_t o = 0; o < node.operands.size(); ++o)
          if (strided.operands[o]) read_by_attention_[node.operands[o].node] = false;
        for (const auto& [u, o] : uses_[a]) written_by_attention_[u] = false;
        changed = true;
      }
    }
    return programs;
  }

  /// Makes the ref interpreters of the fusion bodies that run on the host.
  absl::Status prepare() {
    MSTEP_RETURN_IF_ERROR(error_);
    for (size_t i = 0; i < graph_.nodes.size(); ++i)
      if (graph_.nodes[i].body && !lowered_[i]) {
        MSTEP_ASSIGN_OR_RETURN(bodies_[i], ref::make_ref_executable(*graph_.nodes[i].body));
      }
    return absl::OkStatus();
  }

  size_t num_kernels() const override { return fallbacks_.size() + num_lowered(); }
  absl::Span<const HostFallbackOp> host_fallbacks() const override { return fallbacks_; }
  NeuronLoweringStats stats() const {
    auto count = [](const std::vector<bool>& v) {
      return static_cast<size_t>(std::count(v.begin(), v.end(), true));
    };
    return {num_lowered(), estimated_ns_, count(alias_),
            count(read_by_matmuls_) + count(written_by_matmul_),
            count(read_by_attention_) + count(written_by_attention_)};
  }
  std::vector<const TileProgram*> programs() const {
    std::vector<const TileProgram*> out;
    for (const auto& l : lowered_)
      if (l) out.push_back(&l->program);
    return out;
  }
  std::vector<LoweredKernel> kernels() const {
    std::vector<LoweredKernel> out;
    for (size_t i = 0; i < lowered_.size(); ++i) {
      if (!lowered_[i]) continue;
      const GraphNode& node = graph_.nodes[i];
      out.push_back({node.op,
                     absl::StrCat(op_name(node.op), " #", i, " ", node.results[0].to_string()),
                     &lowered_[i]->program});
    }
    return out;
  }
  const SimulatedTime& simulated_per_run() const { return timeline_.per_run(); }

  absl::StatusOr<std::string> serialize(absl::string_view) const override {
    return seal(kFormatMagic, kFormatVersion, serialize_graph(graph_));
  }
  size_t num_lowered() const {
    size_t k = 0;
    for (const auto& l : lowered_) k += l != nullptr;
    return k;
  }

  using Executable::run;
  /// Donations are declined: every output is a new buffer (or, for an input
  /// passed through, a copy of it, so no two buffers share HBM).
  absl::StatusOr<std::vector<BufferPtr>> run(absl::Span<const BufferPtr> inputs,
                                             const Donation&) override {
    const std::vector<TensorType>& input_types = graph_.input_types;
    if (inputs.size() != input_types.size())
      return absl::InvalidArgumentError(absl::StrCat(
          "neuron executable expects ", input_types.size(), " inputs, got ", inputs.size()));
    std::vector<std::vector<std::shared_ptr<host::HostBuffer>>> values(graph_.nodes.size());
    std::vector<const host::HostBuffer*> in_ptrs;
    std::vector<host::HostBuffer*> out_ptrs;
    for (uint32_t i = 0; i < graph_.nodes.size(); ++i) {
      const GraphNode& node = graph_.nodes[i];
      if (node.op == OpKind::parameter) {
        const int64_t index = attr_int(node.attrs, AttrName::index);
        const BufferPtr& b = inputs[index];
        if (!b || b->type() != input_types[index] || b->device().type != DeviceType::neuron)
          return absl::InvalidArgumentError(absl::StrCat(
              "neuron executable input ", index, " should be a neuron ",
              input_types[index].to_string(), ", got ",
              b ? absl::StrCat(b->device().to_string(), " ", b->type().to_string()) : "null"));
        values[i].push_back(static_cast<const NeuronBuffer&>(*b).storage());
        continue;
      }
      in_ptrs.clear();
      out_ptrs.clear();
      for (ValueRef v : node.operands) in_ptrs.push_back(values[v.node][v.index].get());
      if (alias_[i] || written_by_attention_[i] || written_by_matmul_[i]) { // bytes stored permuted
        values[i].push_back(
            alias_of(values[node.operands[0].node][node.operands[0].index], node.results[0]));
      } else if (read_by_matmuls_[i] || read_by_attention_[i]) {
        // X itself: its matmuls read it as A^T or B^T, its attention strided
        values[i].push_back(values[node.operands[0].node][node.operands[0].index]);
      } else if (bodies_[i]) {
        std::vector<BufferPtr> body_inputs;
        for (ValueRef v : node.operands) body_inputs.push_back(values[v.node][v.index]);
        MSTEP_ASSIGN_OR_RETURN(std::vector<BufferPtr> results, bodies_[i]->run(body_inputs));
        for (BufferPtr& r : results)
          values[i].push_back(copy_of(static_cast<const host::HostBuffer&>(*r)));
      } else {
        for (const TensorType& t : node.results) {
          values[i].push_back(std::make_shared<host::HostBuffer>(t, kDevice));
          out_ptrs.push_back(values[i].back().get());
        }
        if (lowered_[i]) {
          MSTEP_RETURN_IF_ERROR(run_lowered(*lowered_[i], simulator_, in_ptrs, out_ptrs));
        } else {
          MSTEP_RETURN_IF_ERROR(ref::ref_kernel(node.op)(ref::KernelArgs{node, in_ptrs, out_ptrs}));
        }
      }
      for (ValueRef v : node.operands)
        if (last_use_[v.node] == i) values[v.node].clear();
    }
    std::vector<BufferPtr> outputs;
    for (ValueRef v : graph_.outputs) {
      std::shared_ptr<host::HostBuffer> r = values[v.node][v.index];
      // An input passed through (or an output twice) gets its own copy.
      bool shared = graph_.nodes[v.node].op == OpKind::parameter;
      for (const BufferPtr& o : outputs)
        shared |= static_cast<const NeuronBuffer&>(*o).storage() == r;
      if (shared) r = copy_of(*r);
      outputs.push_back(std::make_shared<NeuronBuffer>(r->type(), std::move(r)));
    }
    timeline_.record_run();
    return outputs;
  }

private:
  /// `source`'s bytes read as `type` (a layout alias); keeps `source` alive.
  static std::shared_ptr<host::HostBuffer> alias_of(std::shared_ptr<host::HostBuffer> source,
                                                    const TensorType& type) {
    struct Alias {
      std::shared_ptr<host::HostBuffer> source;
      host::HostBuffer view;
    };
    std::byte* bytes = source->bytes();
    auto a = std::make_shared<Alias>(
        Alias{std::move(source), host::HostBuffer::view(type, kDevice, bytes)});
    return std::shared_ptr<host::HostBuffer>(a, &a->view);
  }

  static std::shared_ptr<host::HostBuffer> copy_of(const host::HostBuffer& b) {
    auto copy = std::make_shared<host::HostBuffer>(b.type(), kDevice);
    std::memcpy(copy->bytes(), b.bytes(), b.type().bytes());
    return copy;
  }

  TraceGraph graph_;
  std::vector<std::unique_ptr<LoweredOp>> lowered_;
  std::vector<bool> alias_; ///< per node: a layout alias of operand 0
  /// Per node: a transpose whose matmuls read its operand as A^T or B^T;
  /// its value is the operand's buffer, not transposed (read by them only).
  std::vector<bool> read_by_matmuls_;
  /// Per node: a head permute whose attention uses read its operand at
  /// the heads' strides (its value: the operand's buffer, not permuted),
  /// or one whose attention operand wrote its bytes permuted (its value
  /// views them); fold_head_permutes_into_attention.
  std::vector<bool> read_by_attention_, written_by_attention_;
  /// Per node: a transpose whose matmul operand stored C^T (its value
  /// views those bytes); store_transposed_matmul_results.
  std::vector<bool> written_by_matmul_;
  /// Per node: its uses, (consumer node, operand index).
  std::vector<std::vector<std::pair<uint32_t, size_t>>> uses_;

  std::vector<std::unique_ptr<Executable>> bodies_;
  std::vector<uint32_t> last_use_;
  std::vector<HostFallbackOp> fallbacks_;
  double estimated_ns_ = 0;
  SimulatedTimeline timeline_;
  Simulator simulator_;
  absl::Status error_; ///< the first custom op kernel that failed to build
};

} // namespace

NeuronBuffer::NeuronBuffer(TensorType type) : Buffer(type, kDevice), storage_(nan_filled(type)) {}

NeuronBuffer::NeuronBuffer(TensorType type, std::shared_ptr<host::HostBuffer> storage)
    : Buffer(type, kDevice), storage_(std::move(storage)) {}

absl::StatusOr<std::unique_ptr<Executable>> NeuronBackend::deserialize(absl::string_view blob,
                                                                       const RuntimeOptions&) {
  MSTEP_ASSIGN_OR_RETURN(absl::string_view body,
                         unseal(blob, kFormatMagic, kFormatVersion, "neuron executable"));
  MSTEP_ASSIGN_OR_RETURN(TraceGraph graph, deserialize_graph(body));
  return make_neuron_executable(std::move(graph));
}

absl::StatusOr<BufferPtr> NeuronBackend::allocate(const TensorType& type) {
  return std::make_shared<NeuronBuffer>(type);
}

absl::Status NeuronBackend::copy_in(Buffer& dst, const void* src, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(dst, "copy_in", bytes));
  if (bytes) std::memcpy(static_cast<NeuronBuffer&>(dst).storage()->bytes(), src, bytes);
  return absl::OkStatus();
}

absl::Status NeuronBackend::copy_out(const Buffer& src, void* dst, size_t bytes) {
  MSTEP_RETURN_IF_ERROR(check_buffer(src, "copy_out", bytes));
  if (bytes) std::memcpy(dst, static_cast<const NeuronBuffer&>(src).storage()->bytes(), bytes);
  return absl::OkStatus();
}

NeuronLoweringStats lowering_stats(const Executable& exe) {
  const auto* n = dynamic_cast<const NeuronExecutable*>(&exe);
  return n ? n->stats() : NeuronLoweringStats{};
}

SimulatedTime simulated_per_run(const Executable& exe) {
  const auto* n = dynamic_cast<const NeuronExecutable*>(&exe);
  return n ? n->simulated_per_run() : SimulatedTime{};
}

std::vector<const TileProgram*> lowered_programs(const Executable& exe) {
  const auto* n = dynamic_cast<const NeuronExecutable*>(&exe);
  return n ? n->programs() : std::vector<const TileProgram*>{};
}

std::vector<LoweredKernel> lowered_kernels(const Executable& exe) {
  const auto* n = dynamic_cast<const NeuronExecutable*>(&exe);
  return n ? n->kernels() : std::vector<LoweredKernel>{};
}

absl::StatusOr<std::unique_ptr<Executable>> make_neuron_executable(TraceGraph graph) {
  // The ref interpreter's check: every op has a host kernel (or fails here).
  MSTEP_RETURN_IF_ERROR(ref::make_ref_executable(graph).status());
  auto exe = std::make_unique<NeuronExecutable>(std::move(graph));
  MSTEP_RETURN_IF_ERROR(exe->prepare());
  return exe;
}

namespace {

const bool registered = [] {
  BackendRegistry::register_backend("neuron", DeviceType::neuron,
                                    [] { return std::unique_ptr<Backend>(new NeuronBackend()); });
  return true;
}();

} // namespace
} // namespace mstep::neuron
