// oneDNN matmul kernels: the plain `matmul` node, and matmul with a fused
// bias + activation epilogue taken from the `fusion` node that consumes it.
// (oneDNN's matmul keeps NaN and inf as IEEE arithmetic does, measured on
// f32 and bf16 with odd k, so unlike conv it needs no SpecialValueGuard;
// bf16 only on the CPU's own bf16 dot products: where oneDNN emulates
// them, the matmul is widened to f32 instead, see build_or_widen.)
//
// Batch dims: oneDNN wants src, weights and dst of one rank, so an operand
// of lower rank gets leading unit dims; unit batch dims broadcast, as the
// op's semantics say. A weight that is a permuted graph input is read in
// place through a transposed memory desc (see transposed_source()).
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/OneDnnKernels.h"
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"

namespace mstep::cpu {

std::optional<ValueRef> transposed_source(const TraceGraph& graph, ValueRef operand,
                                          const std::vector<bool>* see_through) {
  const GraphNode& node = graph.nodes[operand.node];
  if (!is_matrix_transpose(node)) return std::nullopt;
  const ValueRef source = node.operands[0];
  // Only a graph input keeps its buffer for the whole run; an intermediate
  // value's memory may be reused once the permute (its last reader) ran.
  if (graph.nodes[source.node].op != OpKind::parameter &&
      !(see_through && (*see_through)[operand.node]))
    return std::nullopt;
  return source;
}

namespace onednn {
namespace {

using dnnl::memory;

/// The activation an epilogue applies after the bias add.
enum class Activation { none, relu, gelu_erf, gelu_tanh };

/// What one oneDNN matmul computes: act(lhs @ rhs [+ bias]) [+ residual].
struct MatmulSpec {
  ValueRef lhs, rhs;
  std::optional<ValueRef> bias;      // broadcast along all but the last dim
  std::optional<ValueRef> residual;  // the result's type
  TensorType result;
  Activation activation = Activation::none;
  const std::vector<bool>* see_through = nullptr;  // see transposed_source()
  /// Compute the transposed product, (lhs @ rhs)^T = rhs^T @ lhs^T, for a
  /// matmul whose only reader is a permute swapping the last two dims. Both
  /// operands are read through transposed descs (a strided dst would take
  /// oneDNN's slow reference kernel); the result is the permute's value.
  bool transposed_product = false;
};

/// Strides that read a dense [..., cols, rows] buffer as [..., rows, cols].
memory::dims transposed_strides(const memory::dims& dims) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t rows = dims[rank - 2], cols = dims[rank - 1];
  memory::dims strides(rank);
  strides[rank - 1] = rows;
  strides[rank - 2] = 1;
  for (int64_t d = rank - 3; d >= 0; --d)
    strides[d] = (d == rank - 3 ? rows * cols : strides[d + 1] * dims[d + 1]);
  return strides;
}

/// The desc of a matmul operand at `rank` dims (leading unit dims added).
/// A look-through operand keeps its dims but takes the strides of its
/// parameter read transposed: the last two dims swap their strides.
/// `transpose` asks for operand^T (last two dims swapped) instead: dense
/// over a look-through source (already transposed), else transposed
/// strides over the dense operand.
memory::desc operand_desc(const TraceGraph& graph, ValueRef operand, int64_t rank,
                          memory::data_type type, const std::vector<bool>* see_through,
                          bool transpose = false) {
  const Shape& shape = graph.type_of(operand).shape;
  const int64_t pad = rank - shape.rank();
  memory::dims dims(rank, 1);
  for (int64_t d = 0; d < shape.rank(); ++d) dims[pad + d] = shape[d];
  if (transpose) std::swap(dims[rank - 1], dims[rank - 2]);
  // A look-through source is [..., cols, rows], row-major.
  if (transposed_source(graph, operand, see_through).has_value() == transpose)
    return dense_desc(dims, type);
  return memory::desc(dims, type, transposed_strides(dims));
}

/// oneDNN's post-op for a gelu epilogue. relu has none here: oneDNN's
/// relu is max(x, 0), which maps NaN to 0 where the op keeps it (x < 0 ?
/// 0 : x), so ReluAfterKernel applies it in a pass of its own.
dnnl::algorithm eltwise_algorithm(Activation activation) {
  return activation == Activation::gelu_tanh ? dnnl::algorithm::eltwise_gelu_tanh
                                             : dnnl::algorithm::eltwise_gelu_erf;
}

/// Runs a kernel, then relu (x < 0 ? 0 : x, NaN kept) in place on its
/// result, while that is still in cache.
class ReluAfterKernel final : public CpuKernel {
 public:
  ReluAfterKernel(std::unique_ptr<CpuKernel> kernel, DType dtype, int64_t numel)
      : kernel_(std::move(kernel)), dtype_(dtype), numel_(numel) {}

