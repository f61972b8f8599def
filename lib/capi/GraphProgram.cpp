// Graph programs of the C API: op calls through the op table, builder tapes
// and MLIR-module programs, and the signature check of a run.
#include "lib/capi/GraphProgram.h"

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/graphs/RecordGraph.h"
#include "lib/capi/Handles.h"

namespace mstep::capi {

std::vector<Tensor> call_op(const char* name, absl::Span<const Tensor> inputs,
                            const mstep_attr* attrs, size_t num_attrs) {
  require_out(name, "op");
  const OpEntry* entry = find_op(name);
  if (entry == nullptr)
    fail(MSTEP_NOT_FOUND, absl::StrCat("no op named '", name,
                                       "'; mstep_op_signatures() lists every op"));
  const int n = static_cast<int>(inputs.size());
  if (n < entry->min_inputs || (entry->max_inputs >= 0 && n > entry->max_inputs))
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat("op '", name, "' takes ",
                      entry->min_inputs == entry->max_inputs
                          ? absl::StrCat(entry->min_inputs)
                          : absl::StrCat(entry->min_inputs, " to ",
                                         entry->max_inputs < 0 ? std::string("any number")
                                                               : absl::StrCat(entry->max_inputs)),
                      " tensor operands, got ", n, ": ", entry->signature));
  if (num_attrs > 0 && attrs == nullptr)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("attrs is NULL but num_attrs is ", num_attrs));
  OpAttrs op_attrs(name, attrs, num_attrs);
  std::vector<Tensor> results = entry->call(inputs, op_attrs);
  op_attrs.finish(entry->signature);
  return results;
}

OwnedAttr::OwnedAttr(const mstep_attr& a)
    : name(a.name ? a.name : ""), kind(a.kind), i(a.i), f(a.f), s(a.s ? a.s : "") {
  if (a.ints) ints.assign(a.ints, a.ints + a.num_ints);
}

mstep_attr OwnedAttr::view() const {
  return mstep_attr{name.c_str(), kind, i, f, ints.data(), ints.size(), s.c_str()};
}

void check_signature(const GraphProgram& program, absl::Span<const Tensor> inputs,
                     const char* what) {
  if (inputs.size() != program.input_types.size())
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("the graph takes ", program.input_types.size(),
                                              " inputs, got ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorType& want = program.input_types[i];
    if (inputs[i].type() != want)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat(what, "[", i, "] is ", inputs[i].type().to_string(),
                        " but the graph was compiled for ", want.to_string(),
                        "; compile another graph for this signature (a builder or module "
                        "per shape), or pass a tensor of the compiled type"));
    if (inputs[i].device() != program.device)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat(what, "[", i, "] is on ", inputs[i].device().to_string(),
                        " but the graph runs on ", program.device.to_string(),
                        "; create the input on that device"));
  }
}

namespace {

class TapeProgram final : public GraphProgram {
 public:
  TapeProgram(const Tape& tape, const std::vector<int32_t>& outputs)
      : tape_(tape), outputs_(outputs) {
    // Keep only the ops the outputs need, in order.
    std::vector<bool> needed(tape_.values.size(), false);
    for (int32_t id : outputs_) needed[id] = true;
    std::vector<Tape::Op> kept;
    for (auto op = tape_.ops.rbegin(); op != tape_.ops.rend(); ++op) {
      bool any = false;
      for (int32_t r : op->results) any = any || needed[r];
      if (!any) continue;
      for (int32_t v : op->operands)
        if (v >= 0) needed[v] = true;
      kept.push_back(*op);
    }
    tape_.ops.assign(kept.rbegin(), kept.rend());
  }

  std::vector<Tensor> record(absl::Span<const Tensor> inputs) const override {
    std::vector<Tensor> values(tape_.values.size());
    for (size_t id = 0; id < tape_.values.size(); ++id) {
      const Tape::ValueInfo& v = tape_.values[id];
      if (v.source == Tape::Source::input) values[id] = inputs[v.index];
      if (v.source == Tape::Source::captured) values[id] = tape_.captured[v.index];
    }
    std::vector<Tensor> operands;
    std::vector<mstep_attr> attrs;
    for (const Tape::Op& op : tape_.ops) {
      operands.clear();
      for (int32_t v : op.operands) operands.push_back(v >= 0 ? values[v] : Tensor());
      attrs.clear();
      for (const OwnedAttr& a : op.attrs) attrs.push_back(a.view());
      std::vector<Tensor> results = call_op(op.entry->name, operands, attrs.data(), attrs.size());
      for (size_t r = 0; r < op.results.size(); ++r) values[op.results[r]] = results[r];
    }
    std::vector<Tensor> out;
    for (int32_t id : outputs_) out.push_back(values[id]);
    return out;
  }

 private:
  Tape tape_;
  std::vector<int32_t> outputs_;
};

class NodeProgram final : public GraphProgram {
 public:
  explicit NodeProgram(TraceGraph graph) : graph_(std::move(graph)) {}

  std::vector<Tensor> record(absl::Span<const Tensor> inputs) const override {
    return detail::record_trace_graph("mstep_compiled_graph_from_mlir", graph_, inputs, device);
  }

 private:
  TraceGraph graph_;
};

}  // namespace

std::shared_ptr<const GraphProgram> make_tape_program(const Tape& tape,
                                                      const std::vector<int32_t>& outputs,
                                                      std::vector<TensorType> output_types) {
  auto program = std::make_shared<TapeProgram>(tape, outputs);
  program->device = tape.device;
  program->input_types = tape.input_types;
  program->output_types = std::move(output_types);
  return program;
}

std::shared_ptr<const GraphProgram> make_node_program(TraceGraph graph, Device device) {
  for (const GraphNode& node : graph.nodes)
    if (node.body)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat("the module contains a fused op (", op_name(node.op),
                        "); hand over the unfused module: fusion is the compiler's job"));
  std::vector<TensorType> outputs;
  for (const ValueRef& v : graph.outputs) outputs.push_back(graph.type_of(v));
  std::vector<TensorType> inputs = graph.input_types;
  auto program = std::make_shared<NodeProgram>(std::move(graph));
  program->device = device;
  program->input_types = std::move(inputs);
  program->output_types = std::move(outputs);
  return program;
}

}  // namespace mstep::capi
