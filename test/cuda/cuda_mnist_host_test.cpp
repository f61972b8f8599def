// mnist_mlp's whole training step compiled for cuda and run on this CPU:
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

/// The step's inputs: floats in (0, 1) (so Adadelta's averages of
/// squares are positive), integers 1 (a valid class, a step count, an RNG
/// state), as fuse_optimizer_test feeds its training graphs.
std::vector<std::vector<char>> step_inputs(const CudaPlan& plan) {
  std::vector<std::vector<char>> inputs;
  for (size_t i = 0; i < plan.num_inputs; ++i) {
    const TensorType& type = plan.values[i];
    std::vector<char> bytes(type.bytes());
    for (int64_t k = 0; k < type.numel(); ++k) {
      const double unit = ((k * 13 + i * 7) % 89 + 5) / 100.0;
      if (type.dtype == DType::f32) {
        const float v = static_cast<float>(unit);
        std::memcpy(bytes.data() + k * 4, &v, 4);
      } else if (type.dtype == DType::f64) {
        std::memcpy(bytes.data() + k * 8, &unit, 8);
      } else {
        EXPECT_EQ(type.dtype, DType::i64) << "input " << i;
        const int64_t one = 1;
        std::memcpy(bytes.data() + k * 8, &one, 8);
      }
    }
    inputs.push_back(std::move(bytes));
  }
  return inputs;
}

TEST(CudaMnistHost, TheWholeStepsLoopNestsOnTheHostMatchRef) {
  testing::CudaStepContext step(nullptr);
  mlir::OwningOpRef<mlir::ModuleOp> module = testing::pipelined(testing::mnist_step_graph(), step);
  ASSERT_TRUE(module);
  auto compiled = compile_cuda_step(*module, default_cuda_compile_options());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const CudaPlan& plan = compiled->plan;
  const std::vector<std::vector<char>> inputs = step_inputs(plan);
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
    // The matmuls here accumulate in another order than ref's: close, not
    // equal.
    const float* g = testing::as<float>(got);
    const float* w = testing::as<float>(want);
    int wrong = 0;
    for (int64_t k = 0; k < type.numel(); ++k)
      if (!(std::fabs(g[k] - w[k]) <= 1e-5f * (1 + std::fabs(w[k]))) && wrong++ < 3)
        ADD_FAILURE() << "output " << o << " " << type.to_string() << " [" << k << "] = " << g[k]
                      << ", ref " << w[k];
  }
}

} // namespace
} // namespace mstep::cuda
