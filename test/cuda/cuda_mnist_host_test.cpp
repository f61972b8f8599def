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

#include "test/cuda/HostStepCheck.h"
#include "test/cuda/TrainingSteps.h"

namespace mstep::cuda {
namespace {

/// The plan as it runs where every cuBLASLt epilogue takes its fallback
/// kernels (which round as ref does).
void take_every_epilogue_fallback(CompiledCudaStep& compiled) {
  std::vector<int> with_fallback;
  for (size_t m = 0; m < compiled.plan.matmuls.size(); ++m)
    if (!compiled.plan.matmuls[m].fallback.empty()) with_fallback.push_back(static_cast<int>(m));
  ASSERT_FALSE(with_fallback.empty());
  apply_epilogue_fallbacks(compiled.plan, with_fallback);
}

TEST(CudaMnistHost, TheWholeStepsLoopNestsOnTheHostMatchRef) {
  testing::expect_step_on_host_matches_ref(testing::mnist_step_graph(), 1, 1e-5f);
}

TEST(CudaGptHost, TheWholeF32StepWithItsComposedAttentionOnTheHostMatchesRef) {
  // Tokens and sequence lengths in [1, 16]: some batch rows padded. The
  // attention's scores, probabilities and dS are f32 here (f64 in ref),
  // and the backward's dS = P·(dP - Σ P·dP) cancels: the worst error seen
  // is 1.9e-5 (a logit of 11.9; small gradients that are sums of larger
  // terms, such as the layer norms' biases, are off by up to 1.4e-5),
  // where dropping the causal rule moves the logits by 5e-3 (ten times
  // the bound) and gradients by 3%.
  testing::expect_step_on_host_matches_ref(testing::gpt_step_graph(), 16, 5e-5f);
}

TEST(CudaGptHost, TheWholeBf16AutocastStepWithItsCudnnAttentionOnTheHostMatchesRef) {
  // As gpt_train --autocast bf16: bf16 cuBLASLt matmuls, cuDNN attention
  // reading and writing the heads at the projections' strides (run as
  // HostSdpa.h does, which also checks that the backward is given the
  // forward's out and stats), the fused row groups and batches. The bias
  // epilogues run as their fallback kernels, which round the product and
  // then the sum as ref does (a cuBLASLt epilogue adds in f32 and rounds
  // once: a bf16 ulp apart, an intended difference). The parameters are
  // centred on 0, as a model's are. Every output then equals ref's
  // (2026-11-27); the bound, one bf16 ulp of an output's largest value
  // (2^-8 of it), leaves room for one rounding that a sum in another
  // order flips. With all-positive weights instead the activations grow
  // and such flips spread to 7% of the logits. A miswired view or stride
  // moves outputs by their whole size.
  testing::expect_step_on_host_matches_ref(
      testing::gpt_bf16_step_graph(), 16, std::ldexp(1.0f, -8), nullptr,
      take_every_epilogue_fallback,
      testing::HostTolerance::of_largest, /*centred_parameters=*/true);
}

TEST(CudaGptHost, TheBenchsBf16StepOnTheHostMatchesRef) {
  // The step the GPU check's bench times (dim 256, 4 layers, seq 256,
  // batch 8: today 58 kernel launches, 51 cuBLASLt calls, 8 cuDNN steps), the
  // same way as above. Its sums of 256 and 1024 products, taken in double
  // here and in f32 by ref, flip some bf16 roundings, which the layers
  // carry on: worst 0.62% of an output's largest value (2026-11-27), the
  // bf16 logits 0.44%. Bound: the GPU check's for bf16 steps, 2e-2 of the
  // largest value. About 45 s on one core.
  testing::expect_step_on_host_matches_ref(
      testing::gpt_bench_bf16_step_graph(), 256, 2e-2f, nullptr,
      take_every_epilogue_fallback,
      testing::HostTolerance::of_largest, /*centred_parameters=*/true);
}

} // namespace
} // namespace mstep::cuda
