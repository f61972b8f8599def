// nn::Conv2d and nn::MaxPool2d.
#include "mstep/api/nn/Conv.h"

#include "lib/api/nn/Init.h"
#include "lib/api/nn/ModuleChecks.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/ShapeOps.h"

namespace mstep::nn {

std::string Size2d::to_string() const { return absl::StrCat("(", h, ", ", w, ")"); }

namespace {

void check_size(const Layer& module, absl::string_view what, const Size2d& s, int64_t min) {
  if (s.h < min || s.w < min)
    checks::fail(module, absl::StrCat(what, " must be >= ", min),
                 absl::StrCat(what, " ", s.to_string()),
                 "Pass one value for both dims or {height, width}.");
}

/// Checks a [N, C, H, W] or [C, H, W] input: channel count and room for
/// one (dilated) window after padding.
void check_spatial_input(const Layer& module, const Tensor& input, int64_t channels,
                         const Size2d& kernel, const Size2d& padding, const Size2d& dilation) {
  checks::require_defined(module, input, "input");
  if (input.dim() != 3 && input.dim() != 4)
    checks::fail(module,
                 absl::StrCat("expected a 4-D input [N, ",
                              channels > 0 ? absl::StrCat(channels) : "C",
                              ", H, W] or an unbatched 3-D one"),
                 checks::describe(input), "Inputs are NCHW; add a batch dim with unsqueeze(0).");
  if (channels > 0 && input.size(-3) != channels)
    checks::fail(module,
                 absl::StrCat("expected input of shape [N, ", channels, ", H, W] (in_channels ",
                              channels, ")"),
                 checks::describe(input),
                 "Inputs are NCHW: dim -3 holds the channels; permute channels-last data.");
  const int64_t need_h = dilation.h * (kernel.h - 1) + 1, need_w = dilation.w * (kernel.w - 1) + 1;
  if (input.size(-2) + 2 * padding.h < need_h || input.size(-1) + 2 * padding.w < need_w)
    checks::fail(module,
                 absl::StrCat("input spatial size (", input.size(-2), ", ", input.size(-1),
                              ") plus padding is smaller than the kernel window (", need_h, ", ",
                              need_w, ")"),
                 checks::describe(input), "Use a larger input, more padding or a smaller kernel.");
}

/// Runs `op` on a batched view of a possibly unbatched input.
template <typename F> Tensor batched(const Tensor& input, F op) {
  if (input.dim() == 4) return op(input);
  return squeeze(op(unsqueeze(input, 0)), 0);
}

}  // namespace

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride,
               Size2d padding, Size2d dilation, int64_t groups, bool with_bias)
    : Layer("Conv2d"), in_channels_(in_channels), out_channels_(out_channels),
      kernel_size_(kernel_size), stride_(stride), padding_(padding), dilation_(dilation),
      groups_(groups), with_bias_(with_bias) {
  const auto& me = *this;
  checks::require_positive(me, "in_channels", in_channels);
  checks::require_positive(me, "out_channels", out_channels);
  checks::require_positive(me, "groups", groups);
  check_size(me, "kernel_size", kernel_size, 1);
  check_size(me, "stride", stride, 1);
  check_size(me, "padding", padding, 0);
  check_size(me, "dilation", dilation, 1);
  if (in_channels % groups != 0 || out_channels % groups != 0)
    checks::fail(me, "in_channels and out_channels must be divisible by groups",
                 absl::StrCat("in_channels ", in_channels, ", out_channels ", out_channels,
                              ", groups ", groups),
                 "Each group convolves in_channels / groups inputs into out_channels / groups "
                 "outputs.");
  const int64_t fan_in = in_channels / groups * kernel_size.h * kernel_size.w;
  const double bound = init::kaiming_bound(fan_in);
  weight = init::uniform({out_channels, in_channels / groups, kernel_size.h, kernel_size.w}, bound);
  register_parameter("weight", weight);
  if (with_bias) {
    bias = init::uniform({out_channels}, bound);
    register_parameter("bias", bias);
  }
}

void Conv2d::reset_parameters() {
  const double bound =
      init::kaiming_bound(in_channels_ / groups_ * kernel_size_.h * kernel_size_.w);
  init::assign(weight, init::uniform(weight.shape(), bound));
  if (bias.defined()) init::assign(bias, init::uniform(bias.shape(), bound));
}

std::string Conv2d::repr() const {
  return absl::StrCat("Conv2d(", in_channels_, ", ", out_channels_,
                      ", kernel_size=", kernel_size_.to_string(), ", stride=", stride_.to_string(),
                      ", padding=", padding_.to_string(), ", dilation=", dilation_.to_string(),
                      ", groups=", groups_, ", bias=", with_bias_ ? "true" : "false", ")");
}

Tensor Conv2d::forward(const Tensor& input) {
  check_spatial_input(*this, input, in_channels_, kernel_size_, padding_, dilation_);
  return batched(input, [&](const Tensor& x) {
    return conv2d(x, weight, bias, {stride_.h, stride_.w}, {padding_.h, padding_.w},
                  {dilation_.h, dilation_.w}, groups_);
  });
}

MaxPool2d::MaxPool2d(Size2d kernel_size, std::optional<Size2d> stride, Size2d padding,
                     Size2d dilation, bool ceil_mode)
    : Layer("MaxPool2d"), kernel_size_(kernel_size), stride_(stride.value_or(kernel_size)),
      padding_(padding), dilation_(dilation), ceil_mode_(ceil_mode) {
  const auto& me = *this;
  check_size(me, "kernel_size", kernel_size_, 1);
  check_size(me, "stride", stride_, 1);
  check_size(me, "padding", padding_, 0);
  check_size(me, "dilation", dilation_, 1);
  // PyTorch's rule: padding at most half the kernel, so no window is all padding.
  if (2 * padding_.h > kernel_size_.h || 2 * padding_.w > kernel_size_.w)
    checks::fail(
        me, "padding must be at most half the kernel size",
        absl::StrCat("kernel_size ", kernel_size_.to_string(), ", padding ", padding_.to_string()),
        "Reduce the padding.");
}

std::string MaxPool2d::repr() const {
  return absl::StrCat("MaxPool2d(kernel_size=", kernel_size_.to_string(),
                      ", stride=", stride_.to_string(), ", padding=", padding_.to_string(),
                      ", dilation=", dilation_.to_string(),
                      ", ceil_mode=", ceil_mode_ ? "true" : "false", ")");
}

Tensor MaxPool2d::forward(const Tensor& input) {
  check_spatial_input(*this, input, 0, kernel_size_, padding_, dilation_);
  return batched(input, [&](const Tensor& x) {
    return max_pool2d(x, {kernel_size_.h, kernel_size_.w}, {stride_.h, stride_.w},
                      {padding_.h, padding_.w}, {dilation_.h, dilation_.w}, ceil_mode_);
  });
}

}  // namespace mstep::nn
