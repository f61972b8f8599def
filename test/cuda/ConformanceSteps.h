// The backend conformance suite's cases (test/unit/ConformanceCases.h) as
// steps for the cuda compile half's tests: each case's training step
// (forward, and backward of the conformance driver's weighted loss where
// the case checks gradients) traced and run on ref, with the graph ref ran
// and the bytes of its inputs and results.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mstep/mstep.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Tracer.h"
#include "test/unit/ConformanceCases.h"

namespace mstep::cuda::testing {

/// The conformance tests on cuda run in shards, which ctest runs in
/// parallel: case i of all_cases_with_f16() is shard i % kConformanceShards's
/// (the compile test's shards and the host test's hold the same cases).
constexpr int kConformanceShards = 6;

/// The cases of all_cases_with_f16() that `shard` holds, in order.
inline std::vector<const conformance::ConformanceCase*> conformance_shard(int shard) {
  std::vector<const conformance::ConformanceCase*> cases;
  const std::vector<conformance::ConformanceCase>& all = conformance::all_cases_with_f16();
  for (size_t i = shard; i < all.size(); i += kConformanceShards) cases.push_back(&all[i]);
  return cases;
}

/// A case's last step as ref ran it.
struct RefStep {
  std::shared_ptr<const TraceGraph> graph;
  std::vector<std::vector<char>> inputs, results;
};

/// Runs `c`'s training step on ref, recording it; nullopt when the case
/// throws there (a case that checks an error) or records no graph.
inline std::optional<RefStep> run_case_on_ref(const conformance::ConformanceCase& c) {
  const Device ref{DeviceType::ref, 0};
  Tracer& tracer = Tracer::get();
  tracer.set_record_steps(true);
  std::optional<RefStep> step;
  try {
    manual_seed(1234);
    conformance::Inputs in;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      in.push_back(conformance::make_input(c.inputs[i], i, ref));
    conformance::Outputs out = c.fn(in, ref);
    if (c.check_grads)
      if (Tensor loss = conformance::weighted_loss(out, ref); loss.defined()) loss.backward();
    mark_step();
    const StepRecord& record = tracer.last_step();
    if (record.graph && !record.graph->nodes.empty()) {
      Backend* backend = *BackendRegistry::get(DeviceType::ref);
      step.emplace();
      step->graph = record.graph;
      for (const auto* list : {&record.inputs, &record.results})
        for (const BufferPtr& buffer : *list) {
          std::vector<char> bytes(buffer->type().bytes());
          if (!backend->copy_out(*buffer, bytes.data(), bytes.size()).ok()) return std::nullopt;
          (list == &record.inputs ? step->inputs : step->results).push_back(std::move(bytes));
        }
    }
  } catch (const std::exception&) {
    mark_step();
    step.reset();
  }
  tracer.set_record_steps(false);
  return step;
}

} // namespace mstep::cuda::testing
