// Text and Graphviz dumps of a TraceGraph (written under MSTEP_DUMP_DIR).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

namespace {
std::string value_name(const TraceGraph& g, ValueRef v) {
  if (g.nodes[v.node].results.size() == 1) return absl::StrCat("%", v.node);
  return absl::StrCat("%", v.node, "#", v.index);
}

/// The op's name; a custom op's with its registered name: "custom[my.op]".
std::string op_label(const GraphNode& n) {
  if (n.op == OpKind::custom) {
    auto op = CustomOpRegistry::global().find(
        static_cast<uint64_t>(attr_int(n.attrs, AttrName::custom_op)));
    if (op.ok()) return absl::StrCat("custom[", (*op)->name, "]");
  }
  return std::string(op_name(n.op));
}

std::string result_types(const GraphNode& n) {
  return absl::StrJoin(n.results, ", ",
                       [](std::string* out, const TensorType& t) {
                         out->append(t.to_string());
                       });
}
}  // namespace

absl::string_view input_role_name(InputRole role) {
  switch (role) {
    case InputRole::input: return "input";
    case InputRole::parameter: return "parameter";
    case InputRole::optimizer_state: return "optimizer_state";
    case InputRole::rng_state: return "rng_state";
    case InputRole::device_scalar: return "device_scalar";
  }
  return "input";
}

std::string TraceGraph::to_text() const {
  std::string out = absl::StrCat("graph(inputs=", input_types.size(),
                                 ", nodes=", nodes.size(), ") {\n");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& n = nodes[i];
    std::string operands = absl::StrJoin(
        n.operands, ", ",
        [&](std::string* o, ValueRef v) { o->append(value_name(*this, v)); });
    absl::StrAppend(&out, "  %", i, " = ", op_label(n), "(", operands, ")");
    if (!n.attrs.empty()) absl::StrAppend(&out, " {", attrs_to_string(n.attrs), "}");
    absl::StrAppend(&out, " : ", result_types(n), "\n");
  }
  std::string outs = absl::StrJoin(
      outputs, ", ",
      [&](std::string* o, ValueRef v) { o->append(value_name(*this, v)); });
  absl::StrAppend(&out, "  return ", outs, "\n}\n");
  return out;
}

std::string TraceGraph::to_dot() const {
  std::string out = "digraph mstep {\n  node [shape=box, fontname=monospace];\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& n = nodes[i];
    std::string label = absl::StrCat("%", i, " ", op_label(n));
    if (!n.attrs.empty()) absl::StrAppend(&label, "\\n", attrs_to_string(n.attrs));
    absl::StrAppend(&label, "\\n", result_types(n));
    absl::StrAppend(&out, "  n", i, " [label=\"", label, "\"",
                    n.op == OpKind::parameter ? ", style=filled, fillcolor=lightblue" : "",
                    "];\n");
    for (ValueRef v : n.operands) absl::StrAppend(&out, "  n", v.node, " -> n", i, ";\n");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::StrAppend(&out, "  out", i, " [label=\"output ", i,
                    "\", shape=ellipse];\n  n", outputs[i].node, " -> out", i, ";\n");
  }
  out += "}\n";
  return out;
}

}  // namespace mstep
