// nn::Conv2d and nn::MaxPool2d over NCHW (or unbatched CHW) inputs, with
// PyTorch's parameter layout and default initialization.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mstep/api/nn/Layer.h"

namespace mstep::nn {

/// A spatial argument given as one value for both dims (`3`) or as
/// {height, width} (`{3, 5}`), like libtorch's ExpandingArray<2>.
struct Size2d {
  Size2d(int64_t both) : h(both), w(both) {}  // NOLINT: implicit on purpose
  Size2d(int64_t height, int64_t width) : h(height), w(width) {}
  std::string to_string() const;
  int64_t h, w;
};

/// weight [out_channels, in_channels / groups, kh, kw], bias [out_channels],
/// both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
/// in_channels / groups * kh * kw, as torch.nn.Conv2d. Zero padding only.
class Conv2d : public Layer {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2d kernel_size, Size2d stride = 1,
         Size2d padding = 0, Size2d dilation = 1, int64_t groups = 1, bool bias = true);

  /// [N, C_in, H, W] -> [N, C_out, H', W'] (or without N).
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;
  void reset_parameters();

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }

  Tensor weight;
  Tensor bias;  // undefined without bias

 private:
  int64_t in_channels_, out_channels_;
  Size2d kernel_size_, stride_, padding_, dilation_;
  int64_t groups_;
  bool with_bias_;
};

/// Max over kernel windows; stride defaults to the kernel size (PyTorch).
class MaxPool2d : public Layer {
 public:
  MaxPool2d(Size2d kernel_size, std::optional<Size2d> stride = std::nullopt, Size2d padding = 0,
            Size2d dilation = 1, bool ceil_mode = false);

  /// [N, C, H, W] -> [N, C, H', W'] (or without N).
  Tensor forward(const Tensor& input) override;
  std::string repr() const override;

 private:
  Size2d kernel_size_, stride_, padding_, dilation_;
  bool ceil_mode_;
};

}  // namespace mstep::nn
