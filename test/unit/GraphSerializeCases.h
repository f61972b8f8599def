// Real graphs for the serialization tests: the mnist-like MLP's training
// step (Linear, ReLU, Dropout, Linear, log_softmax, NLL, backward, Adam)
// as traced and as the pipeline leaves it (with fusion bodies).
#pragma once

#include <memory>

#include "examples/models/Mlp.h"
#include "lib/backends/ref/RefExecutableFormat.h"
#include "lib/compiler/Compiler.h"
#include "mstep/mstep.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/TestUtil.h"

namespace mstep::testing {

/// A step's graph as the tracer cut it, and the buffers it ran on.
struct RecordedStep {
  std::shared_ptr<const TraceGraph> graph;
  std::vector<BufferPtr> inputs;
};

/// Traces one training step of a small MLP on `device`: its graph has
/// parameters, optimizer state, the rng state (dropout) and donated inputs
/// (the in-place Adam update).
inline RecordedStep mlp_training_step(Device device) {
  const Device saved = default_device();
  set_default_device(device);
  auto model = std::make_shared<examples::Mlp>(12, 16, 4, 0.25);
  optim::Adam opt(model->parameters(), {.lr = 1e-2});
  Tensor x = filled({6, 12}, 1).to(device);
  Tensor y = from_vector(std::vector<int64_t>{0, 1, 2, 3, 0, 1}, {6}).to(device);
  mark_step();
  // One warm-up step, so the optimizer's state exists and is donated.
  for (int step = 0; step < 2; ++step) {
    Tracer::get().set_record_steps(step == 1);
    opt.zero_grad();
    nll_loss(model->forward(x), y).backward();
    opt.step();
    mark_step();
  }
  const StepRecord& last = Tracer::get().last_step();
  RecordedStep recorded{last.graph, last.inputs};
  Tracer::get().set_record_steps(false);  // forgets last_step()
  set_default_device(saved);
  return recorded;
}

inline std::shared_ptr<const TraceGraph> mlp_training_step_graph(Device device) {
  return mlp_training_step(device).graph;
}

/// `graph` after the pass pipeline (fusion regions formed), as the ref
/// backend exports it.
inline TraceGraph optimized_graph(const TraceGraph& graph) {
  Backend* ref = *BackendRegistry::get(DeviceType::ref);
  auto compiled = compile_graph(graph, *ref, {}, RuntimeOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  auto blob = compiled->executable->serialize("");
  EXPECT_TRUE(blob.ok()) << blob.status();
  auto exported = ref::read_ref_executable(*blob);
  EXPECT_TRUE(exported.ok()) << exported.status();
  return exported.ok() ? *std::move(exported) : TraceGraph{};
}

}  // namespace mstep::testing
