// A step in the mstep dialect compiled for cuda and its plan (tiled loop
// nests, cuBLASLt steps as host GEMMs) run on the host in plan order
// (TiledHost.h): what the host-numerics
// tests of the kernel forms (row and column reductions) compare with ref.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "test/cuda/CudaStepText.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda::testing {

struct HostStepRun {
  CudaPlan plan;
  std::vector<std::vector<char>> outputs; ///< the plan's outputs' bytes
  std::vector<std::string> tiled;         ///< each op's tiled loop nest
};

/// `text` compiled with `options`, run on `inputs` (every other value
/// starts as 0x7f bytes, so that an element nothing writes shows); run
/// again with its parallel loops backwards (the same bytes expected) and
/// with the other values starting as 0xff bytes (the same outputs).
inline HostStepRun run_step_on_host(const char* text, const std::vector<std::vector<char>>& inputs,
                                    const CudaCompileOptions& options) {
  HostStepRun run;
  CudaStepContext step(text);
  auto compiled = compile_cuda_step(step.module(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return run;
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values)
    values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  std::vector<std::vector<char>> backward = values, poisoned = values;
  for (size_t v = inputs.size(); v < poisoned.size(); ++v)
    std::fill(poisoned[v].begin(), poisoned[v].end(), char(0xff));
  run_plan_on_host(step.context(), *compiled, values);
  {
    // Again with every parallel loop backwards: the same bytes, or a
    // kernel races on the GPU (cuda_host_races_test.cpp).
    ScopedReversedParallelLoops reversed;
    run_plan_on_host(step.context(), *compiled, backward);
    expect_the_same_bytes(compiled->plan, values, backward, "the step");
  }
  // And with every other value NaN bytes at first: the same outputs.
  run_plan_on_host(step.context(), *compiled, poisoned);
  expect_no_unwritten_reads(compiled->plan, values, poisoned, "the step");
  for (int id : compiled->plan.outputs) run.outputs.push_back(values[id]);
  for (const TiledOp& op : compiled->tiled) run.tiled.push_back(op.module);
  run.plan = std::move(compiled->plan);
  return run;
}

} // namespace mstep::cuda::testing
