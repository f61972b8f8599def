// The spelling table of trace ops and attributes in the mstep dialect.
#include "lib/ir/import/OpMapping.h"

#include <string>
#include <vector>

#include "llvm/ADT/StringMap.h"

namespace mstep::ir_mapping {

namespace {

/// "mstep.<name>" for every op, built once.
const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < kNumOpKinds; ++i) {
      const auto op = static_cast<OpKind>(i);
      v.push_back(op == OpKind::sdpa_grad ? "mstep.sdpa_backward"
                                          : "mstep." + std::string(op_name(op)));
    }
    return v;
  }();
  return names;
}

llvm::StringRef name_of(AttrName name) {
  absl::string_view s = attr_name(name);
  return {s.data(), s.size()};
}

bool is_attention(OpKind op) { return op == OpKind::sdpa || op == OpKind::sdpa_grad; }

}  // namespace

llvm::StringRef mlir_op_name(OpKind op) { return op_names()[static_cast<int>(op)]; }

std::optional<OpKind> trace_op(llvm::StringRef mlir_name) {
  static const llvm::StringMap<OpKind> by_name = [] {
    llvm::StringMap<OpKind> m;
    for (int i = 0; i < kNumOpKinds; ++i) m[op_names()[i]] = static_cast<OpKind>(i);
    return m;
  }();
  auto it = by_name.find(mlir_name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

AttrSpelling mlir_attr(OpKind op, AttrName name) {
  using E = AttrEncoding;
  switch (name) {
    // The result type carries these.
    case AttrName::shape:
    case AttrName::dtype:
    // The presence of an optional operand carries these.
    case AttrName::has_mask:
    case AttrName::has_valid_len:
    case AttrName::has_weight:
    case AttrName::has_bias:
    // multi_tensor_update's operandSegmentSizes / resultSegmentSizes.
    case AttrName::operand_segments:
    case AttrName::result_segments:
      return {name_of(name), E::implied};
    case AttrName::keepdim:
    case AttrName::ceil_mode:
    case AttrName::count_include_pad:
    case AttrName::is_causal:
    case AttrName::nesterov:
    case AttrName::amsgrad:
    case AttrName::maximize:
      return {name_of(name), E::boolean};
    case AttrName::kind: return {name_of(name), E::optimizer_kind};
    // FusedSDPA's names.
    case AttrName::recompute: return {"recompute_mode", E::boolean};
    case AttrName::return_probs: return {"return_attn_probs", E::boolean};
    case AttrName::return_mask: return {"return_dropout_mask", E::boolean};
    case AttrName::offset: return {is_attention(op) ? "rng_offset" : "offset", E::plain};
    case AttrName::approximate: return {name_of(name), E::gelu_approximation};
    case AttrName::reduction: return {name_of(name), E::loss_reduction};
    case AttrName::padding_side: return {name_of(name), E::padding_side};
    case AttrName::softmax_mode: return {name_of(name), E::softmax_mode};
    case AttrName::reduce_op: return {name_of(name), E::reduce_op};
    default: return {name_of(name), E::plain};
  }
}

std::optional<AttrName> trace_attr(OpKind op, llvm::StringRef mlir_name) {
  for (int i = 0; i < kNumAttrNames; ++i) {
    const auto name = static_cast<AttrName>(i);
    AttrSpelling s = mlir_attr(op, name);
    if (s.encoding != AttrEncoding::implied && s.name == mlir_name) return name;
  }
  return std::nullopt;
}

}  // namespace mstep::ir_mapping
