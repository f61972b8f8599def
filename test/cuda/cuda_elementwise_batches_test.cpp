// Elementwise batches (CudaElementwiseBatches.h, with
// MSTEP_CUDA_ROW_REDUCTION=fused): independent casts and products of an
// autocast step in one launch. A member's element is its own kernel's
// scalar forms, so the batch gives the bytes of a kernel per op, and the
// casts and the product give ref's; the views that read a member (a
// weight's transpose) move after the batch, and the run ends at the first
// op that launches something reading a member.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test/cuda/HostVsRef.h"
#include "test/cuda/TiledHost.h"

namespace mstep::cuda {
namespace {

using ::testing::HasSubstr;

// Two weights and a bias cast to bf16 for an autocast MLP (the first
// weight read transposed), a weight scaled by a scalar (returned), and the
// matmuls that read the casts.
constexpr const char* kAutocastMlp = R"(
func.func @step(%w1: tensor<32x64xf32>, %w2: tensor<32x16xf32>, %b: tensor<16xf32>,
                %x: tensor<8x64xbf16>, %s: tensor<f32>) -> (tensor<8x16xbf16>, tensor<32x16xf32>) {
  %c1 = mstep.fusion ins(%w1 : tensor<32x64xf32>) -> tensor<32x64xbf16> {
  ^bb0(%a: tensor<32x64xf32>):
    %0 = mstep.cast %a : tensor<32x64xf32> -> tensor<32x64xbf16>
    mstep.yield %0 : tensor<32x64xbf16>
  }
  %t1 = mstep.permute %c1 {perm = array<i64: 1, 0>} : tensor<32x64xbf16> -> tensor<64x32xbf16>
  %c2 = mstep.cast %w2 : tensor<32x16xf32> -> tensor<32x16xbf16>
  %cb = mstep.cast %b : tensor<16xf32> -> tensor<16xbf16>
  %scaled = mstep.mul %w2, %s : tensor<32x16xf32>, tensor<f32> -> tensor<32x16xf32>
  %h = mstep.matmul %x, %t1 : tensor<8x64xbf16>, tensor<64x32xbf16> -> tensor<8x32xbf16>
  %y = mstep.matmul %h, %c2 : tensor<8x32xbf16>, tensor<32x16xbf16> -> tensor<8x16xbf16>
  %z = mstep.add %y, %cb : tensor<8x16xbf16>, tensor<16xbf16> -> tensor<8x16xbf16>
  return %z, %scaled : tensor<8x16xbf16>, tensor<32x16xf32>
}
)";

/// The plan of kAutocastMlp under `form`, run on the host.
struct MlpRun {
  CudaPlan plan;
  std::vector<std::vector<char>> outputs;
};
MlpRun run(CudaRowReduction form, const std::vector<std::vector<char>>& inputs,
        std::vector<std::vector<char>>* ref = nullptr) {
  CudaCompileOptions options = default_cuda_compile_options();
  options.codegen.row_reduction = form;
  testing::CudaStepContext step(kAutocastMlp);
  auto compiled = compile_cuda_step(step.module(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  if (!compiled.ok()) return {};
  std::vector<std::vector<char>> values;
  for (const TensorType& type : compiled->plan.values) values.emplace_back(type.bytes(), char{0x7f});
  for (size_t i = 0; i < inputs.size(); ++i) values[i] = inputs[i];
  testing::run_plan_on_host(step.context(), *compiled, values);
  MlpRun r;
  for (int id : compiled->plan.outputs) r.outputs.push_back(values[id]);
  r.plan = std::move(compiled->plan);
  if (ref) {
    auto want = testing::ref_outputs(step.module(), inputs);
    EXPECT_TRUE(want.ok()) << want.status();
    if (want.ok()) *ref = std::move(*want);
  }
  return r;
}

std::vector<std::vector<char>> inputs() {
  return {testing::random_bytes(32 * 64, 1), testing::random_bytes(32 * 16, 2),
          testing::random_bytes(16, 3), testing::bf16_bytes(8 * 64, 4),
          testing::random_bytes(1, 5)};
}

/// The plan's kernel launches, and their origins.
std::vector<std::string> kernel_origins(const CudaPlan& plan) {
  std::vector<std::string> origins;
  for (const CudaLaunchStep& launch : plan.launches)
    if (launch.matmul < 0 && launch.attention < 0 && launch.collective < 0)
      origins.push_back(plan.kernels[launch.kernel].origin);
  return origins;
}

TEST(CudaElementwiseBatches, IndependentCastsAreOneLaunchWithTheBytesOfOnePerOp) {
  std::vector<std::vector<char>> ref;
  const MlpRun fused = run(CudaRowReduction::fused, inputs(), &ref);
  const MlpRun block = run(CudaRowReduction::block, inputs());
  // The casts and the product: one launch before the matmuls (the bias
  // add is the second matmul's epilogue).
  const std::vector<std::string> origins = kernel_origins(fused.plan);
  ASSERT_EQ(origins.size(), 1u) << ::testing::PrintToString(origins);
  EXPECT_THAT(origins[0], HasSubstr("elementwise batch"));
  EXPECT_THAT(origins[0], HasSubstr("2 mstep.cast"));
  EXPECT_EQ(kernel_origins(block.plan).size(), 4u);
  ASSERT_EQ(fused.outputs.size(), 2u);
  ASSERT_EQ(block.outputs.size(), 2u);
  for (size_t o = 0; o < 2; ++o) EXPECT_TRUE(fused.outputs[o] == block.outputs[o]) << "output " << o;
  // The scaled weight is exact arithmetic of ref's (one f32 product).
  ASSERT_EQ(ref.size(), 2u);
  EXPECT_TRUE(fused.outputs[1] == ref[1]);
}

} // namespace
} // namespace mstep::cuda
