// Greedy non-maximum suppression (NMS) as a custom op with a fixed-size
// output, and a detection post-processing step built on it.
//
// nms_keep_mask(boxes [N, 4] f32 (x1, y1, x2, y2), scores [N] f32,
// iou_threshold in [0, 1]) -> keep [N] bool. The boxes are visited in
// order of decreasing score (NaN counts as the highest score, as in
// torch.sort); each box not yet suppressed is kept and suppresses every
// later box whose IoU with it is above the threshold, IoU = I / (A_i + A_j
// - I) in f32, compared in double: the greedy loop of torchvision.ops.nms's
// CPU kernel (a 0/0 IoU of two empty boxes is NaN and suppresses nothing).
// Equal scores are visited in index order (a stable sort); torchvision
// sorts them with an unstable sort, so its order among them is
// unspecified. keep[i] says whether box i is kept: the boxes
// torchvision.ops.nms returns, as a mask in the input's order.
//
// Why a mask: torchvision.ops.nms returns the kept indices, a tensor whose
// length depends on the box values. Its CUDA kernel computes the IoU bit
// matrix on the GPU, copies it to the host for the greedy pass and sizes
// the result there: a device-to-host copy and a host decision, which CUDA
// stream capture does not permit (capture fails), and which torch.compile
// cannot trace into a graph (a data-dependent output shape: a graph
// break, the ops after it in another graph). A captured graph replays
// fixed buffers of fixed sizes; mstep's own dynamic-shape ops (nonzero,
// masked_select) refuse to run in a capture for the same reason. The mask
// has N entries whatever the data, so the op, and everything after it
// (where(keep, scores, 0), sum(keep), ...), stays inside one captured
// graph that replays on new boxes without recompiling. (TensorRT's NMS
// plugins give fixed-size, padded outputs for the same reason.)
//
// NMS is sequential by nature: whether box j survives depends on which
// earlier boxes survived. The ref and cpu kernels run the same sequential
// code on the calling thread; only the inner loop (one kept box against
// the later ones) could be split over cores, which this example does not
// do.
#pragma once

#include <cstdint>
#include <vector>

#include "mstep/mstep.h"

namespace mstep::examples {

/// Registers the custom op "nms" (again is a no-op).
void register_nms();

/// The keep mask of greedy NMS, see above. Registers the op first. Errors
/// at the call, naming custom_op 'nms': boxes not [N, 4] f32, scores not
/// [N] f32 with boxes' N, a threshold outside [0, 1]. Not differentiable:
/// no gradient flows through the mask.
Tensor nms_keep_mask(const Tensor& boxes, const Tensor& scores, double iou_threshold);

/// The output of detection post-processing: fixed shapes, whatever is kept.
struct Detections {
  Tensor keep;      // bool [N]: kept by NMS and scoring above the threshold
  Tensor scores;    // f32 [N]: the kept boxes' scores, 0 for the others
  Tensor boxes;     // f32 [N, 4]: the kept boxes, zeros for the others
  Tensor count;     // i64 []: how many boxes are kept
  Tensor score_sum; // f32 []: the sum of the kept boxes' scores
};

/// A detector's post-processing step on N candidate boxes [N, 4] and
/// their logits [N]: scores = sigmoid(logits), NMS at `iou_threshold`,
/// then the boxes that survive and score above `score_threshold`. Lazy
/// ops only, so it traces, captures and replays like any step.
Detections postprocess(const Tensor& boxes, const Tensor& logits, double iou_threshold,
                       double score_threshold);

/// A detector's raw output on one synthetic image, on the host: `n`
/// candidate boxes [n, 4] and their logits [n]. A few objects (3 to 8) each
/// get a cluster of jittered boxes with high logits; the rest are random
/// background boxes with low logits. The same `seed` gives the same data.
struct Candidates {
  std::vector<float> boxes, logits;
};
Candidates synthetic_candidates(int64_t n, uint32_t seed);

} // namespace mstep::examples
