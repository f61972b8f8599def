// oneDNN kernel for layer_norm (forward).
//
// The input is viewed as a dense [rows, cols] tensor, cols the product of
// the normalized dims, which oneDNN normalizes along the last dim. oneDNN
// takes layer_norm's scale and shift in f32 only, so a bf16 weight or
// bias is converted by a reorder step in the kernel.
//
// softmax and log_softmax are declined: oneDNN's versions (an approximate
// log, f32 sums) miss the ref kernel by ~1e-6, which autograd amplifies;
// the host kernel (SoftmaxKernel.cpp) computes them as the ref does.
#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"

namespace mstep::cpu::onednn {

namespace {

using dnnl::memory;

/// `compute`: `type`, or f32 for widened bf16 data (build_or_widen).
std::unique_ptr<CpuKernel> build_layer_norm(const KernelRequest& request, memory::data_type type,
                                            memory::data_type compute) {
  const GraphNode& node = request.node();
  const Shape& shape = node.results[0].shape;
  const int64_t normalized = attr_int(node.attrs, AttrName::normalized_ndim);
  const bool has_weight = attr_int(node.attrs, AttrName::has_weight) != 0;
  const bool has_bias = attr_int(node.attrs, AttrName::has_bias) != 0;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < shape.rank(); ++d) (d < shape.rank() - normalized ? rows : cols) *= shape[d];
  const memory::desc data = dense_desc(memory::dims{rows, cols}, type);
  auto flags = dnnl::normalization_flags::none;
  if (has_weight) flags |= dnnl::normalization_flags::use_scale;
  if (has_bias) flags |= dnnl::normalization_flags::use_shift;
  const dnnl::layer_normalization_forward::desc desc(
      dnnl::prop_kind::forward_inference, in_compute(data, compute),
      static_cast<float>(attr_double(node.attrs, AttrName::eps)), flags);
  const dnnl::layer_normalization_forward::primitive_desc pd(desc, user_scratchpad_attr(),
                                                             cpu_engine());
  auto kernel = std::make_unique<PrimitiveKernel>("onednn.layer_norm");
  // Scale and shift: the operand itself when f32, else a converted copy.
  const memory::desc affine = dense_desc(memory::dims{cols}, type);
  const memory::desc affine_f32 = dense_desc(memory::dims{cols}, memory::data_type::f32);
  const PrimitiveKernel::Result out = kernel->result_in(0, data, compute);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, kernel->operand_in(0, data, compute)},
                                          {DNNL_ARG_DST, out.produced}};
  int operand = 1;
  if (has_weight)
    args[DNNL_ARG_SCALE] = kernel->reordered_to(kernel->bind_operand(operand++, affine), affine_f32);
  if (has_bias)
    args[DNNL_ARG_SHIFT] = kernel->reordered_to(kernel->bind_operand(operand++, affine), affine_f32);
  kernel->add_step(pd, dnnl::layer_normalization_forward(pd), std::move(args));
  kernel->finish_result(out);  // widened: the one rounding to bf16
  return kernel;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuKernel>> make_normalization_kernel(
    const KernelRequest& request) {
  const GraphNode& node = request.node();
  if (node.op != OpKind::layer_norm) return nullptr;
  const TensorType& result = node.results[0];
  const std::optional<memory::data_type> type = data_type_of(result.dtype);
  if (!type || result.numel() == 0 || result.shape.rank() == 0) return nullptr;
  for (ValueRef v : node.operands)
    if (request.graph.type_of(v).dtype != result.dtype) return nullptr;
  return build_or_widen(describe_node(request), *type, [&](memory::data_type compute) {
    return build_layer_norm(request, *type, compute);
  });
}

}  // namespace mstep::cpu::onednn
