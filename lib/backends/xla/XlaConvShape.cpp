// conv_shape, conv_gemm_plan and conv_scratch_bytes (XlaConvShape.h).
#include "lib/backends/xla/XlaConvShape.h"

#include <algorithm>

namespace mstep::xla {

namespace {

/// The scratch one chunk of samples may take: a chunk is the unit the
/// threads share (one sample each at a time), so it holds several samples
/// when they are small.
constexpr int64_t kChunkScratch = 8 << 20;
/// One sample's im2col matrix above this keeps the direct loops rather
/// than grow the arena by that much.
constexpr int64_t kMaxSampleScratch = 256 << 20;

int64_t round_to_64_bytes(int64_t floats) { return (floats + 15) / 16 * 16; }

} // namespace

std::optional<ConvShape> conv_shape(const TraceGraph& graph, const GraphNode& n) {
  const TensorType* input = nullptr;
  const TensorType* weight = nullptr;
  const TensorType* output = nullptr;
  if (n.op != OpKind::conv2d && n.op != OpKind::conv2d_input_grad &&
      n.op != OpKind::conv2d_weight_grad)
    return std::nullopt;
  const bool bias = n.op == OpKind::conv2d && attr_int(n.attrs, AttrName::has_bias) != 0;
  if (n.operands.size() != (bias ? 3u : 2u) || n.results.size() != 1) return std::nullopt;
  switch (n.op) {
  case OpKind::conv2d:
    input = &graph.type_of(n.operands[0]);
    weight = &graph.type_of(n.operands[1]);
    output = &n.results[0];
    break;
  case OpKind::conv2d_input_grad:
    output = &graph.type_of(n.operands[0]);
    weight = &graph.type_of(n.operands[1]);
    input = &n.results[0];
    break;
  default: // conv2d_weight_grad
    input = &graph.type_of(n.operands[0]);
    output = &graph.type_of(n.operands[1]);
    weight = &n.results[0];
    break;
  }
  const DType dtype = n.results[0].dtype;
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) return std::nullopt;
  for (const TensorType* t : {input, weight, output})
    if (t->dtype != dtype || t->shape.rank() != 4 || t->numel() == 0) return std::nullopt;
  for (ValueRef v : n.operands)
    if (graph.type_of(v).dtype != dtype) return std::nullopt;
  ConvShape c;
  c.dtype = dtype;
  c.batch = input->shape[0];
  c.channels = input->shape[1];
  c.height = input->shape[2];
  c.width = input->shape[3];
  c.out_channels = weight->shape[0];
  c.group_channels = weight->shape[1];
  c.kh = weight->shape[2];
  c.kw = weight->shape[3];
  c.out_h = output->shape[2];
  c.out_w = output->shape[3];
  c.groups = attr_int(n.attrs, AttrName::groups);
  c.stride = attr_ints(n.attrs, AttrName::stride);
  c.pad = attr_ints(n.attrs, AttrName::padding);
  c.dilation = attr_ints(n.attrs, AttrName::dilation);
  if (c.stride.size() != 2 || c.pad.size() != 2 || c.dilation.size() != 2 || c.groups <= 0 ||
      c.out_channels % c.groups != 0 || c.group_channels * c.groups != c.channels ||
      output->shape[1] != c.out_channels || output->shape[0] != c.batch)
    return std::nullopt;
  return c;
}

std::optional<ConvGemmPlan> conv_gemm_plan(const TraceGraph& graph, const GraphNode& node) {
  std::optional<ConvShape> shape = conv_shape(graph, node);
  // f16 convs take the direct loops (the ref's f32 sums, XlaConvLoops.cpp).
  if (!shape || shape->dtype == DType::f16) return std::nullopt;
  const ConvShape& c = *shape;
  ConvGemmPlan plan{c};
  const int64_t col_elements = c.channels * c.kh * c.kw * c.out_plane();
  // bf16 im2col (the forward's and the weight gradient's) holds 2-byte
  // elements; the input gradient's col is its gemm's f32 result.
  const bool bf16_col = c.dtype == DType::bf16 && node.op != OpKind::conv2d_input_grad;
  plan.col_floats = round_to_64_bytes(bf16_col ? (col_elements + 1) / 2 : col_elements);
  const int64_t weight_floats = round_to_64_bytes(c.out_channels * c.group_taps());
  if (node.op == OpKind::conv2d_weight_grad) plan.partial_floats = weight_floats;
  if (c.dtype == DType::bf16) {
    if (node.op == OpKind::conv2d_weight_grad) plan.shared_floats = weight_floats;
    if (node.op == OpKind::conv2d)
      plan.out_stage_floats = round_to_64_bytes(c.out_channels * c.out_plane());
    if (node.op == OpKind::conv2d_input_grad)
      plan.in_stage_floats = round_to_64_bytes(c.channels * c.in_plane());
  }
  plan.sample_floats =
      plan.col_floats + plan.partial_floats + plan.out_stage_floats + plan.in_stage_floats;
  const int64_t sample_bytes = plan.sample_floats * 4;
  if (sample_bytes > kMaxSampleScratch) return std::nullopt;
  // As many samples as fit kChunkScratch, spread evenly over the chunks.
  const int64_t most = std::clamp<int64_t>(kChunkScratch / sample_bytes, 1, c.batch);
  const int64_t chunks = (c.batch + most - 1) / most;
  plan.chunk = (c.batch + chunks - 1) / chunks;
  return plan;
}

int64_t conv_scratch_bytes(const TraceGraph& graph) {
  int64_t most = 0;
  for (const GraphNode& n : graph.nodes)
    if (std::optional<ConvGemmPlan> plan = conv_gemm_plan(graph, n))
      most = std::max(most, plan->scratch_bytes());
  return most;
}

} // namespace mstep::xla
