// C API: graph builders and compiled graphs (from a builder or from an MLIR
// module), run through the module cache.
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/capi/Graphs.h"
#include "lib/compiler/Compiler.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Creation.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/Tracer.h"

using namespace mstep;
using namespace mstep::capi;

namespace mstep::capi {

/// Writes new handles for `tensors` to `outputs` (after a capacity check).
void write_outputs(mstep_context* context, const std::vector<Tensor>& tensors,
                   mstep_tensor** outputs, size_t capacity) {
  if (tensors.size() > capacity)
    fail(MSTEP_OUT_OF_RANGE,
         absl::StrCat("the op has ", tensors.size(), " results but capacity is ", capacity));
  if (capacity > 0) require_out(outputs, "outputs");
  for (size_t i = 0; i < tensors.size(); ++i) outputs[i] = new_tensor(context, tensors[i]);
}

void run_as_one_graph(const std::vector<Tensor>& tensors) {
  std::vector<TensorImpl*> impls;
  for (const Tensor& t : tensors) impls.push_back(t.impl());
  throw_if_error(Tracer::get().sync(impls));
}

}  // namespace mstep::capi

namespace {

void check_builder(const mstep_graph_builder* b) {
  check_handle(b, HandleKind::builder, "builder");
}
void check_compiled(const mstep_compiled_graph* g) {
  check_handle(g, HandleKind::compiled, "graph");
}

/// The value id of operand `handle` in `builder`'s tape: its own tensors
/// by id, any other tensor as a captured one.
int32_t operand_id(mstep_graph_builder* builder, mstep_tensor* handle, size_t i) {
  Tape& tape = builder->state->tape;
  if (handle == nullptr) return -1;
  if (handle->builder) {
    if (handle->builder != builder->state)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat("inputs[", i, "] belongs to another graph builder; a graph can only "
                                      "use its own placeholders and results"));
    return handle->value_id;
  }
  for (size_t c = 0; c < tape.captured.size(); ++c)
    if (tape.captured[c].impl() == handle->tensor.impl()) return tape.captured_values[c];
  const auto id = static_cast<int32_t>(tape.values.size());
  tape.values.push_back({Tape::Source::captured, static_cast<int32_t>(tape.captured.size())});
  tape.captured.push_back(handle->tensor);
  tape.captured_values.push_back(id);
  return id;
}

/// A builder tensor: typed zeros standing for value `id` (the builder's
/// tensors are never computed; materialized, so mark_step() ignores them).
mstep_tensor* builder_tensor(mstep_graph_builder* builder, const TensorType& type, int32_t id) {
  mstep_tensor* handle =
      new_tensor(builder->context, detail::materialized_zeros(type, builder->state->tape.device));
  handle->builder = builder->state;
  handle->value_id = id;
  return handle;
}

mstep_compiled_graph* new_compiled(mstep_context* context,
                                   std::shared_ptr<const GraphProgram> program) {
  // Compile now, through the module cache, by running once on zeros.
  std::vector<Tensor> zeros;
  for (const TensorType& type : program->input_types)
    zeros.push_back(detail::materialized_zeros(type, program->device));
  run_as_one_graph(program->record(zeros));
  auto* graph = new mstep_compiled_graph(context, std::move(program));
  ++context->live_handles;
  return graph;
}

}  // namespace

extern "C" {

mstep_status* mstep_op(mstep_context* context, const char* op, mstep_tensor* const* inputs,
                       size_t num_inputs, const mstep_attr* attrs, size_t num_attrs,
                       mstep_tensor** outputs, size_t capacity, size_t* out_num_outputs) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_num_outputs, "out_num_outputs");
    std::vector<Tensor> operands = tensors_of(inputs, num_inputs, "inputs", true);
    for (size_t i = 0; i < num_inputs; ++i)
      if (inputs[i] && inputs[i]->builder)
        fail(MSTEP_INVALID_ARGUMENT,
             absl::StrCat("inputs[", i, "] belongs to a graph builder; use "
                                        "mstep_graph_builder_op for it"));
    std::vector<Tensor> results = call_op(op, operands, attrs, num_attrs);
    write_outputs(context, results, outputs, capacity);
    *out_num_outputs = results.size();
  });
}

