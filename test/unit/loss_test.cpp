// Unit tests for losses: nll_loss (every reduction, ignore_index, the
// runtime out-of-range target error), cross_entropy with label smoothing,
// mse_loss, binary_cross_entropy_with_logits, and every error path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "mstep/mstep.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using testing::error_of;
using testing::f32;
using ::testing::HasSubstr;
using testing::i64;
using ::testing::Pointwise;

/// log-probabilities [[-1, -2, -3], [-0.5, -1.5, -2.5]] (not normalized:
/// nll_loss only picks entries).
Tensor lp23() { return f32({-1, -2, -3, -0.5, -1.5, -2.5}, {2, 3}); }

TEST(Loss, NllLossReductions) {
  Tensor t = i64({2, 0}, {2});
  Tensor none = nll_loss(lp23(), t, Reduction::none);
  EXPECT_TRUE(none.is_pending());
  EXPECT_EQ(none.type(), (TensorType{Shape{2}, DType::f32}));
  EXPECT_THAT(none.to_vector<float>(), ElementsAre(3, 0.5));
  Tensor m = nll_loss(lp23(), t);
  EXPECT_EQ(m.shape(), Shape{});
  EXPECT_EQ(m.item(), 1.75);
  EXPECT_EQ(nll_loss(lp23(), t, Reduction::sum).item(), 3.5);
}

TEST(Loss, NllLossIgnoreIndex) {
  Tensor t = i64({2, -100}, {2});
  EXPECT_THAT(nll_loss(lp23(), t, Reduction::none).to_vector<float>(), ElementsAre(3, 0));
  EXPECT_EQ(nll_loss(lp23(), t).item(), 3);  // mean over the one counted target
  EXPECT_EQ(nll_loss(lp23(), t, Reduction::sum).item(), 3);
  // A custom ignore_index that is also a valid class.
  EXPECT_TRUE(std::isnan(nll_loss(lp23(), i64({1, 1}, {2}), Reduction::mean, 1).item()));
  EXPECT_EQ(nll_loss(lp23(), i64({1, 0}, {2}), Reduction::mean, 1).item(), 0.5);
}

TEST(Loss, NllLossAllIgnoredMeanIsNaN) {
  Tensor t = i64({-100, -100}, {2});
  EXPECT_TRUE(std::isnan(nll_loss(lp23(), t).item()));
  EXPECT_EQ(nll_loss(lp23(), t, Reduction::sum).item(), 0);
}

TEST(Loss, NllLossOneDimInputAndInt32Target) {
  Tensor lp = f32({-1, -2, -3}, {3});
  Tensor t = i64({1}, {});
  EXPECT_EQ(nll_loss(lp, t).item(), 2);
  EXPECT_EQ(nll_loss(lp, t, Reduction::none).shape(), Shape{});
  Tensor t32 = from_vector(std::vector<int32_t>{0, 1}, {2});
  EXPECT_THAT(nll_loss(lp23(), t32, Reduction::none).to_vector<float>(), ElementsAre(1, 1.5));
}

TEST(Loss, NllLossEmptyBatch) {
  Tensor lp = zeros({0, 3});
  Tensor t = zeros({0}, DType::i64);
  EXPECT_TRUE(std::isnan(nll_loss(lp, t).item()));
  EXPECT_EQ(nll_loss(lp, t, Reduction::sum).item(), 0);
}