  void run(const void* const* operands, void* const* results) override {
    kernel_->run(operands, results);
    const int64_t n = numel_;
    if (dtype_ == DType::bf16) {
      // On the bits: negative (sign set, above -0) and not NaN becomes +0.
      uint16_t* y = static_cast<uint16_t*>(results[0]);
#pragma omp parallel for if (n > (1 << 16))
      for (int64_t i = 0; i < n; ++i)
        y[i] = (y[i] > 0x8000 && (y[i] & 0x7FFF) <= 0x7F80) ? 0 : y[i];
    } else {
      float* y = static_cast<float*>(results[0]);
#pragma omp parallel for if (n > (1 << 16))
      for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0.f ? 0.f : y[i];
    }
  }
  absl::string_view name() const override { return kernel_->name(); }

 private:
  std::unique_ptr<CpuKernel> kernel_;
  DType dtype_;
  int64_t numel_;
};

absl::StatusOr<std::unique_ptr<CpuKernel>> build_matmul(const TraceGraph& graph,
                                                        const MatmulSpec& spec,
                                                        const std::string& what) {
  const TensorType& lhs = graph.type_of(spec.lhs);
  const TensorType& rhs = graph.type_of(spec.rhs);
  const std::optional<memory::data_type> type = data_type_of(spec.result.dtype);
  if (!type || lhs.dtype != spec.result.dtype || rhs.dtype != spec.result.dtype) return nullptr;
  // Empty products (and k = 0, whose result is all zeros) stay with the
  // ref kernel: oneDNN skips zero-volume primitives without writing dst.
  if (spec.result.numel() == 0 || lhs.numel() == 0 || rhs.numel() == 0) return nullptr;
  const int64_t rank = spec.result.shape.rank();
  if (rank < 2 || rank > DNNL_MAX_NDIMS || lhs.shape.rank() > rank || rhs.shape.rank() > rank)
    return nullptr;
  // `compute`: the operands' dtype, or f32 for widened bf16 operands
  // (build_or_widen; the epilogue then applies to the f32 sum).
  auto build = [&](memory::data_type compute) -> std::unique_ptr<CpuKernel> {
    const bool swap = spec.transposed_product;
    const memory::desc lhs_desc =
        swap ? operand_desc(graph, spec.rhs, rank, *type, spec.see_through, /*transpose=*/true)
             : operand_desc(graph, spec.lhs, rank, *type, spec.see_through);
    const memory::desc rhs_desc =
        swap ? operand_desc(graph, spec.lhs, rank, *type, spec.see_through, /*transpose=*/true)
             : operand_desc(graph, spec.rhs, rank, *type, spec.see_through);
    memory::dims out_dims = dims_of(spec.result.shape);
    if (swap) std::swap(out_dims[rank - 1], out_dims[rank - 2]);
    const memory::desc out_desc = dense_desc(out_dims, *type);
    std::optional<memory::desc> bias_desc;
    if (spec.bias) {
      memory::dims dims(rank, 1);
      dims[rank - 1] = spec.result.shape[rank - 1];
      bias_desc = dense_desc(dims, *type);
    }
    auto computed = [&](const memory::desc& desc) { return in_compute(desc, compute); };
    dnnl::primitive_attr attr = user_scratchpad_attr();
    dnnl::post_ops ops;
    if (spec.activation == Activation::gelu_erf || spec.activation == Activation::gelu_tanh)
      ops.append_eltwise(1.f, eltwise_algorithm(spec.activation), 0.f, 0.f);
    if (spec.residual) ops.append_binary(dnnl::algorithm::binary_add, computed(out_desc));
    if (ops.len() > 0) attr.set_post_ops(ops);
    const dnnl::matmul::desc desc =
        bias_desc ? dnnl::matmul::desc(computed(lhs_desc), computed(rhs_desc),
                                       computed(*bias_desc), computed(out_desc))
                  : dnnl::matmul::desc(computed(lhs_desc), computed(rhs_desc), computed(out_desc));
    const dnnl::matmul::primitive_desc pd(desc, attr, cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(
        spec.bias || spec.residual ? "onednn.matmul_epilogue" : "onednn.matmul");
    // Widening reorders are appended now, before the matmul's step.
    auto operand = [&](int index, const memory::desc& desc) {
      return kernel->operand_in(index, desc, compute);
    };
    const PrimitiveKernel::Result out = kernel->result_in(0, out_desc, compute);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, operand(swap ? 1 : 0, lhs_desc)},
                                            {DNNL_ARG_WEIGHTS, operand(swap ? 0 : 1, rhs_desc)},
                                            {DNNL_ARG_DST, out.produced}};
    int next_operand = 2;
    if (bias_desc) args[DNNL_ARG_BIAS] = operand(next_operand++, *bias_desc);
    if (spec.residual)
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.len() - 1) | DNNL_ARG_SRC_1] =
          operand(next_operand++, out_desc);
    kernel->add_step(pd, dnnl::matmul(pd), std::move(args));
    kernel->finish_result(out);  // widened: the one rounding to bf16
    if (spec.activation != Activation::relu) return kernel;
    return std::make_unique<ReluAfterKernel>(std::move(kernel), spec.result.dtype,
                                             spec.result.numel());
  };
  return build_or_widen(what, *type, build, /*widen_emulated=*/true);
}

