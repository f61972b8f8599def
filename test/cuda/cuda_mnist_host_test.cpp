// mnist_mlp's and GPT-mini's whole training steps (f32; GPT-mini's
// attention composed of cuBLASLt steps and kernels of our own) compiled
// for cuda and run on this CPU:
// every launch of the plan in order, each op's tiled loop nest through the
// host JIT and each cuBLASLt step as a plain loop here; every output (the
// loss, the gradients, the updated parameters, Adadelta's states and
// counters) is compared with the ref backend's run of the same step on
// the same inputs. It checks the plan itself (value ids, temporaries,
// launch order) besides each kernel's numerics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "test/cuda/RefOracle.h"
#include "test/cuda/TiledHost.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

/// `graph`'s step compiled for cuda and run on the host in plan order,
/// against ref on the same inputs (integers in [1, max_integer]): floats
/// within tolerance * (1 + |ref|), the rest equal.
void expect_step_on_host_matches_ref(const TraceGraph& graph, int64_t max_integer,
                                     float tolerance) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(graph, step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  const std::vector<std::vector<char>> inputs = testing::step_inputs(plan, max_integer);
  auto ref = testing::ref_outputs(*module, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();

  std::vector<std::vector<char>> values;
  for (const TensorType& type : plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  ASSERT_NO_FATAL_FAILURE(testing::run_plan_on_host(step.context(), *compiled, values));

  ASSERT_EQ(plan.outputs.size(), ref->size());
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    const TensorType& type = plan.values[plan.outputs[o]];
    const std::vector<char>& got = values[plan.outputs[o]];
    const std::vector<char>& want = (*ref)[o];
    ASSERT_EQ(got.size(), want.size()) << "output " << o;
    if (type.dtype != DType::f32) {
      EXPECT_TRUE(got == want) << "output " << o << " " << type.to_string();
      continue;
    }
    // The matmuls here accumulate in another order than ref's, and the
    // composed attention rounds its intermediates to f32: close, not equal.
    const float* g = testing::as<float>(got);
    const float* w = testing::as<float>(want);
    int wrong = 0;
    for (int64_t k = 0; k < type.numel(); ++k)
      if (!(std::fabs(g[k] - w[k]) <= tolerance * (1 + std::fabs(w[k]))) && wrong++ < 3)
        ADD_FAILURE() << "output " << o << " " << type.to_string() << " [" << k << "] = " << g[k]
                      << ", ref " << w[k];
  }
}

TEST(CudaMnistHost, TheWholeStepsLoopNestsOnTheHostMatchRef) {
  expect_step_on_host_matches_ref(testing::mnist_step_graph(), 1, 1e-5f);
}

TEST(CudaGptHost, TheWholeF32StepWithItsComposedAttentionOnTheHostMatchesRef) {
  // Tokens and sequence lengths in [1, 16]: some batch rows padded. The
  // attention's scores, probabilities and dS are f32 here (f64 in ref),
  // and the backward's dS = P·(dP - Σ P·dP) cancels: the worst error seen
  // is 1.9e-5 (a logit of 11.9; small gradients that are sums of larger
  // terms, such as the layer norms' biases, are off by up to 1.4e-5),
  // where dropping the causal rule moves the logits by 5e-3 (ten times
  // the bound) and gradients by 3%.
  expect_step_on_host_matches_ref(testing::gpt_step_graph(), 16, 5e-5f);
}

} // namespace
} // namespace mstep::cuda
