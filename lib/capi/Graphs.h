// The handle structs of graph builders, compiled graphs and captured graphs
// (shared by the C API files that create and use them).
#pragma once

#include <memory>
#include <vector>

#include "lib/capi/GraphProgram.h"
#include "lib/capi/Handles.h"
#include "mstep/runtime/Graph.h"

struct mstep_graph_builder : mstep::capi::HandleBase {
  explicit mstep_graph_builder(mstep_context* c)
      : HandleBase(mstep::capi::HandleKind::builder), context(c),
        state(std::make_shared<mstep::capi::BuilderState>()) {}
  void drop_payload() override { state.reset(); }
  mstep_context* context;
  std::shared_ptr<mstep::capi::BuilderState> state;
};

struct mstep_compiled_graph : mstep::capi::HandleBase {
  mstep_compiled_graph(mstep_context* c, std::shared_ptr<const mstep::capi::GraphProgram> p)
      : HandleBase(mstep::capi::HandleKind::compiled), context(c), program(std::move(p)) {}
  void drop_payload() override { program.reset(); }
  mstep_context* context;
  std::shared_ptr<const mstep::capi::GraphProgram> program;
};

struct mstep_captured_graph : mstep::capi::HandleBase {
  explicit mstep_captured_graph(mstep_context* c)
      : HandleBase(mstep::capi::HandleKind::captured), context(c) {}
  void drop_payload() override;
  mstep_context* context;
  mstep::Graph graph;
  /// Set for a capture of a compiled graph (mstep_compiled_graph_capture):
  /// its program, and the fixed tensors inputs are copied into and outputs
  /// read from.
  std::shared_ptr<const mstep::capi::GraphProgram> program;
  std::vector<mstep::Tensor> static_inputs;
  std::vector<mstep::Tensor> static_outputs;
  /// A capture begun by mstep_capture_begin and not yet ended or aborted.
  bool capturing = false;
};

namespace mstep::capi {

/// Materializes `tensors` as one graph through the module cache.
void run_as_one_graph(const std::vector<Tensor>& tensors);

}  // namespace mstep::capi
