// A whole training step compiled for cuda and run on this CPU in plan
// order (TiledHost.h), every output compared with the ref backend's run
// of the same step on the same inputs. Shared by the host-numerics tests
// of whole steps (mnist_mlp, GPT-mini, DDP's buckets).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda::testing {

/// How a float output of a host run is compared with ref's.
enum class HostTolerance {
  per_element,  ///< each element within tolerance * (1 + |ref|)
  of_largest,   ///< each element within tolerance * the output's largest |ref|
};

/// `graph`'s step compiled for cuda and run on the host in plan order,
/// against ref on the same inputs (step_inputs: integers in [1,
/// max_integer]; with `centred_parameters`, the parameters centred on 0):
/// floats within `tolerance` (`kind`), the rest equal. `compiled`, when given,
/// gets the compiled step (for checks of the plan). `load`, when given,
/// changes the plan before it runs (to the plan an executable runs, with
/// its epilogue fallbacks).
inline void expect_step_on_host_matches_ref(
    const TraceGraph& graph, int64_t max_integer, float tolerance,
    CompiledCudaStep* compiled_out = nullptr,
    const std::function<void(CompiledCudaStep&)>& load = nullptr,
    HostTolerance kind = HostTolerance::per_element, bool centred_parameters = false) {
  CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = pipelined(graph, step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  if (load) ASSERT_NO_FATAL_FAILURE(load(*compiled));
  const CudaPlan& plan = compiled->plan;
  ASSERT_TRUE(!centred_parameters || graph.input_roles.size() == plan.num_inputs)
      << graph.input_roles.size() << " input roles for " << plan.num_inputs << " inputs";
  const std::vector<std::vector<char>> inputs = step_inputs(
      plan, max_integer, centred_parameters ? graph.input_roles : std::vector<InputRole>{});
  auto ref = ref_outputs(*module, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();

  std::vector<std::vector<char>> values = host_values(plan, inputs);
  ASSERT_NO_FATAL_FAILURE(run_plan_on_host(step.context(), *compiled, values));

  ASSERT_EQ(plan.outputs.size(), ref->size());
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const TensorType& type = plan.values[plan.outputs[o]];
    const std::vector<char>& got = values[plan.outputs[o]];
    const std::vector<char>& want = (*ref)[o];
    ASSERT_EQ(got.size(), want.size()) << "output " << o;
    // 16-bit floats are compared as numbers under of_largest only (a
    // bf16 step's logits); otherwise every output but f32 is exact.
    const bool half = type.dtype == DType::bf16 || type.dtype == DType::f16;
    if (type.dtype != DType::f32 && !(half && kind == HostTolerance::of_largest)) {
      EXPECT_TRUE(got == want) << "output " << o << " " << type.to_string();
      continue;
    }
    // The matmuls here accumulate in another order than ref's, and the
    // composed attention rounds its intermediates to f32: close, not equal.
    std::vector<float> g(type.numel()), w(type.numel());
    for (int64_t k = 0; k < type.numel(); ++k) {
      g[k] = load_element(got.data(), k, type.dtype);
      w[k] = load_element(want.data(), k, type.dtype);
    }
    float largest = 0;
    for (int64_t k = 0; k < type.numel(); ++k) largest = std::max(largest, std::fabs(w[k]));
    auto bound = [&](float ref) {
      return kind == HostTolerance::of_largest ? tolerance * largest
                                               : tolerance * (1 + std::fabs(ref));
    };
    int wrong = 0;
    for (int64_t k = 0; k < type.numel(); ++k)
      if (!(std::fabs(g[k] - w[k]) <= bound(w[k])) && wrong++ < 3)
        ADD_FAILURE() << "output " << o << " " << type.to_string() << " [" << k << "] = " << g[k]
                      << ", ref " << w[k];
  }
  if (compiled_out != nullptr) *compiled_out = std::move(*compiled);
}

}  // namespace mstep::cuda::testing
