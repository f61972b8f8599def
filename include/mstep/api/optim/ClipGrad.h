// Gradient clipping by total norm (torch.nn.utils.clip_grad_norm_).
#pragma once

#include <limits>
#include <vector>

#include "mstep/api/Tensor.h"

namespace mstep::optim {

/// The norm of all gradients together (as if concatenated), as a lazy 0-d
/// tensor, after scaling every gradient in place by
///   coef = min(max_norm / (total_norm + 1e-6), 1).
/// Everything is computed on the device: no sync point, and the graph
/// does not depend on the norm's value. Parameters without a gradient are
/// skipped (a tensor listed twice counts once); with none, returns a 0-d
/// f32 zero. `norm_type` is p > 0 or infinity (the largest |g|).
Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

}  // namespace mstep::optim
