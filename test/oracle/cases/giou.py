"""Oracle cases for the GIoU loss custom op (examples/custom_ops/giou_loss):
its values and the gradients of both box sets, reductions none/mean/sum,
f32 and f64.

The reference is torchvision.ops.generalized_box_iou_loss when torchvision
is installed (Debian's python3-torch ships without it); otherwise the same
formula written out here in torch ops (torchvision 0.14's code, with its
masked assignment of the intersection as a torch.where), differentiated by
autograd.

Tolerance: the chain divides differences of areas (I / (U + eps) and
(C - U) / (C + eps)), so a coordinate's rounding error is amplified by the
box sizes over the areas; no fixed rule bounds that well. The cases
simulate each side's f32 (or f64) rounding through the chain and its
backward (tolerance.simulated_sigma) and allow LAMBDA * sqrt(2) sigmas
(tolerance.from_sigma). The boxes keep their edges apart (no pair within
0.05 of touching and no equal coordinates), so no rounding flips which
box a max or min picks or whether a pair overlaps.
"""
import torch

from oracle_lib import case

# A generator of our own, so the other case files' inputs stay as they were.
_gen = torch.Generator().manual_seed(1618)

try:
    from torchvision.ops import generalized_box_iou_loss as _torchvision_giou
except ImportError:
    _torchvision_giou = None


def composed(pred, target, reduction, eps=1e-7):
    """torchvision.ops.generalized_box_iou_loss (0.14), step by step."""
    x1, y1, x2, y2 = pred.unbind(dim=-1)
    x1g, y1g, x2g, y2g = target.unbind(dim=-1)
    xkis1, ykis1 = torch.max(x1, x1g), torch.max(y1, y1g)
    xkis2, ykis2 = torch.min(x2, x2g), torch.min(y2, y2g)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk = torch.where(mask, (xkis2 - xkis1) * (ykis2 - ykis1), torch.zeros_like(x1))
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk
    iouk = intsctk / (unionk + eps)
    xc1, yc1 = torch.min(x1, x1g), torch.min(y1, y1g)
    xc2, yc2 = torch.max(x2, x2g), torch.max(y2, y2g)
    area_c = (xc2 - xc1) * (yc2 - yc1)
    loss = 1 - (iouk - ((area_c - unionk) / (area_c + eps)))
    if reduction == "mean":
        return loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    return loss.sum() if reduction == "sum" else loss


def reference(pred, target, reduction):
    if _torchvision_giou is not None:
        return _torchvision_giou(pred, target, reduction=reduction)
    return composed(pred, target, reduction)


def _far_from(values, others, gap):
    """Whether every value is `gap` away from every other coordinate."""
    return bool(((values[:, None] - others[None, :]).abs() >= gap).all())


def boxes(n, dtype):
    """n pairs (pred, target) of boxes: most pairs overlap, some only
    touch their enclosing box (disjoint), one contains the other; the x
    (and y) coordinates of a pair are all 0.05 apart at least."""
    while True:
        xy = torch.rand(n, 2, generator=_gen, dtype=torch.float64) * 10
        wh = 1 + torch.rand(n, 2, generator=_gen, dtype=torch.float64) * 4
        shift = (torch.rand(n, 2, generator=_gen, dtype=torch.float64) - 0.5) * 6
        twh = wh * (0.5 + torch.rand(n, 2, generator=_gen, dtype=torch.float64))
        shift[0] = wh[0] * 0.25  # a target inside its pred box
        twh[0] = wh[0] * 0.5
        shift[1] = wh[1] + 2  # disjoint
        pred = torch.cat([xy, xy + wh], 1)
        target = torch.cat([xy + shift, xy + shift + twh], 1)
        ok = all(_far_from(torch.stack([pred[i, d], pred[i, d + 2]]),
                           torch.stack([target[i, d], target[i, d + 2]]), 0.05)
                 for i in range(n) for d in (0, 1))
        if ok:
            return pred.to(dtype), target.to(dtype)


def cases():
    out = []
    for name, dt in (("f32", torch.float32), ("f64", torch.float64)):
        pred, target = boxes(24, dt)
        for red in ("none", "mean", "sum"):
            out.append(case(f"giou_loss_{red}_{name}", "giou_loss", [pred, target],
                            lambda p, t, r=red: reference(p, t, r),
                            attrs={"reduction": red}, tol={"simulate": True}, grad=True,
                            gen=_gen))
    return out
