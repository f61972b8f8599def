// Learning-rate schedulers against PyTorch 1.13: each expected sequence is
// get_last_lr()[0] after construction and after each step(), printed by
// /usr/bin/python3 (torch 1.13) for an SGD optimizer with lr=0.1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "mstep/mstep.h"

namespace mstep {
namespace {

Tensor param() { return from_vector(std::vector<float>{0}, {1}).requires_grad_(); }

/// The scheduler's learning rates, and the optimizer's, over `steps`.
template <typename Scheduler>
void expect_sequence(Scheduler& scheduler, optim::Optimizer& opt,
                     const std::vector<double>& torch_lrs) {
  for (size_t i = 0; i < torch_lrs.size(); ++i) {
    if (i > 0) scheduler.step();
    SCOPED_TRACE(i);
    // Closed forms against PyTorch's chained updates: equal to rounding.
    EXPECT_NEAR(scheduler.get_last_lr(), torch_lrs[i], 1e-14 + 1e-12 * torch_lrs[i]);
    EXPECT_EQ(opt.lr(), scheduler.get_last_lr());
    EXPECT_EQ(scheduler.last_epoch(), static_cast<int64_t>(i));
  }
}

TEST(LRScheduler, StepLRMatchesPyTorch) {
  // torch.optim.lr_scheduler.StepLR(opt, 3, 0.5)
  optim::SGD opt({param()}, {.lr = 0.1});
  optim::StepLR s(opt, 3, 0.5);
  expect_sequence(s, opt, {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125});
}

TEST(LRScheduler, CosineAnnealingLRMatchesPyTorch) {
  // torch.optim.lr_scheduler.CosineAnnealingLR(opt, 5, 0.001), past T_max.
  optim::SGD opt({param()}, {.lr = 0.1});
  optim::CosineAnnealingLR s(opt, 5, 0.001);
  expect_sequence(s, opt,
                  {0.1, 0.0905463412215599, 0.06579634122155989, 0.035203658778440096,
                   0.010453658778440105, 0.001, 0.010453658778440102, 0.03520365877844012,
                   0.06579634122155993, 0.09054634122155995, 0.10000000000000005,
                   0.09054634122155998, 0.06579634122155995});
}

TEST(LRScheduler, LinearLRMatchesPyTorch) {
  // torch.optim.lr_scheduler.LinearLR(opt, 0.25, 1.0, 4)
  optim::SGD opt({param()}, {.lr = 0.1});
  optim::LinearLR s(opt, 0.25, 1.0, 4);
  expect_sequence(s, opt,
                  {0.025, 0.043750000000000004, 0.06250000000000001, 0.08125000000000002,
                   0.10000000000000002, 0.10000000000000002, 0.10000000000000002,
                   0.10000000000000002});
}

TEST(LRScheduler, WarmupCosineMatchesPyTorchSequentialLR) {
  // SequentialLR(opt, [LinearLR(opt, 0.1, 1.0, 3), CosineAnnealingLR(opt, 7, 1e-4)],
  //              milestones=[3])
  optim::SGD opt({param()}, {.lr = 0.1});
  optim::WarmupCosineLR s(opt, 3, 10, 1e-4, 0.1);
  expect_sequence(s, opt,
                  {0.010000000000000002, 0.04, 0.07, 0.1, 0.09505339495172584, 0.08119331560284375,
                   0.061164920651117914, 0.03893507934888211, 0.018906684397156263,
                   0.005046605048274169, 0.0001, 0.005046605048274164, 0.018906684397156252});
}

TEST(LRScheduler, ScheduledRateDrivesTheUpdate) {
  Tensor w = param();
  optim::SGD opt({w}, {.lr = 1.0});
  optim::StepLR s(opt, 1, 0.5);  // 1, 0.5, 0.25
  for (int i = 0; i < 3; ++i) {
    w.set_grad(from_vector(std::vector<float>{1}, {1}));
    opt.step();
    s.step();
    mark_step();
  }
  EXPECT_FLOAT_EQ(w.item(), -1.75f);
}

TEST(LRScheduler, ResumeAtEpoch) {
  optim::SGD opt({param()}, {.lr = 0.1});
  optim::StepLR s(opt, 3, 0.5);
  s.set_last_epoch(7);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.025);
  EXPECT_DOUBLE_EQ(s.base_lr(), 0.1);
  s.step();
  EXPECT_EQ(s.last_epoch(), 8);
}

TEST(LRScheduler, InvalidArgumentsThrow) {
  optim::SGD opt({param()}, {.lr = 0.1});
  EXPECT_THROW(optim::StepLR(opt, 0), Error);
  EXPECT_THROW(optim::CosineAnnealingLR(opt, 0), Error);
  EXPECT_THROW(optim::LinearLR(opt, 0.0), Error);
  EXPECT_THROW(optim::WarmupCosineLR(opt, 5, 5), Error);
  EXPECT_DOUBLE_EQ(opt.lr(), 0.1);
}

}  // namespace
}  // namespace mstep
