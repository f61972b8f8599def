// Loss functions, PyTorch semantics.
#pragma once

#include "mstep/api/Tensor.h"

namespace mstep {

enum class Reduction : uint8_t { none, mean, sum };

/// logits [N, C], integer target [N]. Targets equal to `ignore_index` add
/// nothing and are not counted in the mean.
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction = Reduction::mean,
                     int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction = Reduction::mean,
                int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target,
                Reduction reduction = Reduction::mean);
Tensor binary_cross_entropy_with_logits(const Tensor& logits,
                                        const Tensor& target,
                                        Reduction reduction = Reduction::mean);

}  // namespace mstep
