// Normalization, softmax and dropout.
#pragma once

#include <optional>

#include "mstep/api/Tensor.h"

namespace mstep {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
/// Normalizes over the trailing dims given by `normalized_shape`.
Tensor layer_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                  const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);
/// x / sqrt(mean(x^2) + eps) * weight. Without eps, the dtype's machine
/// epsilon (as torch.nn.functional.rms_norm).
Tensor rms_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                const Tensor& weight = {},
                std::optional<double> eps = std::nullopt);
/// Zeroes elements with probability p and scales the rest by 1/(1-p).
/// Identity when !train or p == 0. Draws from the global Philox stream.
Tensor dropout(const Tensor& x, double p = 0.5, bool train = true);

}  // namespace mstep
