// The composed attention's plan (CudaComposedAttention.h) for a form cuDNN
// cannot express (bf16 with dropout and left padding): which cuBLASLt
// steps (shapes, transposes, batch strides) and row kernels it is, in
// which order on which values; its [..., L, S] scratch at the arena's end,
// shared between the ops; the stored plan keeps it. Its numerics are
// cuda_attention_host_test's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/backends/cuda/CudaExecutable.h"
#include "lib/backends/cuda/CudaPlanFormat.h"
#include "test/cuda/CudaStepText.h"

namespace mstep::cuda {
namespace {

using ::testing::ElementsAre;
using testing::plan_of;
using ::testing::UnorderedElementsAre;

#define Q "tensor<2x2x8x16xbf16>"
#define K "tensor<2x2x12x16xbf16>"
#define V "tensor<2x2x12x24xbf16>"
#define O "tensor<2x2x8x24xbf16>"
#define OPTIONS                                                                                    \
  "{dropout_p = 1.000000e-01 : f64, padding_side = #mstep.padding_side<left>, rng_offset = 3 : "   \
  "i64, scale = 2.500000e-01 : f64}"

/// %0..%5 q k v g lengths rng; the forward's out %6 and scores %7; the
/// backward's dq %8, dk %9, dv %10, probs %11, dprobs %12.
constexpr const char* kStep = R"(
func.func @step(%q: )" Q R"(, %k: )" K R"(, %v: )" V R"(, %g: )" O R"(, %l: tensor<2xi32>,
                %rng: tensor<2xi64>) -> ()" O ", " Q ", " K ", " V R"() {
  %o = mstep.sdpa %q, %k, %v valid_seq_len(%l : tensor<2xi32>) rng(%rng) )" OPTIONS R"(
      : )" Q ", " K ", " V " -> " O R"(
  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v valid_seq_len(%l : tensor<2xi32>) rng(%rng)
      )" OPTIONS R"( : )" O ", " Q ", " K ", " V R"(
  return %o, %dq, %dk, %dv : )" O ", " Q ", " K ", " V R"(
}
)";

struct Gemm {
  int64_t m, n, k;
  bool ta, tb;
  int64_t a_stride, b_stride, c_stride;
  std::vector<int> args;
  int write;
};

TEST(CudaComposedAttentionPlan, MatmulsAndRowKernelsInOrderOnTheirValues) {
  auto plan = plan_of(kStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->attentions.empty());
  ASSERT_EQ(plan->launches.size(), 10u);
  // B·H = 4 batched products each; L 8, S 12, E 16, Ev 24.
  const std::vector<std::pair<int, Gemm>> gemms = {
      {0, {8, 12, 16, false, true, 128, 192, 96, {0, 1}, 7}},   // scores = q·kᵀ
      {2, {8, 24, 12, false, false, 96, 288, 192, {7, 2}, 6}},  // out = P'·v
      {3, {8, 12, 16, false, true, 128, 192, 96, {0, 1}, 11}},  // scores again
      {5, {8, 12, 24, false, true, 192, 288, 96, {3, 2}, 12}},  // dP' = g·vᵀ
      {7, {12, 24, 8, true, false, 96, 192, 288, {11, 3}, 10}}, // dv = P'ᵀ·g
      {8, {8, 16, 12, false, false, 96, 192, 128, {12, 1}, 8}}, // dq = dS·k
      {9, {12, 16, 8, true, false, 96, 128, 192, {12, 0}, 9}},  // dk = dSᵀ·q
  };
  for (const auto& [l, g] : gemms) {
    SCOPED_TRACE(::testing::Message() << "launch " << l);
    const CudaLaunchStep& launch = plan->launches[l];
    ASSERT_GE(launch.matmul, 0);
    const CudaMatmulInfo& m = plan->matmuls[launch.matmul];
    EXPECT_EQ(m.shape.dtype, DType::bf16);
    EXPECT_EQ(std::tie(m.shape.m, m.shape.n, m.shape.k), std::tie(g.m, g.n, g.k));
    EXPECT_EQ(m.shape.transpose_a, g.ta);
    EXPECT_EQ(m.shape.transpose_b, g.tb);
    EXPECT_EQ(m.batch, 4);
    EXPECT_EQ(std::tie(m.a_stride, m.b_stride, m.c_stride),
              std::tie(g.a_stride, g.b_stride, g.c_stride));
    EXPECT_EQ(launch.args, g.args);
    EXPECT_THAT(launch.writes, ElementsAre(g.write));
  }
  // The row kernels: the lengths and (forward, gradient) the RNG state,
  // and the scratch read and written in place.
  auto kernel = [&](int l) -> const CudaKernelInfo& {
    return plan->kernels[plan->launches[l].kernel];
  };
  EXPECT_EQ(kernel(1).origin, "mstep.sdpa #0: probabilities");
  // (A kernel takes its buffers in the order of their first use.)
  EXPECT_THAT(plan->launches[1].args, UnorderedElementsAre(4, 5, 7));
  EXPECT_THAT(plan->launches[1].writes, ElementsAre(7));
  EXPECT_EQ(kernel(4).origin, "mstep.sdpa_backward #1: probabilities");
  EXPECT_THAT(plan->launches[4].args, UnorderedElementsAre(4, 11));
  EXPECT_THAT(plan->launches[4].writes, ElementsAre(11));
  EXPECT_EQ(kernel(6).origin, "mstep.sdpa_backward #1: softmax backward");
  EXPECT_THAT(plan->launches[6].args, UnorderedElementsAre(5, 11, 12));
  EXPECT_THAT(plan->launches[6].writes, UnorderedElementsAre(11, 12));
  for (int l : {1, 4, 6}) {
    // One lane per score row: 32 rows, one block of 256 threads.
    EXPECT_THAT(kernel(l).grid, ElementsAre(1u, 1u, 1u));
    EXPECT_EQ(kernel(l).cubins.size(), 2u);
  }
  for (int v : {7, 11, 12})
    EXPECT_EQ(plan->values[v], (TensorType{Shape({2, 2, 8, 12}), DType::bf16}));
}

TEST(CudaComposedAttentionPlan, TheScratchIsOneRegionAtTheArenasEndSharedByTheOps) {
  auto plan = plan_of(kStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t scores = plan->arena_offsets[7], probs = plan->arena_offsets[11],
                dprobs = plan->arena_offsets[12];
  const int64_t bytes = 2 * 2 * 8 * 12 * 2; // 768
  // The forward's scores and the backward's probs: the same bytes, live
  // in turn; the backward's two apart.
  EXPECT_EQ(scores, probs);
  EXPECT_GE(scores, 0);
  EXPECT_TRUE(probs + bytes <= dprobs || dprobs + bytes <= probs) << probs << " " << dprobs;
  EXPECT_EQ(plan->arena_bytes, std::max(probs, dprobs) + bytes);
  // The step's results are returned in buffers of their own.
  for (int v : {6, 8, 9, 10}) EXPECT_EQ(plan->arena_offsets[v], -1) << v;
  EXPECT_TRUE(validate_cuda_plan(*plan).ok()) << validate_cuda_plan(*plan);
}

TEST(CudaComposedAttentionPlan, TheStoredPlanKeepsIt) {
  auto plan = plan_of(kStep);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string blob = serialize_cuda_plan(*plan);
  auto back = deserialize_cuda_plan(blob);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == *plan) << describe_cuda_plan(*back);
}

} // namespace
} // namespace mstep::cuda
