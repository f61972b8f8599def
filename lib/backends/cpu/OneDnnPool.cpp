// oneDNN kernels for max_pool2d, avg_pool2d and their gradients (NCHW,
// plain layouts: pooling is memory-bound, so reordering to blocked
// layouts would cost more than it saves).
//
// Where oneDNN's semantics differ from the op's:
// - ceil mode: oneDNN has no ceil mode; a larger right padding makes its
//   output size match. For avg_pool2d with count_include_pad the divisor
//   would then count that extra padding, so those cases are declined.
// - max pooling skips NaN and starts from -FLT_MAX, so max kernels run
//   behind a SpecialValueGuard.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"
#include "lib/backends/cpu/OneDnnSpecialValueGuard.h"

namespace mstep::cpu::onednn {

namespace {

using dnnl::memory;

/// oneDNN's view of a pooling node's window geometry.
struct PoolGeometry {
  memory::dims kernel, strides, dilation, pad_l, pad_r;
  /// Some window reaches past the padded input (only in ceil mode).
  bool past_padding = false;

  /// `input` and `output` are the [N, C, H, W] shapes of the forward op.
  PoolGeometry(const AttrList& attrs, const Shape& input, const Shape& output) {
    const IntList& k = attr_ints(attrs, AttrName::kernel);
    const IntList& s = attr_ints(attrs, AttrName::stride);
    const IntList& p = attr_ints(attrs, AttrName::padding);
    IntList d = {1, 1};
    for (const Attr& a : attrs)
      if (a.name == AttrName::dilation) d = std::get<IntList>(a.value);
    for (int i = 0; i < 2; ++i) {
      const int64_t span = d[i] * (k[i] - 1) + 1;
      kernel.push_back(k[i]);
      strides.push_back(s[i]);
      dilation.push_back(d[i] - 1);
      pad_l.push_back(p[i]);
      // The right padding that makes oneDNN's floor division give the
      // op's output size: the op's own padding, or more in ceil mode.
      const int64_t last_end = (output[2 + i] - 1) * s[i] + span;  // in padded coordinates
      pad_r.push_back(std::max<int64_t>(p[i], last_end - input[2 + i] - p[i]));
      past_padding = past_padding || last_end > input[2 + i] + 2 * p[i];
    }
  }
};

dnnl::pooling_v2_forward::primitive_desc forward_pd(dnnl::prop_kind prop, dnnl::algorithm alg,
                                                    const memory::desc& src,
                                                    const memory::desc& dst,
                                                    const PoolGeometry& g) {
  const dnnl::pooling_v2_forward::desc desc(prop, alg, src, dst, g.strides, g.kernel,
                                            g.dilation, g.pad_l, g.pad_r);
  return dnnl::pooling_v2_forward::primitive_desc(desc, user_scratchpad_attr(), cpu_engine());
}

/// The forward op: input -> result. `compute`: the tensors' dtype, or f32
/// for widened bf16 ones (build_or_widen).
std::unique_ptr<PrimitiveKernel> build_forward(absl::string_view name, dnnl::algorithm alg,
                                               const memory::desc& src, const memory::desc& dst,
                                               const PoolGeometry& g, memory::data_type compute) {
  const auto pd = forward_pd(dnnl::prop_kind::forward_inference, alg, in_compute(src, compute),
                             in_compute(dst, compute), g);
  auto kernel = std::make_unique<PrimitiveKernel>(std::string(name));
  const memory in = kernel->operand_in(0, src, compute);
  const PrimitiveKernel::Result out = kernel->result_in(0, dst, compute);
  kernel->add_step(pd, dnnl::pooling_v2_forward(pd),
                   {{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, out.produced}});
  kernel->finish_result(out);
  return kernel;
}

/// The gradient: (grad_out[, input]) -> grad_in. Max pooling first reruns
/// the forward on the input, for the workspace that records each window's
/// pick.
std::unique_ptr<PrimitiveKernel> build_backward(absl::string_view name, dnnl::algorithm alg,
                                                const memory::desc& src, const memory::desc& dst,
                                                const PoolGeometry& g, memory::data_type compute) {
  const memory::desc src_c = in_compute(src, compute), dst_c = in_compute(dst, compute);
  const auto hint = forward_pd(dnnl::prop_kind::forward_training, alg, src_c, dst_c, g);
  const dnnl::pooling_v2_backward::desc desc(alg, src_c, dst_c, g.strides, g.kernel, g.dilation,
                                             g.pad_l, g.pad_r);
  const dnnl::pooling_v2_backward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine(),
                                                     hint);
  auto kernel = std::make_unique<PrimitiveKernel>(std::string(name));
  const PrimitiveKernel::Result out = kernel->result_in(0, src, compute);
  std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, kernel->operand_in(0, dst, compute)},
                                          {DNNL_ARG_DIFF_SRC, out.produced}};
  if (alg == dnnl::algorithm::pooling_max) {
    const memory workspace = kernel->owned(hint.workspace_desc());
    kernel->add_step(hint, dnnl::pooling_v2_forward(hint),
                     {{DNNL_ARG_SRC, kernel->operand_in(1, src, compute)},
                      {DNNL_ARG_DST, kernel->owned(dst_c)},
                      {DNNL_ARG_WORKSPACE, workspace}});
    args[DNNL_ARG_WORKSPACE] = workspace;
  }
  kernel->add_step(pd, dnnl::pooling_v2_backward(pd), std::move(args));
  kernel->finish_result(out);
  return kernel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_pool_kernel(const KernelRequest& request) {
  const GraphNode& node = request.node();
  const bool grad = node.op == OpKind::max_pool2d_grad || node.op == OpKind::avg_pool2d_grad;
  const bool max = node.op == OpKind::max_pool2d || node.op == OpKind::max_pool2d_grad;
  const DType dtype = node.results[0].dtype;
  const std::optional<memory::data_type> type = data_type_of(dtype);
  if (!type) return nullptr;
  for (ValueRef v : node.operands)
    if (request.graph.type_of(v).dtype != dtype) return nullptr;
  // The forward's input and output shapes: a gradient's result is the
  // input and its operand 0 the output's gradient.
  const Shape& input = grad ? node.results[0].shape : request.graph.type_of(node.operands[0]).shape;
  const Shape& output = grad ? request.graph.type_of(node.operands[0]).shape : node.results[0].shape;
  if (input.numel() == 0 || output.numel() == 0) return nullptr;  // zero-volume: ref
  const PoolGeometry geometry(node.attrs, input, output);
  dnnl::algorithm alg = dnnl::algorithm::pooling_max;
  if (!max) {
    const bool include_pad = attr_int(node.attrs, AttrName::count_include_pad) != 0;
    if (include_pad && geometry.past_padding) return nullptr;  // see the file comment
    alg = include_pad ? dnnl::algorithm::pooling_avg_include_padding
                      : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  const memory::desc src = dense_desc(input, *type);
  const memory::desc dst = dense_desc(output, *type);
  const std::string name = absl::StrCat("onednn.", op_name(node.op));
  absl::StatusOr<std::unique_ptr<CpuKernel>> kernel =
      build_or_widen(describe_node(request), *type,
                     [&](memory::data_type compute) -> std::unique_ptr<CpuKernel> {
                       if (grad) return build_backward(name, alg, src, dst, geometry, compute);
                       return build_forward(name, alg, src, dst, geometry, compute);
                     });
  return max ? guard_special_values(request, std::move(kernel)) : std::move(kernel);
}

}  // namespace mstep::cpu::onednn