/// `node` is `param` of `body`, or `expand(param)`: the body input index.
std::optional<int64_t> body_input(const TraceGraph& body, ValueRef value, bool allow_expand) {
  const GraphNode* node = &body.nodes[value.node];
  if (allow_expand && node->op == OpKind::expand) node = &body.nodes[node->operands[0].node];
  if (node->op != OpKind::parameter) return std::nullopt;
  return attr_int(node->attrs, AttrName::index);
}

/// Whether `type` holds one value per last-dim column of a `[..., p]`
/// result: shape [p], [1, p], [1, 1, p], ...
bool is_row_bias(const TensorType& type, int64_t p) {
  const Shape& s = type.shape;
  if (s.rank() == 0 || s[s.rank() - 1] != p) return false;
  return type.numel() == p;
}

}  // namespace

namespace {
/// The matmul `request` names. Its operands are the permutes' values, not
/// their sources: operand_desc() reads the permuted type and picks
/// transposed strides for a look-through.
absl::StatusOr<std::unique_ptr<CpuKernel>> build_node_matmul(const KernelRequest& request,
                                                             bool transposed_product) {
  const GraphNode& node = request.node();
  MatmulSpec spec;
  spec.lhs = node.operands[0];
  spec.rhs = node.operands[1];
  spec.result = node.results[0];
  spec.see_through = request.see_through_permutes;
  spec.transposed_product = transposed_product;
  return build_matmul(request.graph, spec, describe_node(request));
}
}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_transposed_matmul_kernel(
    const KernelRequest& request) {
  return build_node_matmul(request, /*transposed_product=*/true);
}

absl::StatusOr<std::unique_ptr<CpuKernel>> make_matmul_kernel(const KernelRequest& request) {
  return build_node_matmul(request, /*transposed_product=*/false);
}

}  // namespace onednn

