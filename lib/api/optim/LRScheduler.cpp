// Learning-rate schedulers: closed forms of PyTorch 1.13's StepLR,
// CosineAnnealingLR, LinearLR and SequentialLR(LinearLR, CosineAnnealingLR).
#include "mstep/api/optim/LRScheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"

namespace mstep::optim {

namespace {
void require(bool ok, absl::string_view op, absl::string_view problem, absl::string_view hint) {
  if (!ok) detail::throw_op_error(absl::StrCat("optim::", op), problem, "", hint);
}

double cosine(double base_lr, double eta_min, int64_t epoch, int64_t t_max) {
  return eta_min + (base_lr - eta_min) *
                       (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) /
                                     static_cast<double>(t_max))) /
                       2;
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer)
    : optimizer_(optimizer), base_lr_(optimizer.lr()), last_lr_(optimizer.lr()) {}

void LRScheduler::step() { set_last_epoch(last_epoch_ + 1); }

void LRScheduler::set_last_epoch(int64_t epoch) {
  require(epoch >= 0, "LRScheduler::set_last_epoch", absl::StrCat("negative epoch ", epoch), "");
  const double lr = lr_at(epoch);
  optimizer_.set_lr(lr);  // fills the device scalar: no recompile
  last_epoch_ = epoch;
  last_lr_ = lr;
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  require(step_size > 0, "StepLR", absl::StrCat("step_size must be positive, got ", step_size), "");
  set_last_epoch(0);
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr() * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  require(T_max > 0, "CosineAnnealingLR", absl::StrCat("T_max must be positive, got ", T_max), "");
  set_last_epoch(0);
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return cosine(base_lr(), eta_min_, epoch, t_max_);
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor),
      total_iters_(total_iters) {
  require(start_factor > 0 && start_factor <= 1 && end_factor >= 0 && end_factor <= 1, "LinearLR",
          absl::StrCat("factors must lie in (0, 1] and [0, 1], got ", start_factor, " and ",
                       end_factor),
          "");
  require(total_iters > 0, "LinearLR",
          absl::StrCat("total_iters must be positive, got ", total_iters), "");
  set_last_epoch(0);
}

double LinearLR::lr_at(int64_t epoch) const {
  const double t = static_cast<double>(std::min(epoch, total_iters_));
  return base_lr() *
         (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_));
}

WarmupCosineLR::WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                               double eta_min, double warmup_start_factor)
    : LRScheduler(optimizer), warmup_steps_(warmup_steps), total_steps_(total_steps),
      eta_min_(eta_min), start_factor_(warmup_start_factor) {
  require(
      warmup_steps > 0 && total_steps > warmup_steps, "WarmupCosineLR",
      absl::StrCat("need 0 < warmup_steps < total_steps, got ", warmup_steps, " and ", total_steps),
      "");
  require(warmup_start_factor >= 0 && warmup_start_factor <= 1, "WarmupCosineLR",
          absl::StrCat("warmup_start_factor must lie in [0, 1], got ", warmup_start_factor), "");
  set_last_epoch(0);
}

double WarmupCosineLR::lr_at(int64_t epoch) const {
  if (epoch < warmup_steps_)
    return base_lr() * (start_factor_ + (1 - start_factor_) * static_cast<double>(epoch) /
                                            static_cast<double>(warmup_steps_));
  return cosine(base_lr(), eta_min_, epoch - warmup_steps_, total_steps_ - warmup_steps_);
}

}  // namespace mstep::optim
