// oneDNN kernels for conv2d and its input and weight gradients (NCHW).
//
// The primitives pick their own (blocked) layouts: oneDNN's fast
// convolutions want channel-blocked data, and reordering the plain NCHW
// buffers in and out costs less than the gemm-based path oneDNN takes for
// plain layouts, except with few input channels (blocked_layouts_pay_off).
// The reorder buffers are owned by the kernel.
//
// Both paths pad their reductions in ways that spread an inf or NaN to
// neighbouring outputs, so the kernels run behind a SpecialValueGuard.
//
// Geometry: oneDNN's dilation counts the gaps (torch's minus one), and its
// right padding equals the left one as in PyTorch, so the output size
// (in + 2p - span) / s + 1 is the one the op computed.
#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"
#include "lib/backends/cpu/OneDnnSpecialValueGuard.h"

namespace mstep::cpu::onednn {

namespace {

using dnnl::memory;

struct ConvGeometry {
  memory::dims strides, dilates, padding;
  int64_t groups;
  /// Let the primitives pick blocked layouts (see the file comment).
  bool blocked;
  /// The primitives' dtype: the tensors', or f32 for widened bf16 ones
  /// (build_or_widen).
  memory::data_type compute;

  ConvGeometry(const AttrList& attrs, bool blocked_layouts, memory::data_type compute_type)
      : blocked(blocked_layouts), compute(compute_type) {
    const IntList& stride = attr_ints(attrs, AttrName::stride);
    const IntList& pad = attr_ints(attrs, AttrName::padding);
    const IntList& dilation = attr_ints(attrs, AttrName::dilation);
    strides = {stride[0], stride[1]};
    padding = {pad[0], pad[1]};
    dilates = {dilation[0] - 1, dilation[1] - 1};
    groups = attr_int(attrs, AttrName::groups);
  }

  /// The desc a primitive is described with, in `compute`: layout left
  /// open when blocked, else the plain one.
  memory::desc layout(const memory::desc& plain) const {
    if (!blocked) return in_compute(plain, compute);
    return memory::desc(plain.dims(), compute, memory::format_tag::any);
  }
};

/// Whether conv2d and its input gradient run faster on blocked layouts
/// (plus reorders) than on plain NCHW, for a forward input of `input`
/// shape. Measured (one core, 3x3 kernels): blocked wins by 1.2-1.5x from
/// C = 32 up, but loses 2.5x (forward) and 7x (input gradient) on a
/// first layer with C = 1, where oneDNN's plain gemm path is best. The
/// weight gradient is 3x faster blocked even at C = 1.
bool blocked_layouts_pay_off(const Shape& input) { return input[1] >= 8; }

/// The plain desc of a [O, C / groups, kH, kW] weight; grouped weights are
/// [G, O / G, C / G, kH, kW] to oneDNN, the same bytes.
memory::desc weights_desc(const Shape& w, int64_t groups, memory::data_type type) {
  if (groups == 1) return dense_desc(w, type);
  return dense_desc(memory::dims{groups, w[0] / groups, w[1], w[2], w[3]}, type);
}

/// The forward primitive for these descs, as trained (the gradients'
/// primitives need it as a hint).
dnnl::convolution_forward::primitive_desc forward_pd(dnnl::prop_kind prop, const memory::desc& src,
                                                     const memory::desc& weights,
                                                     const memory::desc* bias,
                                                     const memory::desc& dst,
                                                     const ConvGeometry& g) {
  const auto alg = dnnl::algorithm::convolution_direct;
  const dnnl::convolution_forward::desc desc =
      bias ? dnnl::convolution_forward::desc(prop, alg, g.layout(src), g.layout(weights),
                                             in_compute(*bias, g.compute),
                                             g.layout(dst), g.strides, g.dilates, g.padding,
                                             g.padding)
           : dnnl::convolution_forward::desc(prop, alg, g.layout(src), g.layout(weights),
                                             g.layout(dst), g.strides, g.dilates, g.padding,
                                             g.padding);
  return dnnl::convolution_forward::primitive_desc(desc, user_scratchpad_attr(), cpu_engine());
}

/// input [N, C, H, W], weight, optional bias -> [N, O, OH, OW].
std::unique_ptr<CpuKernel> build_conv2d(const KernelRequest& request, memory::data_type type,
                                        memory::data_type compute) {
  const GraphNode& node = request.node();
  const ConvGeometry g(
      node.attrs, blocked_layouts_pay_off(request.graph.type_of(node.operands[0]).shape), compute);
  const bool has_bias = attr_int(node.attrs, AttrName::has_bias) != 0;
  const memory::desc src = dense_desc(request.graph.type_of(node.operands[0]).shape, type);
  const memory::desc weights =
      weights_desc(request.graph.type_of(node.operands[1]).shape, g.groups, type);
  const memory::desc dst = dense_desc(node.results[0].shape, type);
  std::optional<memory::desc> bias;
  if (has_bias) bias = dense_desc(request.graph.type_of(node.operands[2]).shape, type);
  const auto pd = forward_pd(dnnl::prop_kind::forward_inference, src, weights,
                             bias ? &*bias : nullptr, dst, g);

  auto kernel = std::make_unique<PrimitiveKernel>("onednn.conv2d");
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, kernel->reordered_to(kernel->bind_operand(0, src), pd.src_desc())},
      {DNNL_ARG_WEIGHTS,
       kernel->reordered_to(kernel->bind_operand(1, weights), pd.weights_desc())}};
  if (bias)
    args[DNNL_ARG_BIAS] = kernel->reordered_to(kernel->bind_operand(2, *bias), pd.bias_desc());
  const PrimitiveKernel::Result out = kernel->bind_result_as(0, dst, pd.dst_desc());
  args[DNNL_ARG_DST] = out.produced;
  kernel->add_step(pd, dnnl::convolution_forward(pd), std::move(args));
  kernel->finish_result(out);
  return kernel;
}

