// Autocast: matrix products and attention run in bf16 inside the scope,
// parameters keep f32 and get f32 gradients, and a short training run
// stays close to the f32 run (bf16 tolerance) on ref and on cpu.
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using testing::filled;

TEST(Autocast, CoveredOpsRunInBf16OnlyInsideTheScope) {
  Tensor a = filled({4, 8}, 1), b = filled({8, 3}, 2);
  EXPECT_FALSE(autocast_dtype().has_value());
  {
    auto scope = autocast(DType::bf16);
    EXPECT_EQ(autocast_dtype(), DType::bf16);
    EXPECT_EQ(matmul(a, b).dtype(), DType::bf16);
    EXPECT_EQ(linear(a, filled({5, 8}, 3), filled({5}, 4)).dtype(), DType::bf16);
    Tensor q = filled({1, 2, 4, 8}, 5);
    EXPECT_EQ(scaled_dot_product_attention(q, q, q).dtype(), DType::bf16);
    EXPECT_EQ((a + 1.0).dtype(), DType::f32);  // not covered: stays f32
    {
      AutocastScope off(std::nullopt);
      EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
    }
  }
  EXPECT_EQ(matmul(a, b).dtype(), DType::f32);
}

TEST(Autocast, RejectsANonHalfDtype) {
  EXPECT_THAT(testing::error_of([] { auto s = autocast(DType::f64); }),
              ::testing::HasSubstr("Use DType::bf16"));
}

/// Three SGD steps of a linear model, under autocast or not.
std::vector<float> train(Device device, bool bf16) {
  Tensor w = from_vector(testing::values(filled({6, 4}, 1)), {6, 4}, std::nullopt, device)
                 .requires_grad_();
  Tensor x = from_vector(testing::values(filled({8, 6}, 2)), {8, 6}, std::nullopt, device);
  Tensor y = from_vector(testing::values(filled({8, 4}, 3)), {8, 4}, std::nullopt, device);
  std::vector<float> losses;
  for (int step = 0; step < 3; ++step) {
    Tensor pred;
    {
      std::optional<AutocastScope> scope;
      if (bf16) scope.emplace(DType::bf16);
      pred = matmul(x, w);
    }
    Tensor diff = pred - y;  // bf16 - f32 promotes to f32
    Tensor loss = mean(diff * diff);
    loss.backward();
    EXPECT_EQ(w.grad().dtype(), DType::f32);
    {
      NoGradGuard no_grad;
      w.copy_(w - w.grad() * 0.1);
      w.set_grad(Tensor());
    }
    mark_step();
    losses.push_back(loss.item());
  }
  EXPECT_EQ(w.dtype(), DType::f32);
  return losses;
}

TEST(Autocast, TrainingStaysCloseToF32OnRefAndCpu) {
  for (Device d : {Device{DeviceType::ref, 0}, Device{DeviceType::cpu, 0}}) {
    const std::vector<float> f32 = train(d, false), bf16 = train(d, true);
    for (size_t i = 0; i < f32.size(); ++i)
      EXPECT_NEAR(bf16[i], f32[i], 2e-2 * (1 + std::abs(f32[i]))) << d.to_string() << " step " << i;
    EXPECT_LT(bf16.back(), bf16.front());
  }
}

}  // namespace
}  // namespace mstep
