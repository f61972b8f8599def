// Matrix products, convolution and pooling (NCHW).
#pragma once

#include "mstep/api/Tensor.h"

namespace mstep {

/// torch.matmul: 1-D operands are promoted and the added dim removed;
/// batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
/// [B, n, m] x [B, m, p] -> [B, n, p], no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias, weight [out, in] as torch.nn.Linear.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// Spatial parameters take one value (used for both dims) or two.
Tensor conv2d(const Tensor& input, const Tensor& weight,
              const Tensor& bias = {}, absl::Span<const int64_t> stride = {1},
              absl::Span<const int64_t> padding = {0},
              absl::Span<const int64_t> dilation = {1}, int64_t groups = 1);
/// An empty stride means stride = kernel (as PyTorch).
Tensor max_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride = {},
                  absl::Span<const int64_t> padding = {0},
                  absl::Span<const int64_t> dilation = {1},
                  bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride = {},
                  absl::Span<const int64_t> padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);

}  // namespace mstep