const char* mstep_op_signatures(void) { return op_signatures().c_str(); }

mstep_status* mstep_graph_builder_create(mstep_context* context, mstep_device* device,
                                         mstep_graph_builder** out_builder) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_builder, "out_builder");
    auto* builder = new mstep_graph_builder(context);
    builder->state->tape.device = device ? device->device : default_device();
    ++context->live_handles;
    *out_builder = builder;
  });
}

mstep_status* mstep_graph_builder_release(mstep_graph_builder* builder) {
  if (builder == nullptr) return nullptr;
  return guard(__func__, [&] {
    release_owned(builder, HandleKind::builder, "builder");
  });
}

mstep_status* mstep_graph_builder_add_input(mstep_graph_builder* builder, mstep_dtype dtype,
                                            const int64_t* shape, size_t rank,
                                            mstep_tensor** out_placeholder) {
  return guard(__func__, [&] {
    check_builder(builder);
    require_out(out_placeholder, "out_placeholder");
    const TensorType type{to_shape(shape, rank, "shape"), to_dtype(dtype, "dtype")};
    Tape& tape = builder->state->tape;
    const auto id = static_cast<int32_t>(tape.values.size());
    *out_placeholder = builder_tensor(builder, type, id);
    tape.values.push_back({Tape::Source::input, static_cast<int32_t>(tape.input_types.size())});
    tape.input_types.push_back(type);
  });
}

mstep_status* mstep_graph_builder_op(mstep_graph_builder* builder, const char* op,
                                     mstep_tensor* const* inputs, size_t num_inputs,
                                     const mstep_attr* attrs, size_t num_attrs,
                                     mstep_tensor** outputs, size_t capacity,
                                     size_t* out_num_outputs) {
  return guard(__func__, [&] {
    check_builder(builder);
    require_out(out_num_outputs, "out_num_outputs");
    std::vector<Tensor> operands = tensors_of(inputs, num_inputs, "inputs", true);
    // Check the op on the builder's typed stand-ins first: a bad op records
    // nothing.
    std::vector<Tensor> results;
    {
      NoGradGuard no_grad;
      results = call_op(op, operands, attrs, num_attrs);
    }
    if (results.size() > capacity)
      fail(MSTEP_OUT_OF_RANGE,
           absl::StrCat("op '", op, "' has ", results.size(), " results but capacity is ",
                        capacity));
    if (capacity > 0) require_out(outputs, "outputs");
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].device() != builder->state->tape.device)
        fail(MSTEP_INVALID_ARGUMENT,
             absl::StrCat("op '", op, "' runs on ", results[i].device().to_string(),
                          " but the builder's graph runs on ",
                          builder->state->tape.device.to_string()));
    Tape::Op recorded{find_op(op), {}, {}, {}};
    for (size_t i = 0; i < num_inputs; ++i) recorded.operands.push_back(operand_id(builder, inputs[i], i));
    for (size_t a = 0; a < num_attrs; ++a) recorded.attrs.emplace_back(attrs[a]);
    Tape& tape = builder->state->tape;
    for (size_t r = 0; r < results.size(); ++r) {
      const auto id = static_cast<int32_t>(tape.values.size());
      tape.values.push_back({Tape::Source::result, static_cast<int32_t>(tape.ops.size())});
      recorded.results.push_back(id);
      outputs[r] = builder_tensor(builder, results[r].type(), id);
    }
    tape.ops.push_back(std::move(recorded));
    *out_num_outputs = results.size();
  });
}

mstep_status* mstep_graph_builder_compile(mstep_graph_builder* builder,
                                          mstep_tensor* const* outputs, size_t num_outputs,
                                          mstep_compiled_graph** out_graph) {
  return guard(__func__, [&] {
    check_builder(builder);
    require_out(out_graph, "out_graph");
    if (num_outputs == 0) fail(MSTEP_INVALID_ARGUMENT, "a graph needs at least one output");
    std::vector<Tensor> tensors = tensors_of(outputs, num_outputs, "outputs", false);
    std::vector<int32_t> ids;
    std::vector<TensorType> types;
    for (size_t i = 0; i < num_outputs; ++i) {
      if (outputs[i]->builder != builder->state)
        fail(MSTEP_INVALID_ARGUMENT,
             absl::StrCat("outputs[", i, "] is not a placeholder or result of this builder"));
      ids.push_back(outputs[i]->value_id);
      types.push_back(tensors[i].type());
    }
    *out_graph = new_compiled(builder->context,
                              make_tape_program(builder->state->tape, ids, std::move(types)));
  });
}

