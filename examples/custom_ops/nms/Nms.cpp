// Greedy NMS as the custom op "nms" (one sequential kernel, registered for
// ref and cpu) and the detection post-processing step around it.
#include "examples/custom_ops/nms/Nms.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mstep::examples {

namespace {

constexpr const char* kOp = "nms";

/// The iou_threshold attribute, or an error when it is outside [0, 1]
/// (NaN included).
absl::StatusOr<double> threshold_of(const CustomAttrView& attrs) {
  MSTEP_ASSIGN_OR_RETURN(double t, attrs.get_double("iou_threshold"));
  if (!(t >= 0.0 && t <= 1.0))
    return absl::InvalidArgumentError(absl::StrCat("iou_threshold must be in [0, 1], got ", t));
  return t;
}

/// boxes [N, 4] and scores [N] -> keep [N] bool.
absl::StatusOr<std::vector<TensorType>> rule(absl::Span<const TensorType> in,
                                             const CustomAttrView& attrs) {
  MSTEP_RETURN_IF_ERROR(threshold_of(attrs).status());
  const TensorType& boxes = in[0];
  const TensorType& scores = in[1];
  if (boxes.shape.rank() != 2 || boxes.shape[1] != 4)
    return absl::InvalidArgumentError("boxes must be [N, 4] (x1, y1, x2, y2)");
  if (scores.shape.rank() != 1 || scores.shape[0] != boxes.shape[0])
    return absl::InvalidArgumentError(
        absl::StrCat("scores must be [N] with the boxes' N = ", boxes.shape[0]));
  return std::vector<TensorType>{TensorType{Shape({boxes.shape[0]}), DType::boolean}};
}

/// torchvision.ops.nms's CPU kernel (nms_kernel_impl), writing a mask
/// instead of the kept indices.
absl::Status kernel(const HostKernelCall& call) {
  MSTEP_ASSIGN_OR_RETURN(const double threshold, threshold_of(call.attrs));
  const int64_t n = call.input_types[0].shape[0];
  const auto* box = static_cast<const float*>(call.inputs[0]);
  const auto* score = static_cast<const float*>(call.inputs[1]);
  auto* keep = static_cast<bool*>(call.outputs[0]);

  // Decreasing score, ties in index order, NaN first (torch.sort's order
  // with stable=True, descending=True).
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return score[a] > score[b] || (std::isnan(score[a]) && !std::isnan(score[b]));
  });
  std::vector<float> area(n);
  for (int64_t i = 0; i < n; ++i)
    area[i] = (box[4 * i + 2] - box[4 * i]) * (box[4 * i + 3] - box[4 * i + 1]);
  std::vector<char> suppressed(n, 0);
  std::fill(keep, keep + n, false);
  for (int64_t a = 0; a < n; ++a) {
    const int64_t i = order[a];
    if (suppressed[i]) continue;
    keep[i] = true;
    const float* bi = box + 4 * i;
    for (int64_t b = a + 1; b < n; ++b) {
      const int64_t j = order[b];
      if (suppressed[j]) continue;
      const float* bj = box + 4 * j;
      const float w = std::max(0.0f, std::min(bi[2], bj[2]) - std::max(bi[0], bj[0]));
      const float h = std::max(0.0f, std::min(bi[3], bj[3]) - std::max(bi[1], bj[1]));
      const float inter = w * h;
      const float iou = inter / (area[i] + area[j] - inter);
      if (static_cast<double>(iou) > threshold) suppressed[j] = 1;
    }
  }
  return absl::OkStatus();
}

} // namespace

void register_nms() {
  // Neither input gets a gradient: the mask is piecewise constant.
  register_custom_op({.name = kOp,
                      .schema = {.inputs = {{"boxes", {DType::f32}, /*differentiable=*/false},
                                            {"scores", {DType::f32}, /*differentiable=*/false}},
                                 .attrs = {{"iou_threshold", CustomAttrType::float64}},
                                 .num_outputs = 1},
                      .shape_rule = rule,
                      // The same sequential code for both (see Nms.h).
                      .kernels = {{"ref", host_kernel(kernel)}, {"cpu", host_kernel(kernel)}}});
}

Tensor nms_keep_mask(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  static const bool registered = (register_nms(), true);
  (void)registered;
  return custom(kOp, {boxes, scores}, {{"iou_threshold", iou_threshold}})[0];
}

Detections postprocess(const Tensor& boxes, const Tensor& logits, double iou_threshold,
                       double score_threshold) {
  const Tensor scores = sigmoid(logits);
  const Tensor keep =
      logical_and(nms_keep_mask(boxes, scores, iou_threshold), gt(scores, score_threshold));
  const Tensor kept_scores = where(keep, scores, 0.0);
  return {.keep = keep,
          .scores = kept_scores,
          .boxes = where(unsqueeze(keep, 1), boxes, 0.0),
          .count = sum(keep.to(DType::i64)),
          .score_sum = sum(kept_scores)};
}

Candidates synthetic_candidates(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(0, 1);
  const int objects = std::uniform_int_distribution<int>(3, 8)(rng);
  struct Box {
    float x, y, w, h;
  };
  std::vector<Box> truth(objects);
  for (Box& b : truth)
    b = {unit(rng) * 500, unit(rng) * 500, 20 + unit(rng) * 100, 20 + unit(rng) * 100};
  Candidates c{std::vector<float>(4 * n), std::vector<float>(n)};
  std::normal_distribution<float> jitter(0, 0.08f), noise(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    Box b;
    float logit;
    if (i % 3 != 2) { // two in three candidates near an object
      const Box& t = truth[static_cast<size_t>(i) % truth.size()];
      b = {t.x + jitter(rng) * t.w, t.y + jitter(rng) * t.h, t.w * (1 + jitter(rng)),
           t.h * (1 + jitter(rng))};
      logit = 2 + noise(rng);
    } else {
      b = {unit(rng) * 550, unit(rng) * 550, 5 + unit(rng) * 60, 5 + unit(rng) * 60};
      logit = -3 + noise(rng);
    }
    float* out = &c.boxes[4 * i];
    out[0] = b.x, out[1] = b.y, out[2] = b.x + b.w, out[3] = b.y + b.h;
    c.logits[i] = logit;
  }
  return c;
}

} // namespace mstep::examples
