// The GIoU loss's custom ops (forward and backward, each with a ref kernel
// and a cpu kernel, a cuda kernel from GiouCuda.cpp and a neuron kernel from
// GiouNeuron.cpp) and their registration, with the runtime alone: the
// example (GiouLoss.cpp) and the plugin (giou_plugin.cpp) both register
// them from here. The two kernels share the per-box code: ref runs it on the calling thread, cpu
// splits the boxes over the cores with mstep::cpu_parallel_for. Sums run
// over fixed blocks of boxes, added in block order, so both kernels give
// the same bits whatever the thread count.
#include "examples/custom_ops/giou_loss/GiouOps.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"

namespace mstep::examples {

absl::StatusOr<GiouReduction> giou_reduction(const CustomAttrView& attrs) {
  MSTEP_ASSIGN_OR_RETURN(std::string r, attrs.get_string("reduction"));
  if (r == "none") return GiouReduction::none;
  if (r == "mean") return GiouReduction::mean;
  if (r == "sum") return GiouReduction::sum;
  return absl::InvalidArgumentError(
      absl::StrCat("reduction must be \"none\", \"mean\" or \"sum\", got \"", r, "\""));
}

namespace {

constexpr int64_t kBlock = 4096; // boxes per partial sum
constexpr int64_t kGrain = 1024; // boxes per parallel range, at least

using Reduction = GiouReduction;
absl::StatusOr<Reduction> reduction_of(const CustomAttrView& attrs) { return giou_reduction(attrs); }

/// How a kernel runs `fn(begin, end)` over [0, n): ref on the calling
/// thread, cpu over the cores.
using Split = void (*)(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn);
void serial(int64_t n, int64_t, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n > 0) fn(0, n);
}

/// The loss of one pair of boxes p, t (x1, y1, x2, y2), torchvision's
/// operations in torchvision's order.
template <typename T> T pair_loss(const T* p, const T* t) {
  const T eps = static_cast<T>(kEps);
  const T ix1 = std::max(p[0], t[0]), iy1 = std::max(p[1], t[1]);
  const T ix2 = std::min(p[2], t[2]), iy2 = std::min(p[3], t[3]);
  const T inter = ix2 > ix1 && iy2 > iy1 ? (ix2 - ix1) * (iy2 - iy1) : T(0);
  const T uni = (p[2] - p[0]) * (p[3] - p[1]) + (t[2] - t[0]) * (t[3] - t[1]) - inter;
  const T iou = inter / (uni + eps);
  const T area_c =
      (std::max(p[2], t[2]) - std::min(p[0], t[0])) * (std::max(p[3], t[3]) - std::min(p[1], t[1]));
  return T(1) - (iou - (area_c - uni) / (area_c + eps));
}

/// The share of the gradient of max(a, b) that goes to a: all when a is
/// larger, half on a tie (PyTorch's maximum and minimum), else none.
template <typename T> T max_share(T a, T b) { return a > b ? T(1) : a == b ? T(0.5) : T(0); }
template <typename T> T min_share(T a, T b) { return max_share(b, a); }

/// gp, gt: the gradients of g * pair_loss(p, t) by p and t. With
/// loss = 1 - I / (U + eps) + (C - U) / (C + eps) and U = A_p + A_t - I:
///   dI (direct) = -g / (U + eps)
///   dU = g I / (U + eps)^2 - g / (C + eps)
///   dC = g / (C + eps) - g (C - U) / (C + eps)^2
/// then I = iw * ih (when the boxes overlap), C = cw * ch, each side of
/// those a difference of a max and a min of the boxes' coordinates. No
/// branches: the compiler vectorizes the loop over boxes.
template <typename T> inline void pair_grad(const T* p, const T* t, T g, T* gp, T* gt) {
  const T eps = static_cast<T>(kEps);
  const T ix1 = std::max(p[0], t[0]), iy1 = std::max(p[1], t[1]);
  const T ix2 = std::min(p[2], t[2]), iy2 = std::min(p[3], t[3]);
  const T iw = ix2 - ix1, ih = iy2 - iy1;
  const bool overlap = ix2 > ix1 && iy2 > iy1;
  const T inter = overlap ? iw * ih : T(0);
  const T pw = p[2] - p[0], ph = p[3] - p[1], tw = t[2] - t[0], th = t[3] - t[1];
  const T uni = pw * ph + tw * th - inter;
  const T cw = std::max(p[2], t[2]) - std::min(p[0], t[0]);
  const T ch = std::max(p[3], t[3]) - std::min(p[1], t[1]);
  const T area_c = cw * ch;
  const T ue = uni + eps, ce = area_c + eps;
  const T d_uni = g * inter / (ue * ue) - g / ce;
  const T d_inter = -g / ue - d_uni;
  const T d_c = g / ce - g * (area_c - uni) / (ce * ce);
  const T d_iw = overlap ? d_inter * ih : T(0), d_ih = overlap ? d_inter * iw : T(0);
  const T d_cw = d_c * ch, d_ch = d_c * cw;
  // Each coordinate: its box's area in U, then I's side (x1, y1 through a
  // max, x2, y2 through a min), then C's (the other way round).
  const T s0 = max_share(p[0], t[0]), s1 = max_share(p[1], t[1]);
  const T s2 = min_share(p[2], t[2]), s3 = min_share(p[3], t[3]);
  const T c0 = min_share(p[0], t[0]), c1 = min_share(p[1], t[1]);
  const T c2 = max_share(p[2], t[2]), c3 = max_share(p[3], t[3]);
  gp[0] = -d_uni * ph - d_iw * s0 - d_cw * c0;
  gp[1] = -d_uni * pw - d_ih * s1 - d_ch * c1;
  gp[2] = d_uni * ph + d_iw * s2 + d_cw * c2;
  gp[3] = d_uni * pw + d_ih * s3 + d_ch * c3;
  gt[0] = -d_uni * th - d_iw * (1 - s0) - d_cw * (1 - c0);
  gt[1] = -d_uni * tw - d_ih * (1 - s1) - d_ch * (1 - c1);
  gt[2] = d_uni * th + d_iw * (1 - s2) + d_cw * (1 - c2);
  gt[3] = d_uni * tw + d_ih * (1 - s3) + d_ch * (1 - c3);
}

/// giou_loss: (pred, target) -> loss.
template <typename T> absl::Status forward(const HostKernelCall& call, Split split) {
  MSTEP_ASSIGN_OR_RETURN(Reduction reduction, reduction_of(call.attrs));
  const int64_t n = call.input_types[0].shape[0];
  const auto* pred = static_cast<const T*>(call.inputs[0]);
  const auto* target = static_cast<const T*>(call.inputs[1]);
  auto* out = static_cast<T*>(call.outputs[0]);
  if (reduction == Reduction::none) {
    split(n, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = pair_loss(pred + 4 * i, target + 4 * i);
    });
    return absl::OkStatus();
  }
  // One partial sum (in double) per block, then the blocks in order.
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
  split(blocks, 1, [&](int64_t first, int64_t last) {
    T losses[kBlock]; // the block's losses first: that loop vectorizes
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * kBlock, size = std::min(n - begin, kBlock);
      for (int64_t i = 0; i < size; ++i)
        losses[i] = pair_loss(pred + 4 * (begin + i), target + 4 * (begin + i));
      for (int64_t i = 0; i < size; ++i) partial[b] += losses[i];
    }
  });
  double total = 0;
  for (double s : partial) total += s;
  if (reduction == Reduction::mean) total = n > 0 ? total / static_cast<double>(n) : 0.0;
  out[0] = static_cast<T>(total);
  return absl::OkStatus();
}

