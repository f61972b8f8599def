// TraceGraph <-> bytes (see GraphSerialize.h). In the sealed envelope
// (ByteStream.h, magic MSTEPGRF), a graph is
//   inputs: u32 n, n x type
//   roles: u32 (0 or n), u8 each          donated_to: u32 (0 or n), i64 each
//   nodes: u32 m, m x node                outputs: u32 k, k x (u32 node, u32 result)
// a node is
//   u16 op | u32 a, a x attr | u32 p, p x (u32 node, u32 result)
//   | u32 r, r x type | u8 has_body [| graph]
// an attr is u8 name | u8 kind (0 int, 1 double, 2 int list, 3 dtype) | value
// (i64 | IEEE bits u64 | u32 count, count x i64 | u8), and a type is
// u8 dtype | u8 rank | rank x i64.
#include "mstep/ir/GraphSerialize.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mstep/core/ByteStream.h"
#include "mstep/core/Error.h"

namespace mstep {

namespace {

constexpr absl::string_view kMagic = "MSTEPGRF";
// The fewest bytes each encoded item takes (for ByteReader::count).
constexpr size_t kMinTypeBytes = 2, kMinAttrBytes = 3, kMinRefBytes = 8;
constexpr size_t kMinNodeBytes = 2 + 4 + 4 + 4 + 1;

enum class AttrKind : uint8_t { integer, real, int_list, dtype };

// ---- writing ----

void write_ref(ByteWriter& w, ValueRef v) {
  w.u32(v.node);
  w.u32(v.index);
}

struct AttrWriter {
  ByteWriter& w;
  void operator()(int64_t v) const {
    w.u8(static_cast<uint8_t>(AttrKind::integer));
    w.i64(v);
  }
  void operator()(double v) const {
    w.u8(static_cast<uint8_t>(AttrKind::real));
    w.f64(v);
  }
  void operator()(const IntList& v) const {
    w.u8(static_cast<uint8_t>(AttrKind::int_list));
    w.u32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) w.i64(x);
  }
  void operator()(DType v) const {
    w.u8(static_cast<uint8_t>(AttrKind::dtype));
    w.u8(static_cast<uint8_t>(v));
  }
};

void write_graph(ByteWriter& w, const TraceGraph& g) {
  w.u32(static_cast<uint32_t>(g.input_types.size()));
  for (const TensorType& t : g.input_types) write_tensor_type(w, t);
  w.u32(static_cast<uint32_t>(g.input_roles.size()));
  for (InputRole r : g.input_roles) w.u8(static_cast<uint8_t>(r));
  w.u32(static_cast<uint32_t>(g.donated_to.size()));
  for (int32_t d : g.donated_to) w.i64(d);
  w.u32(static_cast<uint32_t>(g.nodes.size()));
  for (const GraphNode& n : g.nodes) {
    w.u16(static_cast<uint16_t>(n.op));
    w.u32(static_cast<uint32_t>(n.attrs.size()));
    for (const Attr& a : n.attrs) {
      w.u8(static_cast<uint8_t>(a.name));
      std::visit(AttrWriter{w}, a.value);
    }
    w.u32(static_cast<uint32_t>(n.operands.size()));
    for (ValueRef v : n.operands) write_ref(w, v);
    w.u32(static_cast<uint32_t>(n.results.size()));
    for (const TensorType& t : n.results) write_tensor_type(w, t);
    w.u8(n.body ? 1 : 0);
    if (n.body) write_graph(w, *n.body);
  }
  w.u32(static_cast<uint32_t>(g.outputs.size()));
  for (ValueRef v : g.outputs) write_ref(w, v);
}

// ---- reading ----

/// Reads one graph; every structural check of GraphSerialize.h. Returns
/// early (with the reader's error set) at the first problem.
class GraphReader {
 public:
  explicit GraphReader(ByteReader& r) : r_(r) {}

