"""Oracle cases for the NMS custom op (examples/custom_ops/nms): the keep
mask of greedy non-maximum suppression, compared exactly.

The reference is torchvision.ops.nms when torchvision is installed
(Debian's python3-torch ships without it) and the scores have no ties;
otherwise torchvision's CPU kernel (nms_kernel_impl, torchvision 0.14)
written out here in torch ops: a sort by decreasing score, then each box
not yet suppressed is kept and suppresses the later boxes whose IoU with
it, computed in the boxes' f32, is above the threshold. torchvision's sort
is not stable, so its order among equal scores is unspecified; the
written-out kernel sorts stably (equal scores in index order), the rule
the mstep op documents. torchvision returns the kept indices; the mask
marks them.

The inputs stress the rule's edges: equal scores (the sort's tie order
decides), identical boxes, boxes nested so that their IoU is exactly 0.5,
zero-area boxes (lines and points, whose IoU with each other is 0/0 = NaN,
which suppresses nothing), at thresholds 0, 0.5 and 1, plus an empty and a
one-box input.
"""
import torch

from oracle_lib import case

# A generator of our own, so the other case files' inputs stay as they were.
_gen = torch.Generator().manual_seed(1899)

try:
    from torchvision.ops import nms as _torchvision_nms
except ImportError:
    _torchvision_nms = None


def greedy_nms(boxes, scores, iou_threshold):
    """torchvision's nms_kernel_impl in torch ops, with a stable sort: the
    kept indices."""
    order = torch.sort(scores, stable=True, descending=True).indices
    x1, y1, x2, y2 = boxes.unbind(dim=1)
    areas = (x2 - x1) * (y2 - y1)
    suppressed = torch.zeros(len(scores), dtype=torch.bool)
    keep = []
    for a in range(len(order)):
        i = order[a]
        if suppressed[i]:
            continue
        keep.append(int(i))
        rest = order[a + 1:]
        w = torch.clamp(torch.min(x2[i], x2[rest]) - torch.max(x1[i], x1[rest]), min=0)
        h = torch.clamp(torch.min(y2[i], y2[rest]) - torch.max(y1[i], y1[rest]), min=0)
        inter = w * h
        iou = inter / (areas[i] + areas[rest] - inter)
        # torchvision compares the f32 IoU with the double threshold.
        suppressed[rest[iou.double() > iou_threshold]] = True
    return torch.tensor(keep, dtype=torch.int64)


def keep_mask(boxes, scores, iou_threshold):
    if _torchvision_nms is not None and len(scores.unique()) == len(scores):
        kept = _torchvision_nms(boxes, scores, iou_threshold)
    else:
        kept = greedy_nms(boxes, scores, iou_threshold)
    mask = torch.zeros(len(scores), dtype=torch.bool)
    mask[kept] = True
    return mask


def random_boxes(n):
    """n boxes in a 10 x 10 field on a grid of 0.5, so that many overlap,
    many coordinates coincide and some widths or heights are 0."""
    xy = torch.randint(0, 20, (n, 2), generator=_gen).double() / 2
    wh = torch.randint(0, 9, (n, 2), generator=_gen).double() / 2
    return torch.cat([xy, xy + wh], 1).float()


def random_scores(n, levels):
    """Scores drawn from `levels` values: many ties."""
    return (torch.randint(0, levels, (n,), generator=_gen).double() / levels).float()


def edge_boxes():
    """Hand-placed boxes and scores: duplicates with equal scores, a box
    whose IoU with a larger one is exactly 0.5, zero-area boxes (lines,
    points, two identical points), a box suppressed only through a box that
    is itself suppressed (greedy order matters)."""
    boxes = torch.tensor([
        [0, 0, 2, 1], [0, 0, 1, 1],          # nested: IoU exactly 0.5
        [3, 3, 5, 5], [3, 3, 5, 5],          # identical, equal scores
        [6, 0, 6, 4], [6, 0, 6, 4],          # identical vertical lines
        [7, 7, 7, 7], [7, 7, 7, 7],          # identical points
        [6, 6, 8, 8],                        # contains the points
        [0, 5, 4, 9], [2, 5, 6, 9], [4, 5, 8, 9],  # a chain: IoU 1/3 each
        [1.5, 1.5, 1.5, 3.5], [0, 0, 0, 0],
    ], dtype=torch.float32)
    scores = torch.tensor([0.9, 0.8, 0.7, 0.7, 0.6, 0.6, 0.5, 0.5, 0.4,
                           0.95, 0.9, 0.85, 0.3, 0.3], dtype=torch.float32)
    return boxes, scores


def cases():
    out = []
    inputs = {"edges": edge_boxes(),
              "random64": (random_boxes(64), random_scores(64, 8)),
              "random200": (random_boxes(200), random_scores(200, 50)),
              "empty": (torch.zeros(0, 4), torch.zeros(0)),
              "one": (torch.tensor([[1.0, 1.0, 2.0, 3.0]]), torch.tensor([0.5]))}
    for name, (boxes, scores) in inputs.items():
        for thr in (0.0, 0.5, 1.0):
            out.append(case(f"nms_{name}_iou{round(thr * 100)}", "nms", [boxes, scores],
                            lambda b, s, t=thr: keep_mask(b, s, t),
                            attrs={"iou_threshold": thr}))
    # A threshold between the chain's 1/3 and the nested pair's 0.5.
    boxes, scores = edge_boxes()
    out.append(case("nms_edges_iou40", "nms", [boxes, scores],
                    lambda b, s: keep_mask(b, s, 0.4), attrs={"iou_threshold": 0.4}))
    return out
