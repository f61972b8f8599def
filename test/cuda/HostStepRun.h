// A step in the mstep dialect compiled for cuda and its plan (tiled loop
// nests, cuBLASLt steps as host GEMMs) run on the host in plan order
// (TiledHost.h): what the host-numerics
// tests of the kernel forms (row and column reductions) compare with ref.
#pragma once

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
  values = run_plan_on_host_checked(step.context(), *compiled, values, "the step");
  for (int id : compiled->plan.outputs) run.outputs.push_back(values[id]);
  for (const TiledOp& op : compiled->tiled) run.tiled.push_back(op.module);
  run.plan = std::move(compiled->plan);
  return run;
}

} // namespace mstep::cuda::testing
