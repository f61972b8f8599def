// Learning-rate schedulers. Each step() computes the closed form of its
// PyTorch 1.13 namesake for the new epoch and writes it into the
// optimizer's learning-rate device scalar (Optimizer::set_lr), so a
// schedule never recompiles the step graph.
//
// As in PyTorch, constructing a scheduler takes the optimizer's current
// learning rate as the base and applies epoch 0; call step() after each
// optimizer.step(). A scheduler keeps a reference to its optimizer, which
// must outlive it.
#pragma once

#include <cstdint>

#include "mstep/api/optim/Optimizer.h"

namespace mstep::optim {

class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets the optimizer's learning rate.
  void step();
  /// Jumps to `epoch` (e.g. when resuming) and sets the learning rate.
  void set_last_epoch(int64_t epoch);
  int64_t last_epoch() const { return last_epoch_; }
  /// The learning rate the last step set (PyTorch's get_last_lr()[0]).
  double get_last_lr() const { return last_lr_; }
  double base_lr() const { return base_lr_; }
  /// The learning rate at `epoch`.
  virtual double lr_at(int64_t epoch) const = 0;

 protected:
  explicit LRScheduler(Optimizer& optimizer);

 private:
  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = 0;
  double last_lr_;
};

/// base_lr * gamma^(epoch / step_size) (integer division).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
/// Past T_max the cosine goes on, back up, as PyTorch's does.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

/// Linear warmup: base_lr * factor, the factor going linearly from
/// start_factor to end_factor over total_iters epochs, then staying.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5);
  double lr_at(int64_t epoch) const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// LinearLR(start_factor, 1, warmup_steps) for the first warmup_steps
/// epochs, then CosineAnnealingLR(T_max = total_steps - warmup_steps,
/// eta_min) from there: PyTorch's SequentialLR of the two with
/// milestones = {warmup_steps}.
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                 double eta_min = 0, double warmup_start_factor = 1.0 / 3);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t warmup_steps_, total_steps_;
  double eta_min_, start_factor_;
};

}  // namespace mstep::optim