  void read_graph(TraceGraph& g, int depth) {
    if (depth > kMaxGraphNesting)
      return r_.fail(absl::StrCat("fusion bodies nest more than ", kMaxGraphNesting, " deep"));
    const uint32_t num_inputs = r_.count("the input count", kMinTypeBytes);
    for (uint32_t i = 0; i < num_inputs && r_.ok(); ++i)
      g.input_types.push_back(read_type(absl::StrCat("input ", i)));
    const uint32_t num_roles = r_.count("the role count", 1);
    if (r_.ok() && num_roles != 0 && num_roles != num_inputs)
      return r_.fail(absl::StrCat(num_roles, " input roles for ", num_inputs, " inputs"));
    for (uint32_t i = 0; i < num_roles && r_.ok(); ++i) {
      const uint8_t role = r_.u8("an input role");
      if (r_.ok() && role >= kNumInputRoles)
        return r_.fail(absl::StrCat("input ", i, " has role ", int{role}, ", not a valid InputRole"));
      g.input_roles.push_back(static_cast<InputRole>(role));
    }
    const uint32_t num_donated = r_.count("the donation count", 8);
    if (r_.ok() && num_donated != 0 && num_donated != num_inputs)
      return r_.fail(absl::StrCat(num_donated, " donation entries for ", num_inputs, " inputs"));
    std::vector<int64_t> donated(num_donated);
    for (int64_t& d : donated) d = r_.i64("a donation entry");

    const uint32_t num_nodes = r_.count("the node count", kMinNodeBytes);
    std::vector<bool> input_seen(num_inputs, false);
    for (uint32_t i = 0; i < num_nodes && r_.ok(); ++i) read_node(g, i, input_seen, depth);

    const uint32_t num_outputs = r_.count("the output count", kMinRefBytes);
    for (uint32_t k = 0; k < num_outputs && r_.ok(); ++k)
      g.outputs.push_back(read_ref(g, g.nodes.size(), absl::StrCat("output ", k)));
    for (size_t i = 0; i < donated.size() && r_.ok(); ++i) {
      if (donated[i] < -1 || donated[i] >= static_cast<int64_t>(num_outputs))
        return r_.fail(absl::StrCat("input ", i, " is donated to output ", donated[i], " of ",
                                    num_outputs));
      g.donated_to.push_back(static_cast<int32_t>(donated[i]));
    }
  }

 private:
  TensorType read_type(absl::string_view what) { return read_tensor_type(r_, what); }

  /// A reference to result `index` of a node before `limit`.
  ValueRef read_ref(const TraceGraph& g, size_t limit, absl::string_view what) {
    ValueRef v;
    v.node = r_.u32("a node reference");
    v.index = r_.u32("a result index");
    if (!r_.ok()) return v;
    if (v.node >= limit)
      r_.fail(absl::StrCat(what, " refers to node ", v.node, ", not one of the ", limit,
                           " nodes before it"));
    else if (v.index >= g.nodes[v.node].results.size())
      r_.fail(absl::StrCat(what, " refers to result ", v.index, " of node ", v.node, ", which has ",
                           g.nodes[v.node].results.size()));
    return v;
  }

  void read_attr(GraphNode& n, absl::string_view where) {
    const uint8_t name = r_.u8("an attribute name");
    const uint8_t kind = r_.u8("an attribute kind");
    if (!r_.ok()) return;
    if (name >= kNumAttrNames)
      return r_.fail(absl::StrCat(where, " has attribute name ", int{name}, ", not a valid AttrName"));
    Attr a{static_cast<AttrName>(name), int64_t{0}};
    const std::string what = absl::StrCat(where, " attribute '", attr_name(a.name), "'");
    switch (static_cast<AttrKind>(kind)) {
      case AttrKind::integer: a.value = r_.i64("an int attribute"); break;
      case AttrKind::real: a.value = r_.f64("a double attribute"); break;
      case AttrKind::int_list: {
        const uint32_t count = r_.count("an int list's length", 8);
        IntList list;
        for (uint32_t i = 0; i < count && r_.ok(); ++i) list.push_back(r_.i64("an int list entry"));
        a.value = std::move(list);
        break;
      }
      case AttrKind::dtype: {
        const uint8_t dtype = r_.u8("a dtype attribute");
        if (r_.ok() && dtype >= kNumDTypes)
          return r_.fail(absl::StrCat(what, " is dtype ", int{dtype}, ", not a valid DType"));
        a.value = static_cast<DType>(dtype);
        break;
      }
      default:
        return r_.fail(absl::StrCat(what, " has kind ", int{kind}, ", not int, double, int list "
                                    "or dtype"));
    }
    n.attrs.push_back(std::move(a));
  }

