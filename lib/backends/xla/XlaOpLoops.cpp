// OpLoops (XlaOpLoops.h): the families in turn, one function per
// signature.
#include "lib/backends/xla/XlaOpLoops.h"

#include <variant>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mstep::xla {

namespace {

/// What a node's function depends on: its op, its attributes (doubles by
/// their bits) and its operand and result types.
std::string signature(const TraceGraph& graph, const GraphNode& n) {
  std::string key(op_name(n.op));
  for (const Attr& a : n.attrs) {
    absl::StrAppend(&key, "|", attr_name(a.name), "=");
    if (auto* i = std::get_if<int64_t>(&a.value))
      absl::StrAppend(&key, *i);
    else if (auto* d = std::get_if<double>(&a.value))
      absl::StrAppend(&key, "0x", absl::Hex(absl::bit_cast<uint64_t>(*d)));
    else if (auto* l = std::get_if<IntList>(&a.value))
      absl::StrAppend(&key, "[", absl::StrJoin(*l, ","), "]");
    else
      absl::StrAppend(&key, dtype_name(std::get<DType>(a.value)));
  }
  for (ValueRef v : n.operands) absl::StrAppend(&key, "|", graph.type_of(v).to_string());
  absl::StrAppend(&key, "->");
  for (const TensorType& t : n.results) absl::StrAppend(&key, t.to_string(), "|");
  return key;
}

std::optional<OpLoop> emit_op_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  using Family = std::optional<OpLoop> (*)(llvm::Module&, const TraceGraph&, uint32_t);
  for (Family family : {emit_reduction_loop, emit_softmax_loop, emit_loss_loop, emit_random_loop,
                        emit_copy_loop, emit_optimizer_loop, emit_index_loop, emit_norm_loop,
                        emit_attention_loop, emit_gather_loop, emit_fill_loop,
                        emit_pool_loop, emit_conv_gemm, emit_conv_loop, emit_matmul_loop})
    if (std::optional<OpLoop> loop = family(module, graph, node)) return loop;
  return std::nullopt;
}

} // namespace

std::optional<OpLoop> OpLoops::emit(llvm::Module& module, const TraceGraph& graph, uint32_t node) {
  const std::string key = signature(graph, graph.nodes[node]);
  auto found = by_signature_.find(key);
  if (found != by_signature_.end()) return found->second;
  std::optional<OpLoop> loop = emit_op_loop(module, graph, node);
  by_signature_.emplace(key, loop);
  return loop;
}

} // namespace mstep::xla