/// giou_loss_backward: (pred, target, grad of the loss) -> (grad pred,
/// grad target).
template <typename T> absl::Status backward(const HostKernelCall& call, Split split) {
  MSTEP_ASSIGN_OR_RETURN(Reduction reduction, reduction_of(call.attrs));
  const int64_t n = call.input_types[0].shape[0];
  // Outputs never alias inputs here (the schema declares no alias).
  const T* __restrict pred = static_cast<const T*>(call.inputs[0]);
  const T* __restrict target = static_cast<const T*>(call.inputs[1]);
  const T* __restrict grad = static_cast<const T*>(call.inputs[2]);
  T* __restrict grad_pred = static_cast<T*>(call.outputs[0]);
  T* __restrict grad_target = static_cast<T*>(call.outputs[1]);
  const T shared =
      reduction == Reduction::mean ? grad[0] / static_cast<T>(std::max<int64_t>(n, 1)) : grad[0];
  split(n, kGrain, [&](int64_t begin, int64_t end) {
    if (reduction == Reduction::none)
      for (int64_t i = begin; i < end; ++i)
        pair_grad(pred + 4 * i, target + 4 * i, grad[i], grad_pred + 4 * i, grad_target + 4 * i);
    else
      for (int64_t i = begin; i < end; ++i)
        pair_grad(pred + 4 * i, target + 4 * i, shared, grad_pred + 4 * i, grad_target + 4 * i);
  });
  return absl::OkStatus();
}