  void read_node(TraceGraph& g, uint32_t i, std::vector<bool>& input_seen, int depth) {
    GraphNode n;
    const uint16_t op = r_.u16("an op");
    if (r_.ok() && op >= kNumOpKinds)
      return r_.fail(absl::StrCat("node ", i, " has op ", op, ", not a valid OpKind"));
    n.op = static_cast<OpKind>(op);
    const std::string where = r_.ok() ? absl::StrCat("node ", i, " (", op_name(n.op), ")") : "";
    const uint32_t num_attrs = r_.count("an attribute count", kMinAttrBytes);
    for (uint32_t a = 0; a < num_attrs && r_.ok(); ++a) read_attr(n, where);
    const uint32_t num_operands = r_.count("an operand count", kMinRefBytes);
    for (uint32_t k = 0; k < num_operands && r_.ok(); ++k)
      n.operands.push_back(read_ref(g, i, absl::StrCat(where, " operand ", k)));
    const uint32_t num_results = r_.count("a result count", kMinTypeBytes);
    for (uint32_t k = 0; k < num_results && r_.ok(); ++k)
      n.results.push_back(read_type(absl::StrCat(where, " result ", k)));
    const uint8_t has_body = r_.u8("the body flag");
    if (!r_.ok()) return;
    if (has_body > 1) return r_.fail(absl::StrCat(where, " has body flag ", int{has_body}));
    if ((has_body == 1) != (n.op == OpKind::fusion))
      return r_.fail(absl::StrCat(where, has_body ? " has a body" : " has no body",
                                  "; only a fusion node has one"));
    if (has_body) {
      auto body = std::make_shared<TraceGraph>();
      read_graph(*body, depth + 1);
      if (!r_.ok()) return;
      check_body(g, n, *body, where);
      n.body = std::move(body);
    }
    if (n.op == OpKind::parameter) check_parameter(g, n, input_seen, where);
    g.nodes.push_back(std::move(n));
  }

  /// A fusion body takes its node's operands and returns its results.
  void check_body(const TraceGraph& g, const GraphNode& n, const TraceGraph& body,
                  absl::string_view where) {
    if (body.input_types.size() != n.operands.size())
      return r_.fail(absl::StrCat(where, "'s body has ", body.input_types.size(),
                                  " inputs for ", n.operands.size(), " operands"));
    for (size_t k = 0; k < n.operands.size(); ++k)
      if (body.input_types[k] != g.type_of(n.operands[k]))
        return r_.fail(absl::StrCat(where, "'s body input ", k, " is ",
                                    body.input_types[k].to_string(), ", its operand ",
                                    g.type_of(n.operands[k]).to_string()));
    if (body.outputs.size() != n.results.size())
      return r_.fail(absl::StrCat(where, "'s body has ", body.outputs.size(), " outputs for ",
                                  n.results.size(), " results"));
    for (size_t k = 0; k < n.results.size(); ++k)
      if (body.type_of(body.outputs[k]) != n.results[k])
        return r_.fail(absl::StrCat(where, "'s body output ", k, " is ",
                                    body.type_of(body.outputs[k]).to_string(), ", its result ",
                                    n.results[k].to_string()));
  }

  /// A parameter reads one input, a distinct one, of its own type.
  void check_parameter(const TraceGraph& g, const GraphNode& n, std::vector<bool>& input_seen,
                       absl::string_view where) {
    if (!n.operands.empty() || n.results.size() != 1)
      return r_.fail(absl::StrCat(where, " has ", n.operands.size(), " operands and ",
                                  n.results.size(), " results, not 0 and 1"));
    const Attr* index = nullptr;
    for (const Attr& a : n.attrs)
      if (a.name == AttrName::index) index = &a;
    if (!index || !std::holds_alternative<int64_t>(index->value))
      return r_.fail(absl::StrCat(where, " has no int attribute 'index'"));
    const int64_t k = std::get<int64_t>(index->value);
    if (k < 0 || k >= static_cast<int64_t>(g.input_types.size()))
      return r_.fail(absl::StrCat(where, " reads input ", k, " of ", g.input_types.size()));
    if (input_seen[k]) return r_.fail(absl::StrCat(where, " reads input ", k, " a second time"));
    input_seen[k] = true;
    if (n.results[0] != g.input_types[k])
      return r_.fail(absl::StrCat(where, " is ", n.results[0].to_string(), " but input ", k, " is ",
                                  g.input_types[k].to_string()));
  }

  ByteReader& r_;
};

}  // namespace

std::string serialize_graph(const TraceGraph& graph) {
  ByteWriter payload;
  write_graph(payload, graph);
  return seal(kMagic, kGraphFormatVersion, payload.data());
}

absl::StatusOr<TraceGraph> deserialize_graph(absl::string_view bytes) {
  absl::StatusOr<absl::string_view> payload =
      unseal(bytes, kMagic, kGraphFormatVersion, "serialized graph");
  if (absl::IsUnimplemented(payload.status()))  // no magic: corrupt, for a graph
    return absl::DataLossError(payload.status().message());
  MSTEP_RETURN_IF_ERROR(payload.status());
  ByteReader r(*payload, "serialized graph");
  TraceGraph graph;
  GraphReader(r).read_graph(graph, 0);
  r.expect_end();
  MSTEP_RETURN_IF_ERROR(r.status());
  return graph;
}

}  // namespace mstep