TEST(Loss, CrossEntropyMatchesLogSoftmaxFormula) {
  Tensor logits = f32({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor t = i64({0, 2}, {2});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double l0 = lse - 1, l1 = std::log(3.0);
  EXPECT_THAT(cross_entropy(logits, t, Reduction::none).to_vector<double>(),
              Pointwise(DoubleNear(1e-6), {l0, l1}));
  EXPECT_NEAR(cross_entropy(logits, t).item(), (l0 + l1) / 2, 1e-6);
  EXPECT_NEAR(cross_entropy(logits, t, Reduction::sum).item(), l0 + l1, 1e-6);
}

TEST(Loss, CrossEntropyLabelSmoothing) {
  // (1 - ls) * nll + ls / C * sum_c(-log_probs), ignored rows contribute
  // nothing and the mean divides by the rows that are not ignored.
  Tensor logits = f32({1, 2, 3, 0, 0, 0, 5, 5, 5}, {3, 3});
  Tensor t = i64({0, -100, 1}, {3});
  const double ls = 0.2;
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double nll0 = lse - 1, smooth0 = 3 * lse - 6;
  const double nll2 = std::log(3.0), smooth2 = 3 * std::log(3.0);
  const double row0 = (1 - ls) * nll0 + ls / 3 * smooth0;
  const double row2 = (1 - ls) * nll2 + ls / 3 * smooth2;
  EXPECT_THAT(cross_entropy(logits, t, Reduction::none, -100, ls).to_vector<double>(),
              Pointwise(DoubleNear(1e-5), {row0, 0.0, row2}));
  EXPECT_NEAR(cross_entropy(logits, t, Reduction::mean, -100, ls).item(), (row0 + row2) / 2, 1e-5);
  EXPECT_NEAR(cross_entropy(logits, t, Reduction::sum, -100, ls).item(), row0 + row2, 1e-5);
}

TEST(Loss, CrossEntropyOneDimLogitsAndBf16) {
  Tensor logits = f32({0, 0, 0, 0}, {4});
  EXPECT_NEAR(cross_entropy(logits, i64({3}, {})).item(), std::log(4.0), 1e-6);
  Tensor b = from_vector(std::vector<float>{0, 0, 0, 0}, {1, 4}, DType::bf16);
  Tensor l = cross_entropy(b, i64({2}, {1}));
  EXPECT_EQ(l.dtype(), DType::bf16);
  EXPECT_NEAR(l.item(), std::log(4.0), 1e-2);
}

TEST(Loss, CrossEntropyLargeLogitsStayFinite) {
  Tensor logits = f32({1000, 0, -1000, 1000}, {2, 2});
  EXPECT_THAT(cross_entropy(logits, i64({0, 0}, {2}), Reduction::none).to_vector<float>(),
              ElementsAre(0, 2000));
}

TEST(Loss, OutOfRangeTargetIsARuntimeError) {
  // The check needs the target's values, so it happens when the graph runs.
  std::string msg;
  {
    Tensor loss = nll_loss(lp23(), i64({1, 3}, {2}));
    EXPECT_TRUE(loss.is_pending());
    msg = error_of([&] { loss.item(); });
  }  // drop the failed pending tensor so later steps do not rerun it
  EXPECT_THAT(msg, HasSubstr("nll_loss"));
  EXPECT_THAT(msg, HasSubstr("target 3 at position 1 is out of range for C = 3 classes"));
  {
    Tensor loss = cross_entropy(lp23(), i64({-1, 0}, {2}));
    msg = error_of([&] { loss.item(); });
  }
  EXPECT_THAT(msg, HasSubstr("target -1 at position 0 is out of range for C = 3"));
  EXPECT_THAT(msg, HasSubstr("ignore_index -100"));
}

TEST(Loss, MseLoss) {
  Tensor x = f32({1, 2, 3}, {3});
  Tensor y = f32({1, 1, 1}, {3});
  EXPECT_THAT(mse_loss(x, y, Reduction::none).to_vector<float>(), ElementsAre(0, 1, 4));
  EXPECT_NEAR(mse_loss(x, y).item(), 5.0 / 3, 1e-6);
  EXPECT_EQ(mse_loss(x, y, Reduction::sum).item(), 5);
  // Broadcasting, as PyTorch: [2, 1] against [3].
  Tensor col = f32({0, 1}, {2, 1});
  EXPECT_THAT(mse_loss(col, x, Reduction::none).to_vector<float>(), ElementsAre(1, 4, 9, 0, 1, 4));
}

TEST(Loss, BinaryCrossEntropyWithLogits) {
  Tensor x = f32({0, 100, -100, 2}, {4});
  Tensor y = f32({1, 0, 1, 0.25}, {4});
  const double last = std::log1p(std::exp(2.0)) - 2 * 0.25;
  EXPECT_THAT(binary_cross_entropy_with_logits(x, y, Reduction::none).to_vector<double>(),
              Pointwise(DoubleNear(1e-4), {std::log(2.0), 100.0, 100.0, last}));
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, y, Reduction::sum).item(),
              std::log(2.0) + 200 + last, 1e-3);
  EXPECT_NEAR(binary_cross_entropy_with_logits(x, y).item(),
              (std::log(2.0) + 200 + last) / 4, 1e-3);
}