std::optional<MatmulEpilogue> find_matmul_epilogue(const TraceGraph& graph,
                                                   uint32_t fusion_index) {
  const GraphNode& fusion = graph.nodes[fusion_index];
  if (fusion.op != OpKind::fusion || !fusion.body || fusion.operands.size() < 2 ||
      fusion.operands.size() > 3 || fusion.results.size() != 1)
    return std::nullopt;
  const TraceGraph& body = *fusion.body;
  if (body.outputs.size() != 1) return std::nullopt;
  size_t nodes = fusion.operands.size();  // the body's parameters
  std::optional<int64_t> bias_input, residual_input;

  // 1. A residual add at the top: add(expression, parameter).
  ValueRef v = body.outputs[0];
  if (fusion.operands.size() == 3 && body.nodes[v.node].op == OpKind::add) {
    const GraphNode& add = body.nodes[v.node];
    for (int side = 0; side < 2 && !residual_input; ++side)
      if (auto r = onednn::body_input(body, add.operands[side], false);
          r && body.nodes[add.operands[1 - side].node].op != OpKind::parameter) {
        residual_input = r;
        v = add.operands[1 - side];
        ++nodes;
      }
  }
  // 2. The activation.
  std::optional<OpKind> activation;
  int32_t activation_node = -1;
  if (body.nodes[v.node].op == OpKind::relu || body.nodes[v.node].op == OpKind::gelu) {
    activation = body.nodes[v.node].op;
    activation_node = static_cast<int32_t>(v.node);
    v = body.nodes[v.node].operands[0];
    ++nodes;
  }
  if (activation == OpKind::relu && residual_input) return std::nullopt;  // relu runs last
  // 3. The matmul's own value, plus a bias (perhaps expanded) or, when
  //    nothing else was found, a residual.
  std::optional<int64_t> mm_input = onednn::body_input(body, v, false);
  if (!mm_input) {
    const GraphNode& add = body.nodes[v.node];
    if (add.op != OpKind::add) return std::nullopt;
    ++nodes;
    for (int side = 0; side < 2 && !mm_input; ++side) {
      const std::optional<int64_t> m = onednn::body_input(body, add.operands[side], false);
      const std::optional<int64_t> other = onednn::body_input(body, add.operands[1 - side], true);
      if (!m || !other || *m == *other ||
          graph.nodes[fusion.operands[*m].node].op != OpKind::matmul)
        continue;
      mm_input = m;
      const bool expanded = body.nodes[add.operands[1 - side].node].op == OpKind::expand;
      nodes += expanded;
      const TensorType& product = graph.nodes[fusion.operands[*m].node].results[0];
      if (!expanded && !residual_input && !activation &&
          graph.type_of(fusion.operands[*other]) == product)
        residual_input = other;  // matmul + residual, no bias
      else
        bias_input = other;
    }
  }
  if (!mm_input || body.nodes.size() != nodes || (!bias_input && !residual_input))
    return std::nullopt;
  const ValueRef mm_value = fusion.operands[*mm_input];
  if (graph.nodes[mm_value.node].op != OpKind::matmul) return std::nullopt;
  const uint32_t matmul = mm_value.node;

  // 4. Types: the fusion's result is the matmul's, the bias a row vector,
  //    the residual of the result's type.
  const TensorType& product = graph.nodes[matmul].results[0];
  const int64_t p = product.shape[product.shape.rank() - 1];
  if (fusion.results[0] != product) return std::nullopt;
  std::optional<ValueRef> bias, residual;
  if (bias_input) {
    bias = fusion.operands[*bias_input];
    if (graph.type_of(*bias).dtype != product.dtype ||
        !onednn::is_row_bias(graph.type_of(*bias), p))
      return std::nullopt;
  }
  if (residual_input) {
    residual = fusion.operands[*residual_input];
    if (graph.type_of(*residual) != product) return std::nullopt;
  }

  // 5. The fusion must be the matmul's only reader, so the executor can
  //    drop the matmul node.
  int uses = 0;
  for (const GraphNode& n : graph.nodes)
    for (ValueRef u : n.operands) uses += u.node == matmul;
  for (ValueRef u : graph.outputs)
    if (u.node == matmul) return std::nullopt;
  if (uses != 1) return std::nullopt;
  return MatmulEpilogue{matmul, fusion_index, bias, residual, activation_node};
}

absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_matmul_epilogue_kernel(
    const TraceGraph& graph, const MatmulEpilogue& epilogue, const std::vector<bool>* see_through) {
  const GraphNode& matmul = graph.nodes[epilogue.matmul];
  const GraphNode& fusion = graph.nodes[epilogue.fusion];
  onednn::MatmulSpec spec;
  spec.lhs = matmul.operands[0];
  spec.rhs = matmul.operands[1];
  spec.bias = epilogue.bias;
  spec.residual = epilogue.residual;
  spec.result = fusion.results[0];
  spec.see_through = see_through;
  if (epilogue.activation >= 0) {
    const GraphNode& act = fusion.body->nodes[epilogue.activation];
    if (act.op == OpKind::relu) spec.activation = onednn::Activation::relu;
    if (act.op == OpKind::gelu)
      spec.activation = attr_int(act.attrs, AttrName::approximate) != 0
                            ? onednn::Activation::gelu_tanh
                            : onednn::Activation::gelu_erf;
  }
  return onednn::build_matmul(
      graph, spec,
      absl::StrCat("matmul epilogue ", graph.type_of(spec.lhs).to_string(), ", ",
                   graph.type_of(spec.rhs).to_string(),
                   spec.bias ? absl::StrCat(", bias ", graph.type_of(*spec.bias).to_string()) : "",
                   spec.residual ? ", residual" : ""));
}

absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_transposed_matmul_kernel(
    const KernelRequest& request) {
  return onednn::make_transposed_matmul_kernel(request);
}

}  // namespace mstep::cpu