/// grad_out [N, O, OH, OW], weight -> grad_in [N, C, H, W].
std::unique_ptr<CpuKernel> build_input_grad(const KernelRequest& request, memory::data_type type,
                                            memory::data_type compute) {
  const GraphNode& node = request.node();
  const ConvGeometry g(node.attrs, blocked_layouts_pay_off(node.results[0].shape), compute);
  const memory::desc diff_dst = dense_desc(request.graph.type_of(node.operands[0]).shape, type);
  const memory::desc weights =
      weights_desc(request.graph.type_of(node.operands[1]).shape, g.groups, type);
  const memory::desc diff_src = dense_desc(node.results[0].shape, type);
  const auto hint =
      forward_pd(dnnl::prop_kind::forward_training, diff_src, weights, nullptr, diff_dst, g);
  const dnnl::convolution_backward_data::desc desc(
      dnnl::algorithm::convolution_direct, g.layout(diff_src), g.layout(weights),
      g.layout(diff_dst), g.strides, g.dilates, g.padding, g.padding);
  const dnnl::convolution_backward_data::primitive_desc pd(desc, user_scratchpad_attr(),
                                                           cpu_engine(), hint);

  auto kernel = std::make_unique<PrimitiveKernel>("onednn.conv2d_input_grad");
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_DIFF_DST,
       kernel->reordered_to(kernel->bind_operand(0, diff_dst), pd.diff_dst_desc())},
      {DNNL_ARG_WEIGHTS,
       kernel->reordered_to(kernel->bind_operand(1, weights), pd.weights_desc())}};
  const PrimitiveKernel::Result out = kernel->bind_result_as(0, diff_src, pd.diff_src_desc());
  args[DNNL_ARG_DIFF_SRC] = out.produced;
  kernel->add_step(pd, dnnl::convolution_backward_data(pd), std::move(args));
  kernel->finish_result(out);
  return kernel;
}

/// input [N, C, H, W], grad_out [N, O, OH, OW] -> grad_weight.
std::unique_ptr<CpuKernel> build_weight_grad(const KernelRequest& request, memory::data_type type,
                                             memory::data_type compute) {
  const GraphNode& node = request.node();
  const ConvGeometry g(node.attrs, /*blocked=*/true, compute);
  const memory::desc src = dense_desc(request.graph.type_of(node.operands[0]).shape, type);
  const memory::desc diff_dst = dense_desc(request.graph.type_of(node.operands[1]).shape, type);
  const memory::desc diff_weights = weights_desc(node.results[0].shape, g.groups, type);
  const auto hint =
      forward_pd(dnnl::prop_kind::forward_training, src, diff_weights, nullptr, diff_dst, g);
  const dnnl::convolution_backward_weights::desc desc(
      dnnl::algorithm::convolution_direct, g.layout(src), g.layout(diff_weights),
      g.layout(diff_dst), g.strides, g.dilates, g.padding, g.padding);
  const dnnl::convolution_backward_weights::primitive_desc pd(desc, user_scratchpad_attr(),
                                                              cpu_engine(), hint);

  auto kernel = std::make_unique<PrimitiveKernel>("onednn.conv2d_weight_grad");
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, kernel->reordered_to(kernel->bind_operand(0, src), pd.src_desc())},
      {DNNL_ARG_DIFF_DST,
       kernel->reordered_to(kernel->bind_operand(1, diff_dst), pd.diff_dst_desc())}};
  const PrimitiveKernel::Result out =
      kernel->bind_result_as(0, diff_weights, pd.diff_weights_desc());
  args[DNNL_ARG_DIFF_WEIGHTS] = out.produced;
  kernel->add_step(pd, dnnl::convolution_backward_weights(pd), std::move(args));
  kernel->finish_result(out);
  return kernel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_conv_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  const std::optional<memory::data_type> type = data_type_of(node.results[0].dtype);
  if (!type) return nullptr;
  for (ValueRef v : node.operands)
    if (request.graph.type_of(v).dtype != node.results[0].dtype) return nullptr;
  // Empty tensors stay with the ref kernel: oneDNN skips zero-volume
  // primitives, which would leave a gradient unwritten instead of zero.
  if (node.results[0].numel() == 0) return nullptr;
  for (ValueRef v : node.operands)
    if (request.graph.type_of(v).numel() == 0) return nullptr;
  return guard_special_values(
      request, build_or_widen(describe_node(request), *type,
                              [&](memory::data_type compute) -> std::unique_ptr<CpuKernel> {
                                switch (node.op) {
                                  case OpKind::conv2d:
                                    return build_conv2d(request, *type, compute);
                                  case OpKind::conv2d_input_grad:
                                    return build_input_grad(request, *type, compute);
                                  case OpKind::conv2d_weight_grad:
                                    return build_weight_grad(request, *type, compute);
                                  default: return nullptr;
                                }
                              }));
}

}  // namespace mstep::cpu::onednn
