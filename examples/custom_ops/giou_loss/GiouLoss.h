// The generalized IoU loss over boxes (x1, y1, x2, y2) (Rezatofighi et al.,
// CVPR 2019; torchvision.ops.generalized_box_iou_loss), two ways:
//   giou_loss          a custom op ("giou_loss") with ref and cpu kernels and
//                      a backward op ("giou_loss_backward") with the same;
//   giou_loss_composed the same formula from built-in mstep ops.
// Per box pair, with eps = 1e-7 as torchvision:
//   I = intersection area (0 unless the boxes overlap), U = area1 + area2 - I,
//   C = area of the smallest box enclosing both,
//   loss = 1 - I / (U + eps) + (C - U) / (C + eps).
// Reduction "none" gives the [N] losses, "mean" their mean (0 for N = 0,
// as torchvision), "sum" their sum.
#pragma once

#include <string>

#include "mstep/mstep.h"

namespace mstep::examples {

/// Registers "giou_loss" and "giou_loss_backward" (again is a no-op).
void register_giou_loss();

/// The custom op on pred, target [N, 4] (f32 or f64, one dtype): [N] for
/// reduction "none", a scalar for "mean" and "sum". Registers it first.
/// Gradients flow to both inputs.
Tensor giou_loss(const Tensor& pred, const Tensor& target, const std::string& reduction = "mean");

/// The same loss composed of built-in ops (maximum, minimum, where, ...),
/// torchvision's formula step by step; the reference for giou_loss.
Tensor giou_loss_composed(const Tensor& pred, const Tensor& target,
                          const std::string& reduction = "mean");

} // namespace mstep::examples
