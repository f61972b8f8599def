// The GIoU loss as a custom op (the ops themselves: GiouOps.cpp) and as a
// composition of built-in ops.
#include "examples/custom_ops/giou_loss/GiouLoss.h"

#include "absl/strings/str_cat.h"
#include "examples/custom_ops/giou_loss/GiouOps.h"

namespace mstep::examples {

void register_giou_loss() { throw_if_error(register_giou_ops()); }

Tensor giou_loss(const Tensor& pred, const Tensor& target, const std::string& reduction) {
  static const bool registered = (register_giou_loss(), true);
  (void)registered;
  return custom("giou_loss", {pred, target}, {{"reduction", reduction}})[0];
}

Tensor giou_loss_composed(const Tensor& pred, const Tensor& target, const std::string& reduction) {
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("giou_loss_composed: reduction must be \"none\", \"mean\" or \"sum\", got \"",
                     reduction, "\"")));
  auto coord = [](const Tensor& boxes, int64_t k) { return squeeze(slice(boxes, 1, k, k + 1), 1); };
  const Tensor x1 = coord(pred, 0), y1 = coord(pred, 1), x2 = coord(pred, 2), y2 = coord(pred, 3);
  const Tensor x1g = coord(target, 0), y1g = coord(target, 1), x2g = coord(target, 2),
               y2g = coord(target, 3);
  const Tensor xk1 = maximum(x1, x1g), yk1 = maximum(y1, y1g);
  const Tensor xk2 = minimum(x2, x2g), yk2 = minimum(y2, y2g);
  const Tensor overlap = logical_and(gt(yk2, yk1), gt(xk2, xk1));
  const Tensor inter = where(overlap, (xk2 - xk1) * (yk2 - yk1), 0.0);
  const Tensor uni = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter;
  const Tensor iou = inter / (uni + kEps);
  const Tensor area_c =
      (maximum(x2, x2g) - minimum(x1, x1g)) * (maximum(y2, y2g) - minimum(y1, y1g));
  const Tensor loss = 1.0 - (iou - (area_c - uni) / (area_c + kEps));
  if (reduction == "none") return loss;
  return reduction == "sum" ? sum(loss) : mean(loss);
}

} // namespace mstep::examples