/// The kernel `fn` for f32 and f64 inputs, run with `split`.
template <template <typename> class Kernel>
std::shared_ptr<const CustomKernel> kernel_for(Split split) {
  return host_kernel([split](const HostKernelCall& call) {
    return call.input_types[0].dtype == DType::f64 ? Kernel<double>::run(call, split)
                                                   : Kernel<float>::run(call, split);
  });
}
template <typename T> struct Forward {
  static absl::Status run(const HostKernelCall& c, Split s) { return forward<T>(c, s); }
};
template <typename T> struct Backward {
  static absl::Status run(const HostKernelCall& c, Split s) { return backward<T>(c, s); }
};

/// pred and target: [N, 4] boxes of one type. The loss: [N] or a scalar.
absl::StatusOr<std::vector<TensorType>> forward_rule(absl::Span<const TensorType> in,
                                                     const CustomAttrView& attrs) {
  MSTEP_ASSIGN_OR_RETURN(Reduction reduction, reduction_of(attrs));
  const TensorType& pred = in[0];
  if (pred.shape.rank() != 2 || pred.shape[1] != 4)
    return absl::InvalidArgumentError("pred must hold [N, 4] boxes (x1, y1, x2, y2)");
  if (in[1] != pred) return absl::InvalidArgumentError("target must have pred's shape and dtype");
  const Shape loss = reduction == Reduction::none ? Shape({pred.shape[0]}) : Shape({});
  return std::vector<TensorType>{TensorType{loss, pred.dtype}};
}

/// pred, target and the loss's gradient -> the gradients of pred and target.
absl::StatusOr<std::vector<TensorType>> backward_rule(absl::Span<const TensorType> in,
                                                      const CustomAttrView& attrs) {
  MSTEP_ASSIGN_OR_RETURN(std::vector<TensorType> loss, forward_rule(in.subspan(0, 2), attrs));
  if (in[2] != loss[0])
    return absl::InvalidArgumentError(
        absl::StrCat("the loss gradient must be ", loss[0].to_string()));
  return std::vector<TensorType>{in[0], in[1]};
}

} // namespace

absl::Status register_giou_ops() {
  const std::vector<DType> floats = {DType::f32, DType::f64};
  const CustomAttrSpec reduction{"reduction", CustomAttrType::string, std::string("mean")};
  CustomOpRegistry& registry = CustomOpRegistry::global();
  MSTEP_RETURN_IF_ERROR(
      registry.add({.name = "giou_loss_backward",
                    .schema = {.inputs = {{"pred", floats}, {"target", floats}, {"grad", floats}},
                               .attrs = {reduction},
                               .num_outputs = 2},
                    .shape_rule = backward_rule,
                    .kernels = {{"ref", kernel_for<Backward>(serial)},
                                {"cpu", kernel_for<Backward>(cpu_parallel_for)},
                                {"cuda", giou_backward_cuda_kernel()},
                                {"neuron", giou_backward_neuron_kernel()}}}));
  return registry.add({.name = "giou_loss",
                       .schema = {.inputs = {{"pred", floats}, {"target", floats}},
                                  .attrs = {reduction},
                                  .num_outputs = 1},
                       .shape_rule = forward_rule,
                       .kernels = {{"ref", kernel_for<Forward>(serial)},
                                   {"cpu", kernel_for<Forward>(cpu_parallel_for)},
                                   {"cuda", giou_forward_cuda_kernel()},
                                   {"neuron", giou_forward_neuron_kernel()}},
                       .backward = CustomBackward{.op = "giou_loss_backward"}});
}

} // namespace mstep::examples
