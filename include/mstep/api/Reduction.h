// Reductions over dims. An empty `dims` reduces over every dim. Negative
// dims count from the end.
#pragma once

#include <optional>

#include "mstep/api/Tensor.h"

namespace mstep {

/// Bool and integer inputs sum to i64 (as PyTorch).
Tensor sum(const Tensor& x, absl::Span<const int64_t> dims = {},
           bool keepdim = false);
/// Floating inputs only.
Tensor mean(const Tensor& x, absl::Span<const int64_t> dims = {},
            bool keepdim = false);
/// Values of the maximum/minimum over `dims` (all dims when empty).
Tensor max(const Tensor& x, absl::Span<const int64_t> dims = {},
           bool keepdim = false);
Tensor min(const Tensor& x, absl::Span<const int64_t> dims = {},
           bool keepdim = false);
/// Index (i64) of the first maximum along `dim`; over the flattened
/// tensor when `dim` is not given.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt,
              bool keepdim = false);
Tensor logsumexp(const Tensor& x, absl::Span<const int64_t> dims,
                 bool keepdim = false);
/// Variance with Bessel's `correction` (1 = unbiased, as torch.var).
Tensor var(const Tensor& x, absl::Span<const int64_t> dims = {},
           int64_t correction = 1, bool keepdim = false);

}  // namespace mstep