TEST(LossErrors, NllLossIntegerLogProbs) {
  std::string msg = error_of([] { nll_loss(i64({0, 1}, {1, 2}), i64({0}, {1})); });
  EXPECT_THAT(msg, HasSubstr("mstep::nll_loss: log_probs must be floating-point"));
  EXPECT_THAT(msg, HasSubstr("log_probs i64[1, 2], target i64[1]"));
}

TEST(LossErrors, NllLossSpatialInput) {
  std::string msg = error_of([] { nll_loss(zeros({2, 3, 4}), zeros({2, 4}, DType::i64)); });
  EXPECT_THAT(msg, HasSubstr("expects log_probs of shape [N, C] or [C]"));
  EXPECT_THAT(msg, HasSubstr("f32[2, 3, 4]"));
}

TEST(LossErrors, NllLossFloatTarget) {
  std::string msg = error_of([] { nll_loss(lp23(), f32({0, 1}, {2})); });
  EXPECT_THAT(msg, HasSubstr("mstep::nll_loss: target must hold integer class indices"));
  EXPECT_THAT(msg, HasSubstr("target f32[2]"));
}

TEST(LossErrors, NllLossTargetShape) {
  std::string msg = error_of([] { nll_loss(lp23(), i64({0, 1, 2}, {3})); });
  EXPECT_THAT(msg, HasSubstr("target must have shape [N] = [2]"));
  EXPECT_THAT(msg, HasSubstr("log_probs f32[2, 3], target i64[3]"));
  EXPECT_THAT(error_of([] { nll_loss(zeros({3}), i64({0}, {1})); }),
              HasSubstr("target must be 0-d for a 1-D input"));
}

TEST(LossErrors, UnknownReduction) {
  std::string msg =
      error_of([] { nll_loss(lp23(), i64({0, 1}, {2}), static_cast<Reduction>(7)); });
  EXPECT_THAT(msg, HasSubstr("mstep::nll_loss: unknown reduction 7"));
  EXPECT_THAT(error_of([] { mse_loss(zeros({2}), zeros({2}), static_cast<Reduction>(9)); }),
              HasSubstr("mstep::mse_loss: unknown reduction 9"));
}

TEST(LossErrors, CrossEntropyBadLabelSmoothing) {
  std::string msg = error_of(
      [] { cross_entropy(lp23(), i64({0, 1}, {2}), Reduction::mean, -100, 1.5); });
  EXPECT_THAT(msg, HasSubstr("mstep::cross_entropy: label_smoothing must be in [0, 1], got 1.5"));
}

TEST(LossErrors, CrossEntropyChecksUnderItsOwnName) {
  std::string msg = error_of([] { cross_entropy(lp23(), i64({0}, {1})); });
  EXPECT_THAT(msg, HasSubstr("mstep::cross_entropy: target must have shape [N] = [2]"));
  EXPECT_THAT(msg, HasSubstr("logits f32[2, 3]"));
}

TEST(LossErrors, MseLossShapesAndDtype) {
  std::string msg = error_of([] { mse_loss(zeros({2, 3}), zeros({4})); });
  EXPECT_THAT(msg, HasSubstr("mstep::mse_loss: shapes [2, 3] and [4] cannot be broadcast"));
  EXPECT_THAT(msg, HasSubstr("input f32[2, 3], target f32[4]"));
  EXPECT_THAT(error_of([] { mse_loss(i64({1}, {1}), zeros({1})); }),
              HasSubstr("mstep::mse_loss: input must be floating-point"));
}

TEST(LossErrors, BceWithLogitsShapeAndTargetDtype) {
  constexpr const char* kOp = "mstep::binary_cross_entropy_with_logits";
  std::string msg = error_of([] { binary_cross_entropy_with_logits(zeros({3}), zeros({3, 1})); });
  EXPECT_THAT(msg, HasSubstr(std::string(kOp) + ": target must have the shape of logits"));
  EXPECT_THAT(msg, HasSubstr("logits f32[3], target f32[3, 1]"));
  msg = error_of([] { binary_cross_entropy_with_logits(zeros({2}), i64({0, 1}, {2})); });
  EXPECT_THAT(msg, HasSubstr("logits and target must be floating-point"));
}

TEST(LossErrors, UndefinedOperand) {
  EXPECT_THAT(error_of([] { nll_loss(Tensor(), i64({0}, {1})); }),
              HasSubstr("mstep::nll_loss: an operand is undefined"));
}

}  // namespace
}  // namespace mstep
