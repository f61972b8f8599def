// The GIoU custom op of examples/custom_ops/giou_loss against its
// composition of built-in ops on ref and cpu: values and gradients for
// every reduction, boxes with equal coordinates included (ties, where the
// gradient of a max or min splits in half; the oracle cases avoid them),
// and the op's errors at the call. PyTorch's values: the oracle
// (test/oracle/cases/giou.py).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "examples/custom_ops/giou_loss/GiouLoss.h"
#include "test/unit/TestUtil.h"

namespace mstep {
namespace {

using ::testing::HasSubstr;

/// Pairs: overlapping, disjoint, nested, identical (every coordinate a
/// tie) and sharing one edge.
const std::vector<float> kPred = {0, 0, 2, 2, 0, 0, 1, 1, 0, 0, 4, 4, 1, 1, 3, 5, 0, 0, 2, 3};
const std::vector<float> kTarget = {1, 1, 3, 4, 2, 3, 4, 5, 1, 1, 2, 3, 1, 1, 3, 5, 0, 1, 3, 2};

class GiouLossTest : public ::testing::TestWithParam<DeviceType> {};

TEST_P(GiouLossTest, CustomOpEqualsTheCompositionInValuesAndGradients) {
  const Device d{GetParam(), 0};
  for (const char* reduction : {"none", "mean", "sum"}) {
    auto run = [&](bool custom) {
      Tensor pred = from_vector(kPred, {5, 4}, std::nullopt, d).requires_grad_();
      Tensor target = from_vector(kTarget, {5, 4}, std::nullopt, d).requires_grad_();
      Tensor loss = custom ? examples::giou_loss(pred, target, reduction)
                           : examples::giou_loss_composed(pred, target, reduction);
      sum(loss * 1.5).backward();
      mark_step();
      return std::vector<std::vector<float>>{loss.to_vector<float>(),
                                             pred.grad().to_vector<float>(),
                                             target.grad().to_vector<float>()};
    };
    const auto got = run(true), want = run(false);
    for (size_t t = 0; t < got.size(); ++t) {
      ASSERT_EQ(got[t].size(), want[t].size());
      for (size_t i = 0; i < got[t].size(); ++i)
        EXPECT_NEAR(got[t][i], want[t][i], 1e-6 * (1 + std::fabs(want[t][i])))
            << reduction << " tensor " << t << " [" << i << "]";
    }
  }
}

TEST_P(GiouLossTest, BadInputIsAnErrorAtTheCallNamingTheOp) {
  const Device d{GetParam(), 0};
  Tensor boxes = from_vector(kPred, {5, 4}, std::nullopt, d);
  std::string msg = testing::error_of([&] { examples::giou_loss(boxes, boxes, "max"); });
  EXPECT_THAT(msg, HasSubstr("custom_op 'giou_loss'"));
  EXPECT_THAT(msg, HasSubstr("reduction must be \"none\", \"mean\" or \"sum\", got \"max\""));
  msg = testing::error_of([&] {
    examples::giou_loss(reshape(boxes, {4, 5}), reshape(boxes, {4, 5}));
  });
  EXPECT_THAT(msg, HasSubstr("pred must hold [N, 4] boxes"));
  EXPECT_THAT(msg, HasSubstr("f32[4, 5]"));
  msg = testing::error_of([&] { examples::giou_loss(boxes, slice(boxes, 0, 0, 2)); });
  EXPECT_THAT(msg, HasSubstr("target must have pred's shape and dtype"));
  msg = testing::error_of([&] { examples::giou_loss(boxes.to(DType::i64), boxes.to(DType::i64)); });
  EXPECT_THAT(msg, HasSubstr("input 0 ('pred') must be f32 or f64, got i64"));
  // The backward op checks the loss gradient's type.
  msg = testing::error_of([&] {
    custom("giou_loss_backward", {boxes, boxes, zeros({5})}, {{"reduction", std::string("mean")}});
  });
  EXPECT_THAT(msg, HasSubstr("the loss gradient must be f32[]"));
  msg = testing::error_of([&] { examples::giou_loss_composed(boxes, boxes, "max"); });
  EXPECT_THAT(msg, HasSubstr("giou_loss_composed: reduction must be"));
}

INSTANTIATE_TEST_SUITE_P(RefAndCpu, GiouLossTest,
                         ::testing::Values(DeviceType::ref, DeviceType::cpu), [](const auto& info) {
                           return info.param == DeviceType::ref ? "ref" : "cpu";
                         });

} // namespace
} // namespace mstep
