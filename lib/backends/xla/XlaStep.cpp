// lay_out_step and native_gemm_shape (XlaStep.h).
#include "lib/backends/xla/XlaStep.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/xla/XlaConvShape.h"
#include "lib/backends/xla/XlaLoopScratch.h"

namespace mstep::xla {

absl::StatusOr<XlaLayout> lay_out_step(const TraceGraph& graph, const cpu::ArenaPlan& plan) {
  const size_t num_args = graph.input_types.size();
  if (plan.ops.size() + num_args != graph.nodes.size())
    return absl::InternalError(absl::StrCat("xla backend: the memory plan covers ", plan.ops.size(),
                                            " ops but the step has ",
                                            graph.nodes.size() - num_args));
  XlaLayout layout;
  layout.arena_bytes = plan.arena_bytes;
  const int64_t scratch = loop_scratch_bytes(graph);
  layout.scratch_offset = conv_scratch_offset(plan.arena_bytes);
  layout.arena_bytes = arena_with_conv_scratch(plan.arena_bytes, scratch);
  layout.value_base.resize(graph.nodes.size());
  uint32_t count = 0;
  for (uint32_t i = 0; i < graph.nodes.size(); ++i) {
    layout.value_base[i] = count;
    count += static_cast<uint32_t>(graph.nodes[i].results.size());
  }
  layout.values.resize(count);
  std::vector<int64_t> aliased_arg(count, -1);
  // 1. Inputs: the exporter puts the parameter nodes first, in order.
  for (uint32_t i = 0; i < num_args; ++i) {
    const GraphNode& n = graph.nodes[i];
    if (n.op != OpKind::parameter || attr_int(n.attrs, AttrName::index) != i)
      return absl::InternalError("xla backend: the step's arguments are not its first nodes");
    layout.values[layout.value_base[i]] = {ValueLocation::Kind::input, i};
  }
  // 2. Op results: their arena offsets.
  for (size_t k = 0; k < plan.ops.size(); ++k) {
    const uint32_t node = static_cast<uint32_t>(num_args + k);
    const cpu::ArenaPlan::OpPlacement& p = plan.ops[k];
    if (p.offsets.size() != graph.nodes[node].results.size())
      return absl::InternalError(absl::StrCat("xla backend: plan/graph mismatch at op '",
                                              op_name(graph.nodes[node].op), "'"));
    for (size_t r = 0; r < p.offsets.size(); ++r) {
      layout.values[layout.value_base[node] + r] = {ValueLocation::Kind::arena, p.offsets[r]};
      aliased_arg[layout.value_base[node] + r] = p.aliased_arg[r];
    }
  }
  // 3. Outputs get a buffer of their own each run (a caller keeps last
  //    step's results), or the donated input the plan writes them into.
  for (ValueRef v : graph.outputs) {
    XlaLayout::Output out;
    ValueLocation& location = layout.values[layout.value_of(v)];
    if (location.kind == ValueLocation::Kind::input) {
      out.input = static_cast<int32_t>(location.at);
    } else {
      if (location.kind == ValueLocation::Kind::arena) {
        location = {ValueLocation::Kind::output, static_cast<int64_t>(layout.output_values.size())};
        layout.output_values.push_back(layout.value_of(v));
      }
      out.output = static_cast<int32_t>(location.at);
      out.donated_arg = static_cast<int32_t>(aliased_arg[layout.value_of(v)]);
    }
    layout.outputs.push_back(out);
  }
  for (const ValueLocation& location : layout.values)
    if (location.kind == ValueLocation::Kind::arena && location.at < 0)
      return absl::InternalError(
          "xla backend: a value written into a donated argument is not a step output");
  return layout;
}

std::optional<GemmShape> native_gemm_shape(const TraceGraph& graph, const GraphNode& node) {
  if (node.op != OpKind::matmul || node.operands.size() != 2) return std::nullopt;
  const TensorType& lhs = graph.type_of(node.operands[0]);
  const TensorType& rhs = graph.type_of(node.operands[1]);
  const DType dtype = node.results[0].dtype;
  if ((dtype != DType::f32 && dtype != DType::bf16) || lhs.dtype != dtype || rhs.dtype != dtype)
    return std::nullopt;
  const int64_t lr = lhs.shape.rank(), rr = rhs.shape.rank();
  if (lr < 2 || rr < 2) return std::nullopt;
  auto batch_of = [](const Shape& s) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d + 2 < s.rank(); ++d) dims.push_back(s[d]);
    return dims;
  };
  auto product = [](const std::vector<int64_t>& dims) {
    int64_t p = 1;
    for (int64_t d : dims) p *= d;
    return p;
  };
  const std::vector<int64_t> lb = batch_of(lhs.shape), rb = batch_of(rhs.shape);
  GemmShape g;
  g.dtype = dtype;
  g.m = lhs.shape[lr - 2];
  g.k = lhs.shape[lr - 1];
  g.n = rhs.shape[rr - 1];
  if (rb.empty()) {
    g.m *= product(lb); // [..., m, k] x [k, n]: one gemm over the rows
  } else if (lb.empty()) {
    g.batch = product(rb);
    g.b_stride = g.k * g.n;
  } else if (lb == rb) {
    g.batch = product(lb);
    g.a_stride = g.m * g.k;
    g.b_stride = g.k * g.n;
  } else {
    return std::nullopt;
  }
  return g;
}

} // namespace mstep::xla
