// C API: capture and replay — whole training steps (mstep_capture_begin ...
// end, then replay) and captured compiled graphs (copy in, replay, read out).
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/capi/Graphs.h"
#include "mstep/runtime/TensorImpl.h"

using namespace mstep;
using namespace mstep::capi;

void mstep_captured_graph::drop_payload() {
  if (capturing) graph.capture_abort();
  capturing = false;
  graph = Graph();
  program.reset();
  static_inputs.clear();
  static_outputs.clear();
}

namespace {

void check_captured(const mstep_captured_graph* c) {
  check_handle(c, HandleKind::captured, "captured");
}

/// A new tensor sharing `t`'s current buffer: it keeps this replay's value
/// when a later replay binds `t` to new results.
Tensor snapshot(const Tensor& t) {
  auto impl = TensorImpl::make(t.type(), t.device());
  impl->set_buffer(t.impl()->buffer());
  return Tensor(std::move(impl));
}

}  // namespace

extern "C" {

mstep_status* mstep_compiled_graph_capture(mstep_compiled_graph* graph,
                                           mstep_captured_graph** out_captured) {
  return guard(__func__, [&] {
    check_handle(graph, HandleKind::compiled, "graph");
    require_out(out_captured, "out_captured");
    const GraphProgram& program = *graph->program;
    std::unique_ptr<mstep_captured_graph> captured(new mstep_captured_graph(graph->context));
    captured->program = graph->program;
    for (const TensorType& type : program.input_types)
      captured->static_inputs.push_back(detail::materialized_zeros(type, program.device));
    captured->graph.capture_begin();
    try {
      captured->static_outputs = program.record(captured->static_inputs);
      run_as_one_graph(captured->static_outputs);
      captured->graph.capture_end();
    } catch (...) {
      captured->graph.capture_abort();
      throw;
    }
    ++graph->context->live_handles;
    *out_captured = captured.release();
  });
}

mstep_status* mstep_capture_begin(mstep_context* context, mstep_captured_graph** out_captured) {
  return guard(__func__, [&] {
    check_handle(context, HandleKind::context, "context");
    require_out(out_captured, "out_captured");
    std::unique_ptr<mstep_captured_graph> captured(new mstep_captured_graph(context));
    captured->graph.capture_begin();
    captured->capturing = true;
    ++context->live_handles;
    *out_captured = captured.release();
  });
}

mstep_status* mstep_captured_graph_end(mstep_captured_graph* captured) {
  return guard(__func__, [&] {
    check_captured(captured);
    if (!captured->capturing)
      fail(MSTEP_FAILED_PRECONDITION,
           "the graph is not capturing (already ended, aborted, or made by "
           "mstep_compiled_graph_capture)");
    captured->graph.capture_end();  // on failure the capture stays open: abort it
    captured->capturing = false;
  });
}

mstep_status* mstep_captured_graph_abort(mstep_captured_graph* captured) {
  return guard(__func__, [&] {
    check_captured(captured);
    if (!captured->capturing) fail(MSTEP_FAILED_PRECONDITION, "the graph is not capturing");
    captured->graph.capture_abort();
    captured->capturing = false;
  });
}

mstep_status* mstep_captured_graph_replay(mstep_captured_graph* captured) {
  return guard(__func__, [&] {
    check_captured(captured);
    if (captured->program)
      fail(MSTEP_FAILED_PRECONDITION,
           "this capture of a compiled graph takes its inputs through "
           "mstep_captured_graph_run");
    if (captured->capturing)
      fail(MSTEP_FAILED_PRECONDITION, "the capture is still open; call mstep_captured_graph_end");
    captured->graph.replay();
  });
}

mstep_status* mstep_captured_graph_run(mstep_captured_graph* captured,
                                       mstep_tensor* const* inputs, size_t num_inputs,
                                       mstep_tensor** outputs, size_t num_outputs) {
  return guard(__func__, [&] {
    check_captured(captured);
    if (!captured->program)
      fail(MSTEP_FAILED_PRECONDITION,
           "this capture of a training step reads its inputs from the tensors it captured; "
           "fill them with mstep_tensor_copy_ and call mstep_captured_graph_replay");
    std::vector<Tensor> args = tensors_of(inputs, num_inputs, "inputs", false);
    check_signature(*captured->program, args, "inputs");
    if (num_outputs != captured->static_outputs.size())
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat("the graph has ", captured->static_outputs.size(),
                        " outputs but num_outputs is ", num_outputs));
    if (num_outputs > 0) require_out(outputs, "outputs");
    run_as_one_graph(args);  // a pending input is computed first: the copy is then a rebind
    for (size_t i = 0; i < args.size(); ++i) captured->static_inputs[i].copy_(args[i]);
    captured->graph.replay();
    for (size_t i = 0; i < num_outputs; ++i)
      outputs[i] = new_tensor(captured->context, snapshot(captured->static_outputs[i]));
  });
}

mstep_status* mstep_captured_graph_stats(const mstep_captured_graph* captured,
                                         size_t* out_segments, size_t* out_kernels) {
  return guard(__func__, [&] {
    check_captured(captured);
    if (out_segments) *out_segments = captured->graph.num_segments();
    if (out_kernels) *out_kernels = captured->graph.num_kernels();
  });
}

mstep_status* mstep_captured_graph_release(mstep_captured_graph* captured) {
  if (captured == nullptr) return nullptr;
  return guard(__func__, [&] {
    release_owned(captured, HandleKind::captured, "captured");
  });
}

}  // extern "C"
