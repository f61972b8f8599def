// The GIoU loss's custom ops, registered with the runtime alone (no
// tracer or compiler), so that both the example program and a plugin
// (giou_plugin.cpp, for mstep-run --plugin) can register them:
//   "giou_loss"          (pred, target [N, 4], f32|f64) {reduction} -> loss
//   "giou_loss_backward" (pred, target, grad of the loss) {reduction}
//                        -> (grad pred, grad target)
// both version 1, with ref and cpu kernels. See GiouLoss.h for the loss.
#pragma once

#include "absl/status/status.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep::examples {

/// The epsilon of the loss's divisions (torchvision's).
inline constexpr double kEps = 1e-7;

/// Registers both ops in the global registry; again is a no-op.
absl::Status register_giou_ops();

} // namespace mstep::examples