mstep_status* mstep_compiled_graph_from_mlir(mstep_context* context, mstep_device* device,
                                             const char* mlir_text, size_t length,
                                             mstep_compiled_graph** out_graph) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(mlir_text, "mlir_text");
    require_out(out_graph, "out_graph");
    absl::StatusOr<TraceGraph> graph = trace_graph_from_mlir(absl::string_view(mlir_text, length));
    if (!graph.ok())
      fail(MSTEP_INVALID_ARGUMENT, std::string(graph.status().message()));
    const Device d = device ? device->device : default_device();
    *out_graph = new_compiled(context, make_node_program(*std::move(graph), d));
  });
}

mstep_status* mstep_compiled_graph_release(mstep_compiled_graph* graph) {
  if (graph == nullptr) return nullptr;
  return guard(__func__, [&] {
    release_owned(graph, HandleKind::compiled, "graph");
  });
}

mstep_status* mstep_compiled_graph_num_inputs(const mstep_compiled_graph* graph,
                                              size_t* out_count) {
  return guard(__func__, [&] {
    check_compiled(graph);
    require_out(out_count, "out_count");
    *out_count = graph->program->input_types.size();
  });
}

mstep_status* mstep_compiled_graph_num_outputs(const mstep_compiled_graph* graph,
                                               size_t* out_count) {
  return guard(__func__, [&] {
    check_compiled(graph);
    require_out(out_count, "out_count");
    *out_count = graph->program->output_types.size();
  });
}

namespace {
mstep_status* signature_type(const char* function, const mstep_compiled_graph* graph,
                             bool input, size_t index, mstep_dtype* out_dtype, int64_t* dims,
                             size_t capacity, size_t* out_rank) {
  return guard(function, [&] {
    check_compiled(graph);
    const auto& types = input ? graph->program->input_types : graph->program->output_types;
    if (index >= types.size())
      fail(MSTEP_OUT_OF_RANGE, absl::StrCat(input ? "input " : "output ", index,
                                            " does not exist; the graph has ", types.size()));
    write_type(types[index], out_dtype, dims, capacity, out_rank);
  });
}
}  // namespace

mstep_status* mstep_compiled_graph_input_type(const mstep_compiled_graph* graph, size_t index,
                                              mstep_dtype* out_dtype, int64_t* dims,
                                              size_t capacity, size_t* out_rank) {
  return signature_type(__func__, graph, true, index, out_dtype, dims, capacity, out_rank);
}

mstep_status* mstep_compiled_graph_output_type(const mstep_compiled_graph* graph, size_t index,
                                               mstep_dtype* out_dtype, int64_t* dims,
                                               size_t capacity, size_t* out_rank) {
  return signature_type(__func__, graph, false, index, out_dtype, dims, capacity, out_rank);
}

mstep_status* mstep_compiled_graph_run(mstep_compiled_graph* graph, mstep_tensor* const* inputs,
                                       size_t num_inputs, mstep_tensor** outputs,
                                       size_t num_outputs) {
  return guard(__func__, [&] {
    check_compiled(graph);
    const GraphProgram& program = *graph->program;
    std::vector<Tensor> args = tensors_of(inputs, num_inputs, "inputs", false);
    check_signature(program, args, "inputs");
    if (num_outputs != program.output_types.size())
      fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("the graph has ", program.output_types.size(),
                                                " outputs but num_outputs is ", num_outputs));
    if (num_outputs > 0) require_out(outputs, "outputs");
    std::vector<Tensor> results = program.record(args);
    run_as_one_graph(results);
    write_outputs(graph->context, results, outputs, num_outputs);
  });
}

}  // extern "C"
